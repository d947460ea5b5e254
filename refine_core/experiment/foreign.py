"""`refine experiment --foreign DIR`: programs written elsewhere to the contract, fitted to our
demonstration and scored on the evaluation seeds.

Why: what proves the project is that a program written to the published contract, by someone
who never saw our environment, starter or catalogue code, works here as it did there. The
programs are only read, fitted and evaluated — never edited — so their scores say something
about the environment, the demonstration and the fit, not about the programs' authors knowing
our code. Each program is scored like every condition of the main experiment: mean action
(the published protocol) and a seeded sample beside it.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd

from refine_core.experiment.jobs import eval_job, pack_demo, train_job
from refine_core.experiment.pool import JobPool
from refine_core.rollout.plan import seeds_for


def foreign_programs(directory: Path, task_name: str) -> dict[str, str]:
    """Every `*<task>.py` program file in `directory`, by file stem."""
    files = sorted(Path(directory).glob(f"*{task_name}.py"))
    return {path.stem: path.read_text(encoding="utf-8") for path in files}


def score_foreign(task_name: str, directory: Path, *, seeds: int = 10, workers: int = 1,
                  out: Path = Path("results"), date: str | None = None, max_steps: int | None = None,
                  il: dict | None = None) -> Path:
    """Fit each program to the task's demonstration, evaluate it, write `foreign.md` and
    `foreign_episodes.csv` next to the task's other results; returns the folder."""
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    task = get_task(task_name)
    programs = foreign_programs(directory, task_name)
    if not programs:
        raise FileNotFoundError(f"no *{task_name}.py programs in {directory}")
    folder = Path(out) / task_name / (date or dt.date.today().isoformat())
    folder.mkdir(parents=True, exist_ok=True)

    demo = record_demonstration(task)
    demo_npz = pack_demo(demo.inputs, demo.actions)
    names = list(programs)
    eval_seeds = seeds_for(task.spec, "eval", seeds)
    with JobPool(workers=workers) as pool:  # one pool for both maps: each worker imports torch once
        trained = pool.map(_train_or_error, [(task_name, programs[n], demo_npz, il or {}) for n in names],
                           desc="fit foreign programs")
        jobs = [(task_name, t["bundle"], s, max_steps) for t in trained if t["bundle"] for s in eval_seeds]
        results = iter(pool.map(eval_job, jobs, desc="evaluate foreign programs"))
    rows = []
    for name, fit in zip(names, trained, strict=True):
        if not fit["bundle"]:
            rows.append({"program": name, "seed": None, "error": fit["error"]})
            continue
        for _ in eval_seeds:
            rows.append({"program": name, **next(results)})
    episodes = pd.DataFrame(rows)
    episodes.to_csv(folder / "foreign_episodes.csv", index=False)
    table = foreign_table(episodes, task.spec.metric.name, task.spec.metric.higher_is_better)
    (folder / "foreign.md").write_text(_markdown(table, task.spec, directory, eval_seeds))
    (folder / "foreign.json").write_text(json.dumps(table.to_dict("records"), indent=1, default=float))
    return folder


def _train_or_error(task_name: str, source: str, demo_npz: bytes, il: dict) -> dict:
    try:
        return {**train_job(task_name, source, demo_npz, il, None), "error": None}
    except Exception as exc:  # noqa: BLE001 - a program that does not load is a row of the table
        return {"bundle": None, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}


def foreign_table(episodes: pd.DataFrame, metric: str, higher_is_better: bool) -> pd.DataFrame:
    """Mean ± std per program, under the mean action and sampled (`_markdown` puts the task's
    verified mode first)."""
    rows = []
    for name, ep in episodes.groupby("program", sort=True):
        ok = ep.dropna(subset=["seed"])
        row = {"program": name, "episodes": len(ok), "error": ep["error"].dropna().iloc[0]
               if ep["error"].notna().any() else ""}
        for prefix, label in (("mean_action_", "mean_action"), ("", "sampled")):
            column = f"{prefix}metric"
            values = ok[column].to_numpy(dtype=float) if column in ok else np.array([])
            row[f"{label}_mean"] = float(np.nanmean(values)) if values.size else float("nan")
            row[f"{label}_std"] = float(np.nanstd(values)) if values.size else float("nan")
            success = ok[f"{prefix}success"].to_numpy(dtype=float) if f"{prefix}success" in ok else np.array([])
            row[f"{label}_success"] = float(np.nanmean(success)) if success.size else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def _markdown(table: pd.DataFrame, spec, directory: Path, seeds) -> str:
    from refine_core.summary import seed_span

    primary = "sampled" if spec.eval_mode == "sample" else "mean_action"
    other = "mean_action" if primary == "sampled" else "sampled"
    words = {"mean_action": "mean action", "sampled": "sampled"}
    lines = [f"# Programs written elsewhere: {spec.name}", "",
             f"Each program in `{directory}` was fitted to the scripted expert's demonstration (seed "
             f"{spec.demo_seed}) and evaluated on seeds {seed_span(seeds)}. Primary column: {words[primary]}, the "
             f"mode the task's published figures were verified in; {words[other]} beside it (sampled: a draw "
             "from the program's Gaussian seeded by the episode's seed). The programs were not edited.", "",
             f"| program | {words[primary]} (primary) | success | {words[other]} | success | note |",
             "|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        lines.append(f"| {r['program']} | {r[primary + '_mean']:.4g} ± {r[primary + '_std']:.3g} | "
                     f"{r[primary + '_success']:.0%} | {r[other + '_mean']:.4g} ± {r[other + '_std']:.3g} | "
                     f"{r[other + '_success']:.0%} | {r['error'] or ''} |")
    return "\n".join(lines) + "\n"
