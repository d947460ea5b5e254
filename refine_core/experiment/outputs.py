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
    KEY_COMPARISONS,
    PUBLISHED_CAR,
    PUBLISHED_DOOR,
    Condition,
)


def summarise(conds: list[Condition], episodes: pd.DataFrame, trained: list[dict], refined, spec, opts) -> pd.DataFrame:
    rows = []
    for cond in conds:
        ep = episodes[episodes["condition"] == cond.name]
        metric = ep["metric"].to_numpy(dtype=float)
        if cond.program == "mlp":
            calls, refine_resets = 0, 0
        elif cond.program == "starter":
            calls, refine_resets = 1, 0
        else:
            calls, refine_resets = refined.analyst_calls, refined.resets
        rows.append({
            "condition": cond.name, "label": cond.label, "analyst_calls": calls,
            "env_resets": refine_resets + cond.rl_resets, "metric_mean": float(np.nanmean(metric)),
            "metric_std": float(np.nanstd(metric)), "success_rate": float(ep["success"].mean()),
            "mean_action_metric_mean": float(np.nanmean(ep["mean_action_metric"])),
            "mean_action_metric_std": float(np.nanstd(ep["mean_action_metric"])),
            "episodes": len(ep), "errors": int(ep["error"].notna().sum()) if "error" in ep else 0,
        })
    return pd.DataFrame(rows)


def welch(episodes: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for a, b in KEY_COMPARISONS:
        x = episodes.loc[episodes["condition"] == a, "metric"].to_numpy(dtype=float)
        y = episodes.loc[episodes["condition"] == b, "metric"].to_numpy(dtype=float)
        if len(x) >= 2 and len(y) >= 2 and (np.std(x) > 0 or np.std(y) > 0):
            with warnings.catch_warnings():  # near-identical samples: scipy warns, p is still valid
                warnings.simplefilter("ignore", RuntimeWarning)
                t, p = stats.ttest_ind(x, y, equal_var=False)
        else:
            t, p = float("nan"), float("nan")
        rows.append({"a": a, "b": b, "mean_a": float(np.mean(x)) if len(x) else np.nan,
                     "mean_b": float(np.mean(y)) if len(y) else np.nan, "t": float(t), "p_welch": float(p)})
    return pd.DataFrame(rows)


def table_markdown(summary: pd.DataFrame, spec, opts) -> str:
    published = PUBLISHED_CAR if spec.name == "car_racing" else PUBLISHED_DOOR
    scaled = opts.scale != 1.0
    head = [f"# {spec.name}: {spec.metric.name} over {opts.seeds} unseen seeds",
            "",
            f"Analyst: `{opts.analyst}`"
            + (" (rule-based: 'analyst calls' counts its answers; none is an LLM call)" if opts.analyst == "offline" else "")
            + f". RL reset budgets: {opts.low_resets:,} / {opts.high_resets:,}"
            + (f" — **scaled down x{opts.scale:g} from the published 400 / 2,000**" if scaled else "")
            + ("; smoke profile, numbers meaningless" if opts.smoke else "") + ".",
            "",
            "Each policy runs as the contract executes it: a seeded sample from its Gaussian, clipped"
            " to the bounds. The mean-action column runs the same policy without noise, for reference.",
            "",
            f"| condition | analyst calls | env resets | {spec.metric.name} (mean ± std) | success | "
            "mean action | published |",
            "|---|---|---|---|---|---|---|"]
    for _, r in summary.iterrows():
        head.append(f"| {r['label']} | {r['analyst_calls']} | {r['env_resets']:,} | "
                    f"{r['metric_mean']:.3f} ± {r['metric_std']:.3f} | {r['success_rate']:.0%} | "
                    f"{r['mean_action_metric_mean']:.3f} ± {r['mean_action_metric_std']:.3f} | "
                    f"{published.get(r['condition'], '-')} |")
    return "\n".join(head) + "\n"


def plot_rounds(refined, spec, path: Path) -> bool:
    df = pd.DataFrame(refined.round_metrics)
    col = "eval_metric_mean" if "eval_metric_mean" in df else "selection_metric_mean"
    if df.empty or col not in df:
        return False
    df = df[df["status"] == "committed"]
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    std = df.get(col.replace("mean", "std"))
    ax.errorbar(df["round"], df[col], yerr=std if std is not None else None, marker="o", capsize=3)
    ax.set_xlabel("refinement round")
    ax.set_ylabel(spec.metric.name)
    ax.set_title(f"{spec.name}: {spec.metric.name} per refinement round")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def plot_rl_curves(conds: list[Condition], trained: list[dict], spec, path: Path) -> bool:
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    drawn = False
    for cond, t in zip(conds, trained, strict=True):
        curve = (t.get("rl") or {}).get("curve") or []
        if not curve:
            continue
        ax.plot([c["resets"] for c in curve], [c["mean_return"] for c in curve], marker=".", label=cond.label)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xlabel("environment resets")
    ax.set_ylabel("mean training return of the group")
    ax.set_title(f"{spec.name}: RL learning curves")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return True


def write_all(out: Path, spec, conds, episodes, trained, refined, summary, opts, wall_time_s: float) -> None:
    episodes.to_csv(out / "episodes.csv", index=False)
    (out / "table.md").write_text(table_markdown(summary, spec, opts))
    tests = welch(episodes)
    lines = ["# Welch's t-tests on the per-seed metric", "", "| a | b | mean a | mean b | t | p |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.a} | {r.b} | {r.mean_a:.3f} | {r.mean_b:.3f} | {r.t:.2f} | {r.p_welch:.3g} |" for r in tests.itertuples()]
    (out / "pvalues.md").write_text("\n".join(lines) + "\n")
    (out / "refined_program.py").write_text(refined.source)
    plot_rounds(refined, spec, out / "refinement_rounds.png")
    plot_rl_curves(conds, trained, spec, out / "rl_curves.png")
    meta = {"options": {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()},
            "wall_time_s": wall_time_s, "refinement_rounds": refined.round_metrics,
            "summary": summary.to_dict("records")}
    (out / "summary.json").write_text(json.dumps(meta, indent=1, default=str))
