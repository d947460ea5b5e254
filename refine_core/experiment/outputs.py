"""What an experiment leaves behind: the table in the published layout, every episode as CSV,
Welch p-values for the key comparisons, and the plots a person would rather look at."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from refine_core.experiment.conditions import (  # noqa: E402
    PRESET_LABELS,
    PUBLISHED_MODEL,
    Condition,
    Program,
    key_comparisons,
)
from refine_core.tasks.registry import task_part  # noqa: E402

PUBLISHED_PART = "published"
"""A task folder's optional module with the published figures (`RESULTS`) and the ways our
protocol departs from the published one (`DEMONSTRATION`, `DESCRIPTION`, `RL`)."""


def published(spec, name: str, default=None):
    """`name` from the task folder's published.py (None, or `default`, when it has none)."""
    return getattr(task_part(spec.name, PUBLISHED_PART), name, default)


def mode_column(mode: str, name: str = "metric") -> str:
    """The episodes column of `name` measured in an action mode ("mean" or "sample")."""
    return f"mean_action_{name}" if mode == "mean" else name


def paired_against_il(episodes: pd.DataFrame, cond: Condition, column: str, higher_is_better: bool) -> dict:
    """An RL row against its own IL row, seed by seed on the evaluation seeds: the mean
    difference (positive = better) and one-sided paired t-test p-values for "RL is worse" and
    "RL is better" (1.0 when the two rows are identical on every seed)."""
    if not cond.rl_resets:
        return {}
    rl = episodes[episodes["condition"] == cond.name].set_index("seed")[column]
    il = episodes[episodes["condition"] == cond.il_condition].set_index("seed")[column]
    both = pd.concat([rl.rename("rl"), il.rename("il")], axis=1, join="inner").dropna()
    d = (both["rl"] - both["il"]).to_numpy(dtype=float) * (1 if higher_is_better else -1)
    if len(d) < 2:
        return {"vs_il_delta": np.nan, "vs_il_p_worse": np.nan, "vs_il_p_better": np.nan}
    sd = float(np.std(d, ddof=1))
    if sd == 0.0:
        worse, better = (1.0, 1.0) if d.mean() == 0 else ((0.0, 1.0) if d.mean() < 0 else (1.0, 0.0))
    else:
        t = float(d.mean() / (sd / np.sqrt(len(d))))
        worse, better = float(stats.t.cdf(t, len(d) - 1)), float(stats.t.sf(t, len(d) - 1))
    return {"vs_il_delta": float(d.mean()) * (1 if higher_is_better else -1), "vs_il_p_worse": worse,
            "vs_il_p_better": better}


def verdict(row, alpha: float = 0.05) -> str:
    """An RL row against its own IL row in the deployed mode, in words."""
    if row.get("vs_il_p_worse") is None or row["vs_il_p_worse"] != row["vs_il_p_worse"]:
        return "-"
    word = "worse" if row["vs_il_p_worse"] < alpha else "better" if row["vs_il_p_better"] < alpha else "no difference"
    return (f"{word} ({row['vs_il_delta']:+.3g}; p worse {row['vs_il_p_worse']:.2g}, "
            f"p better {row['vs_il_p_better']:.2g})")


def summarise(conds: list[Condition], episodes: pd.DataFrame, trained: list[dict],
              programs: dict[str, Program], spec=None) -> pd.DataFrame:
    """One row per condition. Resets as the published table counts them (the refinement's
    diagnostic episodes plus RL's training resets) apart from the extra ones this protocol
    spends (the refinement's selection episodes, and RL's selection evaluations for rows
    whose weights they chose: best and accepted checkpoints); evaluation episodes are only
    reported and never counted. Each RL row is compared with its own IL row, seed by seed, in
    the task's deployed mode (`spec.deployed_mode`)."""
    rows = []
    deployed = getattr(spec, "deployed_mode", "mean")
    higher = spec.metric.higher_is_better if spec is not None else True
    for cond, t in zip(conds, trained, strict=True):
        ep = episodes[episodes["condition"] == cond.name]
        metric = ep["metric"].to_numpy(dtype=float)
        program = programs[cond.program]
        rl = t.get("rl") or {}
        rl_selection = int(rl.get("selection_resets", 0)) if cond.checkpoint in ("best", "accepted") else 0
        rows.append({
            "condition": cond.name, "label": cond.label, "analyst": program.analyst, "analyst_calls": program.calls,
            "published_resets": program.resets.get("diagnostic", 0) + cond.rl_resets,
            "extra_resets": program.resets.get("selection", 0) + rl_selection,
            "refinement_selection_resets": program.resets.get("selection", 0),
            "rl_selection_resets": rl_selection,
            "mean_action_metric_mean": float(np.nanmean(ep["mean_action_metric"])),
            "mean_action_metric_std": float(np.nanstd(ep["mean_action_metric"])),
            "mean_action_success_rate": float(ep["mean_action_success"].mean()) if "mean_action_success" in ep else np.nan,
            "metric_mean": float(np.nanmean(metric)), "metric_std": float(np.nanstd(metric)),
            "success_rate": float(ep["success"].mean()),
            "rl_checkpoint": rl_checkpoint_text(rl), "rl_departures": "; ".join(rl.get("departures") or []),
            "rl_preset": cond.preset, "deployed_mode": deployed, "reused_from": t.get("reused_from") or "",
            **paired_against_il(episodes, cond, mode_column(deployed), higher),
            "published_key": "/".join(cond.published_key) if cond.published_key else "",
            "episodes": len(ep), "errors": int(ep["error"].notna().sum()) if "error" in ep else 0,
        })
    return pd.DataFrame(rows)


def rl_checkpoint_text(rl: dict) -> str:
    """Which RL weights a row's policy holds, for the table ("-" for IL-only rows)."""
    from refine_core.learn.rl import RLReport

    return RLReport(**rl).describe_checkpoint() if rl else "-"


def welch(episodes: pd.DataFrame, column: str = "mean_action_metric") -> pd.DataFrame:
    rows = []
    for a, b in key_comparisons(set(episodes["condition"])):
        x = episodes.loc[episodes["condition"] == a, column].to_numpy(dtype=float)
        y = episodes.loc[episodes["condition"] == b, column].to_numpy(dtype=float)
        if len(x) >= 2 and len(y) >= 2 and (np.std(x) > 0 or np.std(y) > 0):
            with warnings.catch_warnings():  # near-identical samples: scipy warns, p is still valid
                warnings.simplefilter("ignore", RuntimeWarning)
                t, p = stats.ttest_ind(x, y, equal_var=False)
        else:
            t, p = float("nan"), float("nan")
        rows.append({"a": a, "b": b, "mean_a": float(np.mean(x)) if len(x) else np.nan,
                     "mean_b": float(np.mean(y)) if len(y) else np.nan, "t": float(t), "p_welch": float(p)})
    return pd.DataFrame(rows, columns=["a", "b", "mean_a", "mean_b", "t", "p_welch"])


def refinement_name(r) -> str:
    """How the table names a refinement its rows come from."""
    if r.key.startswith("llm"):
        return f"the LLM run {r.location}"
    return "the offline-catalogue refinement" if r.summary["analyst"].get("name") == "offline" else f"the run {r.location}"


MODE_WORDS = {"mean": "the action mean", "sample": "sampled actions"}
COLUMN_WORDS = {"mean": "mean action", "sample": "sampled"}


def primary_mode(spec) -> str:
    """The evaluation mode the task's published results were verified in (the primary column)."""
    return spec.eval_mode


def evaluation_line(spec, opts) -> tuple[bool, str]:
    """(departs, text): how the rows are evaluated, against the authors' verification."""
    from refine_core.rollout.plan import seeds_for
    from refine_core.summary import seed_span

    mode = primary_mode(spec)
    other = "mean" if mode == "sample" else "sample"
    seeds = seeds_for(spec, "eval", opts.seeds)
    draws = ", action draws seeded by i" if mode == "sample" else ""
    text = (f"evaluation: primary column {MODE_WORDS[mode]} on seeds {seed_span(seeds)} (environment seed i{draws}); "
            f"beside it {MODE_WORDS[other]} on the same seeds")
    verified = published(spec, "VERIFIED_EVALUATION")
    if not verified:
        return False, text + f" (no published figures for {spec.name} to verify against)"
    same = verified["mode"] == mode and tuple(seeds) == tuple(verified["seeds"])
    told = f"{MODE_WORDS[verified['mode']]} on seeds {seed_span(verified['seeds'])}"
    return (not same, text + (f", as the authors verified the published figures ({told})" if same
                              else f"; the authors verified the published figures with {told}"))


def protocol_items(summary: pd.DataFrame, spec, opts, refinements) -> list[tuple[bool, str]]:
    """Every item of these rows' protocol, each as (departs from the published one, text): the
    evaluation, the demonstration, and per refinement its description variant, whether its
    analysis code read the demonstration, where it started, who answered."""
    from refine_core.summary import demo_access

    has_published = task_part(spec.name, PUBLISHED_PART) is not None
    items = [evaluation_line(spec, opts)]
    if not has_published:
        items.append((True, f"the published comparison has no {spec.name} task: there are no published figures "
                            "for it"))
    demo = f"demonstration: {published(spec, 'DEMONSTRATION') or 'one episode of the task expert'}, seed {spec.demo_seed}"
    items.append((has_published, demo + " (every row is fitted to it)"))
    for r in refinements:
        s = r.summary
        where = refinement_name(r)
        description = s.get("description") or "unrecorded"
        if description == "published":
            items.append((False, f"{where}: task description **published**: "
                                 f"{published(spec, 'DESCRIPTION') or 'the published information'}"))
        elif description == "legacy_published":
            items.append((True, f"{where}: task description **legacy_published**: the first wording of the "
                                "published variant, which named the simulator (and, for the door, the robot arm, "
                                "action ranges, a metric line and a shorter reward sentence)"))
        else:
            items.append((has_published, f"{where}: task description **{description}**"
                                         + (", richer than the published prompts" if has_published else "")))
        see = demo_access(s)
        items.append((bool(see), f"{where}: demonstration in the diagnostics: "
                                 + ("**on** (its analysis code also read the demonstration table; the published "
                                    "code reads the rollout only)" if see else
                                    "off (its analysis code read the rollout table only, as published)" if see is False
                                    else "not recorded")))
        ran = (s.get("demonstration") or {}).get("seed")
        if ran is not None and int(ran) != int(spec.demo_seed):
            items.append((True, f"{where} was refined against the demonstration on seed {ran}; its programs are "
                                f"fitted here to the one on seed {spec.demo_seed}"))
        start = s.get("start") or {}
        if start.get("kind") == "program":
            items.append((True, f"{where} started from a given program ({start.get('label')}), not from the "
                                "analyst's zero-shot program; its 'start program' row stands for no published row"))
        else:
            items.append((False, f"{where} started from the analyst's zero-shot program"))
        models = s["analyst"].get("models") or []
        if s["analyst"].get("language_model"):
            if models and PUBLISHED_MODEL.lower() not in " ".join(models).lower():
                items.append((True, f"{where}: model {', '.join(models)} (the published runs used {PUBLISHED_MODEL})"))
            elif not models:
                items.append((True, f"{where}: model not recorded"))
        else:
            items.append((True, f"{where}: the offline analyst (rule-based, not a language model)"))
        selection = (s.get("settings") or {}).get("selection_episodes")
        if selection:
            items.append((True, f"{where}'s best round was chosen on {selection} selection episode"
                                f"{'s' if selection != 1 else ''} per round (counted under 'extra resets')"))
    presets = summary["rl_preset"] if "rl_preset" in summary else pd.Series([""] * len(summary))
    for preset in dict.fromkeys(p for p in presets if p):
        texts = summary.loc[presets == preset, "rl_departures"]
        named = sorted({d for text in texts for d in text.split("; ") if d})
        label = PRESET_LABELS.get(preset, preset)
        items.append((bool(named), f"RL rows [{label}]: "
                      + ("; ".join(named) if named else "METHOD.md's settings and rule")))
    legacy = summary.loc[presets == "", "rl_departures"] if "rl_preset" in summary else summary["rl_departures"]
    items += [(True, f"RL: {d}") for d in sorted({d for text in legacy for d in text.split("; ") if d})]
    if published(spec, "RL"):
        items.append((True, f"RL {published(spec, 'RL')}"))
    if "reused_from" in summary and summary["reused_from"].astype(bool).any():
        taken = summary[summary["reused_from"].astype(bool)]
        items.append((False, "not trained again, taken from an earlier folder with the same program, RL settings and "
                             "IL row (reproduced here seed for seed): " + "; ".join(
                                 f"{r.condition} <- {r.reused_from}" for r in taken.itertuples())))
    if opts.scale != 1.0:
        items.append((True, f"RL budgets {opts.low_resets:,} / {opts.high_resets:,}, scaled x{opts.scale:g} from the "
                            "published 400 / 2,000"))
    if opts.il:
        items.append((True, f"IL settings changed: {opts.il}"))
    return items


def protocol_departures(summary: pd.DataFrame, spec, opts, refinements) -> list[str]:
    """Every way these rows differ from the published protocol, in words."""
    return [text for departs, text in protocol_items(summary, spec, opts, refinements) if departs]


def table_markdown(summary: pd.DataFrame, spec, opts, refinements=()) -> str:
    figures = published(spec, "RESULTS", {})
    deployed = getattr(spec, "deployed_mode", "mean")
    items = protocol_items(summary, spec, opts, refinements)
    analysts = sorted({a for a in summary["analyst"] if a != "-"})
    mode = primary_mode(spec)
    other = "mean" if mode == "sample" else "sample"
    columns = {"mean": ("mean_action_metric_mean", "mean_action_metric_std", "mean_action_success_rate"),
               "sample": ("metric_mean", "metric_std", "success_rate")}
    head = [f"# {spec.name}: {spec.metric.name} over {opts.seeds} unseen seeds",
            "",
            "Task description the analyst read: "
            + "; ".join(f"{refinement_name(r)}: **{r.summary.get('description') or 'unrecorded'}**"
                        for r in refinements) + ".",
            "Analysts: " + ", ".join(analysts) + "."
            + (" Rows marked [offline catalogue] are not LLM results: their structures are pre-written programs, "
               "and their 'analyst calls' count the rule-based analyst's answers." if any(
                   "offline" in a for a in analysts) else "")
            + (" **Smoke profile: the numbers are meaningless.**" if opts.smoke else ""),
            "",
            f"Primary column: {MODE_WORDS[mode]} ({COLUMN_WORDS[mode]}), the mode the authors verified the published "
            f"{spec.name} figures in; beside it, {MODE_WORDS[other]} ({COLUMN_WORDS[other]}). Sampled actions are a "
            "draw from the policy's Gaussian seeded by the episode's seed, clipped to the bounds, as the contract "
            "executes it. "
            f"Deployed mode (what a robot runs; our RL selects and accepts checkpoints in it): **{MODE_WORDS[deployed]}**. "
            "RL rows marked [RL: ours] use the product's default RL (named below: a trust region on every update, and "
            "the checkpoint accepted only when it beats the accepted one on the selection seeds by more than their "
            "noise; those selection resets are counted as extra); rows marked [RL: published settings] use METHOD.md's "
            "settings and keep the final weights (the published rule), and only they stand beside the published "
            "figures"
            + ("; rows marked 'best checkpoint' hold the best weights by the deployed mode on the selection seeds "
               "from the same training, whose selection resets are counted as extra" if opts.best_checkpoint else "")
            + ". 'vs own IL' compares each RL row with its program's IL row seed by seed in the deployed mode "
              "(paired one-sided t-tests)"
            + ". 'Resets (published count)' are the refinement's diagnostic episodes plus RL's training resets, "
              "as the published table counts them; 'extra resets' are those this protocol spends beyond it "
              "(selection episodes); evaluation episodes are never counted.",
            "",
            "Protocol of these rows, item by item (**departs**: differs from the published protocol):",
            *[f"- {'**departs**' if departs else 'as published'}: {text}" for departs, text in items],
            "",
            f"| condition | analyst | analyst calls | resets (published count) | extra resets | "
            f"{COLUMN_WORDS[mode]} (primary): {spec.metric.name} (mean ± std) | success | {COLUMN_WORDS[other]} | "
            "success | RL weights | published | vs own IL, deployed mode |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def rate(value) -> str:
        return "-" if value != value else f"{value:.0%}"

    for _, r in summary.iterrows():
        key = tuple(r["published_key"].split("/")) if r["published_key"] else None
        m, sd, ok = (r[c] for c in columns[mode])
        m2, sd2, ok2 = (r[c] for c in columns[other])
        head.append(f"| {r['label']} | {r['analyst']} | {r['analyst_calls']} | {r['published_resets']:,} | "
                    f"{r['extra_resets']:,} | {m:.3f} ± {sd:.3f} | {rate(ok)} | {m2:.3f} ± {sd2:.3f} | {rate(ok2)} | "
                    f"{r['rl_checkpoint']} | {figures.get(key, '-') if key else '-'} | {verdict(r)} |")
    return "\n".join(head) + "\n"


def plot_rounds(round_metrics: list[dict], title: str, spec, path: Path) -> bool:
    df = pd.DataFrame(round_metrics)
    col = "eval_metric_mean" if "eval_metric_mean" in df else "selection_metric_mean"
    if df.empty or col not in df:
        return False
    df = df[df["status"] == "committed"].dropna(subset=[col])
    if df.empty:
        return False
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    std = df.get(col.replace("mean", "std"))
    ax.errorbar(df["round"], df[col], yerr=std if std is not None else None, marker="o", capsize=3)
    ax.set_xlabel("refinement round")
    ax.set_ylabel(spec.metric.name)
    ax.set_title(f"{spec.name}: {title}")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def rl_updates_frame(conds: list[Condition], trained: list[dict]) -> pd.DataFrame:
    """Every RL update of every condition, one row each (parameter changes as JSON text)."""
    rows = []
    for cond, t in zip(conds, trained, strict=True):
        for record in (t.get("rl") or {}).get("curve") or []:
            rows.append({"condition": cond.name, **{k: v for k, v in record.items() if k != "params"},
                         "params": json.dumps(record.get("params"))})
    return pd.DataFrame(rows)


RL_STYLES = {("ours", "rl_low"): ("C0", "-"), ("ours", "rl_high"): ("C1", "-"),
             ("published", "rl_low"): ("C2", "--"), ("published", "rl_high"): ("C3", "--")}
"""Colour and line of each (preset, budget) in the RL figure, the same in every panel."""


def plot_rl_curves(conds: list[Condition], trained: list[dict], spec, path: Path) -> bool:
    """One column per program: the sampled return of each training group (what RL optimises)
    and the selection-seed score in the deployed mode (what a robot runs), against training
    resets; ours solid, published settings dashed; filled stars mark accepted checkpoints,
    crosses the candidates after which training restarted from the accepted weights, and a
    large ring the weights each row's policy holds."""
    runs = [(c, t.get("rl") or {}) for c, t in zip(conds, trained, strict=True)
            if (t.get("rl") or {}).get("curve") and c.checkpoint != "best"]
    if not runs:
        return False
    programs = list(dict.fromkeys(c.program for c, _ in runs))
    fig, axes = plt.subplots(2, len(programs), figsize=(4.6 * len(programs), 6.4), squeeze=False, sharex="col")
    for col, key in enumerate(programs):
        top, bottom = axes[0][col], axes[1][col]
        for cond, rl in runs:
            if cond.program != key:
                continue
            colour, line = RL_STYLES.get((cond.preset, cond.training), ("C7", ":"))
            label = f"{PRESET_LABELS.get(cond.preset, cond.preset)}, {cond.rl_resets:,} resets"
            curve = rl["curve"]
            top.plot([c["resets"] for c in curve], [c.get("return_mean", c.get("mean_return")) for c in curve],
                     line, color=colour, alpha=0.7, lw=1, label=label)
            selection = rl.get("selection") or []
            if not selection:
                continue
            bottom.plot([s["resets"] for s in selection], [s["metric"] for s in selection], line, marker=".",
                        color=colour, label=label)
            taken = [s for s in selection if s.get("accepted") and s["update"] > 0]
            bottom.plot([s["resets"] for s in taken], [s["metric"] for s in taken], "*", ms=11, color=colour)
            again = [s for s in selection if s.get("restored")]
            bottom.plot([s["resets"] for s in again], [s["metric"] for s in again], "x", ms=7, color=colour)
            kept = [s for s in selection if s["update"] == rl.get("checkpoint_update")]
            if kept and rl.get("checkpoint") != "final":
                bottom.plot(kept[0]["resets"], kept[0]["metric"], "o", ms=13, mfc="none", color=colour)
        name = next(c.label for c, _ in runs if c.program == key).split(" + RL")[0]
        top.set_title(name if len(name) < 60 else name[:57] + "...", fontsize=8)
        bottom.set_xlabel("training resets")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("sampled return of each group")
    mode = getattr(spec, "deployed_mode", "mean")
    axes[1][0].set_ylabel(f"{spec.metric.name}, selection seeds\n({'mean action' if mode == 'mean' else 'sampled'}, "
                          "deployed mode)")
    handles, labels = axes[1][0].get_legend_handles_labels()
    if not handles:
        handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"{spec.name}: RL per program; * accepted checkpoint, x restart from the accepted weights, "
                 "ring = weights kept", fontsize=9)
    fig.tight_layout(rect=(0, 0.06, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_rl_updates(conds: list[Condition], trained: list[dict], spec, out: Path) -> list[Path]:
    """The instruments of every RL condition, one figure each (the panels of `refine report`)."""
    from refine_core.report import rl_updates_figure

    paths = []
    for cond, t in zip(conds, trained, strict=True):
        curve = (t.get("rl") or {}).get("curve") or []
        if not curve:
            continue
        path = out / f"rl_updates_{cond.name}.png"
        fig = rl_updates_figure(pd.DataFrame(curve), f"{spec.name}: {cond.label}", spec.metric.name)
        fig.savefig(path, dpi=100)  # laid out by the figure itself (fixed margins)
        plt.close(fig)
        paths.append(path)
    return paths


def write_all(out: Path, spec, conds, episodes, trained, programs, refinements, summary, opts,
              wall_time_s: float) -> None:
    episodes.to_csv(out / "episodes.csv", index=False)
    (out / "table.md").write_text(table_markdown(summary, spec, opts, refinements))
    lines = ["# Welch's t-tests on the per-seed metric"]
    tests_by_mode = {"mean": ("mean_action_metric", "mean action"), "sample": ("metric", "sampled")}
    primary = primary_mode(spec)
    order = [primary, "mean" if primary == "sample" else "sample"]
    for column, title in ((tests_by_mode[m][0], tests_by_mode[m][1] + (" (primary)" if m == primary else ""))
                          for m in order):
        tests = welch(episodes, column)
        lines += ["", f"## {title}", "", "| a | b | mean a | mean b | t | p |", "|---|---|---|---|---|---|"]
        lines += [f"| {r.a} | {r.b} | {r.mean_a:.3f} | {r.mean_b:.3f} | {r.t:.2f} | {r.p_welch:.3g} |"
                  for r in tests.itertuples()]
    (out / "pvalues.md").write_text("\n".join(lines) + "\n")
    for program in programs:
        if program.role != "mlp":
            (out / f"program_{program.key}.py").write_text(program.source)
    primary = next((p for p in programs if p.key == "llm_refined"), None) or next(p for p in programs
                                                                              if p.role == "refined")
    (out / "refined_program.py").write_text(primary.source)
    for i, r in enumerate(refinements):
        name = "refinement_rounds.png" if i == 0 else f"refinement_rounds_{r.key}.png"
        plot_rounds(r.round_metrics, f"{spec.metric.name} per round ({r.key})", spec, out / name)
    plot_rl_curves(conds, trained, spec, out / "rl_curves.png")
    plot_rl_updates(conds, trained, spec, out)
    updates = rl_updates_frame(conds, trained)
    if len(updates):
        updates.to_csv(out / "rl_updates.csv", index=False)
    rl_runs = {c.name: {k: v for k, v in t["rl"].items() if k != "curve"}
               for c, t in zip(conds, trained, strict=True) if t.get("rl")}
    meta = {"options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()},
            "wall_time_s": wall_time_s,
            "programs": [{"key": p.key, "role": p.role, "label": p.label, "analyst": p.analyst, "calls": p.calls,
                          "resets": p.resets} for p in programs],
            "refinements": [{"key": r.key, "location": r.location, "description": r.summary.get("description"),
                             "diagnostics_see_demo": r.summary.get("diagnostics_see_demo"),
                             "start": r.summary.get("start"),
                             "analyst": r.summary.get("analyst"), "rounds": r.round_metrics} for r in refinements],
            "departures": protocol_departures(summary, spec, opts, refinements),
            "protocol": [{"departs": departs, "item": text}
                         for departs, text in protocol_items(summary, spec, opts, refinements)],
            "primary_mode": primary_mode(spec),
            "summary": summary.to_dict("records"), "rl": rl_runs}
    (out / "summary.json").write_text(json.dumps(meta, indent=1, default=str))
