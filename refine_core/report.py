"""A self-contained HTML report of one run (plots inlined as PNG), plus a short text summary.

Everything comes from the run database, so a report can be rebuilt at any time, including
for a run that is still going or was killed.
"""

from __future__ import annotations

import base64
import difflib
import html
import io
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from refine_core.analyst.labels import (  # noqa: E402
    analyst_label,
    demo_access_label,
    demo_access_setting,
    expert_label,
    expert_setting,
)
from refine_core.rollout.schema import action_column, family_columns, info_name, is_latent  # noqa: E402
from refine_core.store.db import RunDatabase  # noqa: E402


@dataclass
class RunView:
    run: dict
    rounds: list[dict]
    calls: pd.DataFrame
    analyses: pd.DataFrame
    episodes: pd.DataFrame


def load_view(db: RunDatabase, run_id: int | None = None) -> RunView:
    run = db.run(run_id) if run_id is not None else db.latest_run()
    if run is None:
        raise ValueError(f"{db.path} holds no run")
    rid = run["id"]

    rounds = db.rounds(rid)
    for row in rounds:  # the database decodes JSON columns; absent ones become empty dicts
        for key in ("metrics", "timings", "fit_report", "info_schema"):
            row[key] = row.get(key) or {}
    return RunView(run=run, rounds=rounds, calls=pd.DataFrame(db.llm_calls(rid)),
                   analyses=pd.DataFrame(db.analyses(rid)), episodes=db.episodes(rid))


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def metric_plot(view: RunView, metric_name: str) -> str | None:
    rows = [(r["round"], r["metrics"].get(k, {}).get("metric_mean"), r["metrics"].get(k, {}).get("metric_std"), k)
            for r in view.rounds if r["status"] == "committed" for k in ("selection", "eval")]
    if not rows:
        return None
    df = pd.DataFrame(rows, columns=["round", "mean", "std", "kind"]).dropna(subset=["mean"])
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for kind, part in df.groupby("kind"):
        ax.errorbar(part["round"], part["mean"], yerr=part["std"].fillna(0), marker="o", capsize=3, label=kind)
    ax.set_xlabel("round")
    ax.set_ylabel(metric_name)
    ax.set_title(f"{metric_name} per refinement round")
    ax.grid(alpha=0.3)
    ax.legend()
    return _png(fig)


def traces_plot(table: pd.DataFrame, action_names: list[str]) -> str | None:
    """Latents and actions over the first diagnostic episode of the best round."""
    if table.empty:
        return None
    ep = table[table["episode"] == table["episode"].min()].sort_values("step")
    latents = [c for c in ep.columns if is_latent(c)][:6]
    acts = [c for c in (action_column("act", a) for a in action_names) if c in ep]
    experts = [c for c in (action_column("expert", a) for a in action_names) if c in ep]
    fig, axes = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    for c in latents:
        axes[0].plot(ep["step"], ep[c], label=info_name(c))
    axes[0].set_title("latents")
    for i, name in enumerate(action_names):  # one colour per action: policy solid, expert dashed
        colour = f"C{i}"
        if action_column("act", name) in acts:
            axes[1].plot(ep["step"], ep[action_column("act", name)], color=colour, label=name)
        if action_column("expert", name) in experts:
            axes[1].plot(ep["step"], ep[action_column("expert", name)], "--", color=colour, alpha=0.6)
    axes[1].set_title("executed (solid) and expert-relabel (dashed) actions" if experts
                      else "executed actions")
    axes[1].set_xlabel("step")
    for ax in axes:
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7, ncol=3)
    return _png(fig)


def _pre(text: str | None) -> str:
    return f"<pre>{html.escape(text or '')}</pre>"


def program_diff(before: str, after: str) -> str:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), "previous", "this round", lineterm="")
    lines = []
    for line in diff:
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else ""
        lines.append(f'<span class="{cls}">{html.escape(line)}</span>')
    return "<pre>" + "\n".join(lines) + "</pre>" if lines else "<p>(unchanged)</p>"


def run_labels(view: RunView, expert: bool | None = None) -> list[str]:
    """What a reader must know before trusting the numbers: who the analyst was, what it was
    told, whether its analysis code read the demonstration, which action mode the episodes
    executed and whether the diagnostics saw expert relabels. `expert` overrides what the
    run's config records."""
    from refine_core.run_setup import upgrade_recorded

    config = upgrade_recorded(view.run.get("config") if isinstance(view.run.get("config"), dict) else {})
    if expert is None:
        expert = expert_setting(config)
    described = f"Task description: {config.get('task_description') or 'not recorded (before variants existed)'}."
    mode = config.get("action_mode")
    episodes = f"Episodes executed: {'the action mean' if mode == 'mean' else 'sampled actions'}." if mode else ""
    return [text for text in (analyst_label(view.run.get("analyst")), described,
                              demo_access_label(demo_access_setting(config)), episodes, expert_label(expert)) if text]


def text_summary(view: RunView, metric_name: str, expert: bool | None = None) -> str:
    run = view.run
    lines = [f"run {run['id']} ({run['task']}, analyst {run.get('analyst')}): {len(view.rounds)} round(s)"]
    lines += [f"  note: {text}" for text in run_labels(view, expert)]
    for r in view.rounds:
        ev = r["metrics"].get("eval", {})
        sel = r["metrics"].get("selection", {})
        if r["status"] != "committed":
            lines.append(f"  round {r['round']}: FAILED - {r.get('error')}")
            continue
        lines.append(f"  round {r['round']}: selection {sel.get('metric_mean', float('nan')):.4g}, "
                     f"eval {metric_name} {ev.get('metric_mean', float('nan')):.4g} ± {ev.get('metric_std', float('nan')):.3g} "
                     f"(success {ev.get('success_rate', float('nan')):.0%}) -> {r.get('decision')}")
    calls = len(view.calls)
    tokens = int(view.calls[["tokens_in", "tokens_out"]].fillna(0).sum().sum()) if calls else 0
    lines.append(f"  analyst calls: {calls}, tokens: {tokens}; best round: {run.get('best_round')}")
    if run.get("stop_reason"):
        lines.append(f"  stopped: {run['stop_reason']}")
    return "\n".join(lines)


def _expert_seen(view: RunView, table: pd.DataFrame) -> bool | None:
    """Expert relabels as the run's config records them, else as its stored diagnostic table
    shows them (runs from before the setting existed)."""
    recorded = expert_setting(view.run.get("config") if isinstance(view.run.get("config"), dict) else None)
    if recorded is not None:
        return recorded
    if table.empty:
        return None
    experts = family_columns(table.columns, "expert")
    return bool(experts) and bool(table[experts].notna().any().any())


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:12px}
.add{color:#116329}.del{color:#a40e26}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}
details{margin:.4em 0}summary{cursor:pointer;font-weight:600}
.label{background:#fff8c5;border:1px solid #d4a72c;padding:.5em .8em}"""


def build_report(db: RunDatabase, out: Path, run_id: int | None = None) -> tuple[Path, str]:
    from refine_core.tasks.registry import get_task

    view = load_view(db, run_id)
    spec = get_task(view.run["task"]).spec
    metric = spec.metric.name
    best = view.run.get("best_round")
    table = (db.load_steps(view.run["id"], round=int(best), kind="diagnostic")
             if best is not None else pd.DataFrame())
    expert = _expert_seen(view, table)
    parts = [f"<html><head><meta charset='utf-8'><title>refine_ros report {html.escape(str(view.run['id']))}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>Refinement run {html.escape(str(view.run['id']))}: {html.escape(spec.name)}</h1>"]
    parts += [f"<p class='label'><b>{html.escape(text)}</b></p>" for text in run_labels(view, expert)]
    parts.append(_pre(text_summary(view, metric, expert)))
    plot = metric_plot(view, metric)
    if plot:
        parts.append(f"<img src='{plot}' alt='metric per round'>")

    # calls and time per stage
    if len(view.calls):
        by_role = view.calls.groupby("role").agg(calls=("role", "size"), tokens_in=("tokens_in", "sum"),
                                                 tokens_out=("tokens_out", "sum"))
        parts.append("<h2>Analyst calls</h2>" + by_role.to_html())
    timing = pd.DataFrame([{"round": r["round"], **(r["timings"] or {})} for r in view.rounds]).set_index("round") \
        if view.rounds else pd.DataFrame()
    if not timing.empty:
        parts.append("<h2>Time per stage (s)</h2>" + timing.round(2).to_html())

    previous = ""
    for r in view.rounds:
        parts.append(f"<h2>Round {r['round']} ({r['status']})</h2>")
        if r.get("error"):
            parts.append(f"<p><b>error:</b> {html.escape(str(r['error']))}</p>")
        parts.append("<details><summary>program</summary>" + _pre(r.get("program")) + "</details>")
        if previous:
            parts.append("<details open><summary>diff from the previous round</summary>"
                         + program_diff(previous, r.get("program") or "") + "</details>")
        previous = r.get("program") or ""
        if r.get("reasoning"):
            parts.append("<details open><summary>analyst reasoning</summary>" + _pre(r["reasoning"]) + "</details>")
        if len(view.analyses):
            for _, a in view.analyses[view.analyses["round"] == r["round"]].iterrows():
                parts.append(f"<details><summary>diagnostics #{a['iteration']} - {a['status']} "
                             f"({a['isolation']}, {a['duration_s']:.2f} s)</summary>"
                             + _pre(a["code"]) + "<b>printed results</b>" + _pre(a["stdout"])
                             + (_pre(a["stderr_tail"]) if a.get("stderr_tail") else "") + "</details>")
        fit = r.get("fit_report") or {}
        if fit.get("val_nll"):
            parts.append(f"<p>fit: {fit.get('epochs')} epochs, best validation NLL {fit.get('best_val_nll'):.4g}, "
                         f"{fit.get('wall_time_s', 0):.1f} s</p>")

    if best is not None:
        plot = traces_plot(table, list(spec.action_names))
        if plot:
            parts.append(f"<h2>Best round {best}: latents and actions over one episode</h2><img src='{plot}'>")
    parts.extend(rl_section(db, view.run["id"], metric))
    parts.append("</body></html>")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts))
    return out, text_summary(view, metric)


# ---- RL updates (refine_core.learn.rl) ---------------------------------------------------------
def rl_updates_figure(updates: pd.DataFrame, title: str, metric_name: str = "metric", top_params: int = 8):
    """Six panels, one row per update: whether RL helps (sampled group return, mean action on
    the selection seeds), how far each update moved the policy (windowed-ratio quantiles,
    clip fraction, approximate KL), the exploration noise (entropy and its bonus), and which
    parameters moved (largest element change per update, the `top_params` that moved most)."""
    u = updates.sort_values("update")
    x = u["update"]
    fig, axes = plt.subplots(2, 3, figsize=(14, 6.4))
    ax = axes[0, 0]
    ax.plot(x, u["return_mean"], marker=".", label="sampled group return")
    ax.fill_between(x, u["return_mean"] - u["return_std"], u["return_mean"] + u["return_std"], alpha=0.2)
    ax.set_title("training groups (one track each)")
    ax.set_ylabel("return")
    ax = axes[0, 1]
    sel = u.dropna(subset=["selection_metric"])
    xs, ys = sel["update"].tolist(), sel["selection_metric"].tolist()
    if "start_selection_metric" in u and u["start_selection_metric"].notna().any():
        xs, ys = [0, *xs], [float(u["start_selection_metric"].dropna().iloc[0]), *ys]
    ax.plot(xs, ys, marker="o", color="C2")
    ax.set_title(f"mean action on the selection seeds ({metric_name})")
    ax = axes[0, 2]
    for q, style in (("ratio_q05", ":"), ("ratio_q50", "-"), ("ratio_q95", ":")):
        if q in u:
            ax.plot(x, u[q].clip(lower=1e-6), style, color="C0", label=q.removeprefix("ratio_"))
    ax.axhspan(0.8, 1.2, color="C1", alpha=0.15, label="clip range (eps 0.2)")
    ax.set_yscale("log")
    ax.set_title("windowed ratio after the update")
    ax.legend(fontsize=7)
    ax = axes[1, 0]
    ax.plot(x, u["clip_frac"], color="C3", label="clip fraction")
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("clip fraction")
    twin = ax.twinx()
    twin.plot(x, u["approx_kl"].clip(lower=1e-8), color="C4", label="approx. KL per step")
    twin.set_yscale("log")
    twin.set_ylabel("approx. KL per step")
    ax.set_title("how far each update moved")
    ax = axes[1, 1]
    ax.plot(x, u["entropy"], color="C5")
    ax.set_ylabel("entropy per step")
    twin = ax.twinx()
    twin.plot(x, u["entropy_coef"], "--", color="grey")
    twin.set_ylabel("entropy bonus coefficient")
    ax.set_title("exploration noise")
    ax = axes[1, 2]
    moves = pd.DataFrame([{name: v.get("delta_max", float("nan")) for name, v in (p or {}).items()}
                          for p in u["params"]], index=x) if "params" in u else pd.DataFrame()
    if not moves.empty:
        for name in moves.sum().sort_values(ascending=False).index[:top_params]:
            ax.plot(moves.index, moves[name].clip(lower=1e-9), label=name)
        ax.set_yscale("log")
        ax.legend(fontsize=6, ncol=2)
    ax.set_title("largest change of each parameter")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.set_xlabel("update")
    fig.suptitle(title)
    # fixed margins wide enough for the twin axes' labels: a tight layout measures every tick
    # label first, which made this figure cost 0.8 s of CPU to draw and save instead of 0.5
    # (an experiment draws one per RL condition)
    fig.subplots_adjust(left=0.05, right=0.95, bottom=0.08, top=0.88, wspace=0.5, hspace=0.42)
    return fig


def rl_section(db: RunDatabase, run_id: int, metric_name: str) -> list[str]:
    """The RL runs stored for this run, one figure and a short table each."""
    parts = []
    for round_, label in db.rl_labels(run_id):
        updates = db.rl_updates(run_id, round=round_, label=label)
        if updates.empty:
            continue
        title = f"RL '{label}'" + (f" after round {round_}" if round_ is not None else "")
        parts.append(f"<h2>{html.escape(title)}</h2>")
        parts.append(f"<img src='{_png(rl_updates_figure(updates, title, metric_name))}' alt='RL updates'>")
        sel = updates.dropna(subset=["selection_metric"])
        if len(sel):
            columns = ["update", "resets", "return_mean", "selection_metric", "clip_frac", "approx_kl", "entropy"]
            parts.append("<details><summary>updates with a selection evaluation</summary>"
                         + sel[columns].round(4).to_html(index=False) + "</details>")
    return parts
