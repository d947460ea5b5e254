"""`refine experiment`: every condition of the published table on one task, side by side.

    demonstration (seed 0)
    programs: MLP baseline, bundled zero-shot starter, refined (from a run, or refine now)
    train jobs: IL on the demonstration, then RL at the low / high reset budget
    eval jobs:  each trained policy x each unseen evaluation seed, mean action and sampled
    outputs:    results/<task>/<date>/{table.md, episodes.csv, pvalues.md, rl_updates.csv, *.png,
                summary.json}
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from refine_core.experiment import outputs
from refine_core.experiment.conditions import Condition, conditions
from refine_core.experiment.jobs import eval_job, pack_demo, train_job
from refine_core.experiment.pool import map_jobs
from refine_core.learn.rl import RLConfig
from refine_core.tasks.base import Task


@dataclass
class ExperimentOptions:
    task: str
    seeds: int = 10
    workers: int = 1
    ray: str | None = None
    low_resets: int = 400
    high_resets: int = 2000
    refined_run: Path | None = None
    analyst: str = "offline"
    rounds: int = 6
    out: Path = Path("results")
    smoke: bool = False
    date: str | None = None
    group_size: int = 20
    mlp_rl_lr: float | None = None
    """Adam step for the MLP's RL; None is METHOD.md's 0.007 like every other program. Any
    other value is a departure and the results table names it."""
    rl: dict = field(default_factory=dict)
    """RLConfig fields set for every RL condition (options beyond the published method, e.g.
    {"std_scale": 0.25}); the results table names each one used."""
    max_steps: int | None = None
    il: dict = field(default_factory=dict)

    @classmethod
    def from_args(cls, args) -> ExperimentOptions:
        opts = cls(task=args.task, seeds=args.seeds, workers=args.workers or (os.cpu_count() or 1),
                   ray=args.ray, low_resets=args.low_resets, high_resets=args.high_resets,
                   refined_run=args.refined_run, analyst=args.analyst, rounds=args.rounds, out=args.out,
                   smoke=args.smoke, date=args.date, mlp_rl_lr=args.mlp_rl_lr,
                   rl=parse_rl_settings(getattr(args, "rl_set", None) or []))
        return opts.smoke_profile() if args.smoke else opts

    def smoke_profile(self) -> ExperimentOptions:
        """Every condition, tiny budgets: proves the pipeline in minutes, measures nothing.
        The RL window shrinks to fit the 40-step episodes so the surrogate has terms, and RL
        picks its checkpoint on two selection seeds instead of ten."""
        self.seeds, self.low_resets, self.high_resets = min(self.seeds, 2), 2, 4
        self.group_size, self.max_steps, self.rounds = 2, 40, min(self.rounds, 2)
        self.il = {"max_epochs": 30}
        self.rl = {"window": 10, "select_every": 1, "selection_episodes": 2, **self.rl}
        self.date = self.date or "smoke"
        return self

    @property
    def scale(self) -> float:
        """Budget relative to the published 400 / 2,000 resets (1.0 = full)."""
        return self.high_resets / 2000


@dataclass
class RefinedProgram:
    source: str
    analyst_calls: int
    resets: int
    run_db: Path
    round_metrics: list[dict]


def run_experiment(opts: ExperimentOptions) -> Path:
    from refine_core.policy.mlp import mlp_program
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    started = time.perf_counter()
    task = get_task(opts.task)
    spec = task.spec
    out = opts.out / spec.name / (opts.date or dt.date.today().isoformat())
    out.mkdir(parents=True, exist_ok=True)

    # 1. One demonstration and the three programs.
    demo = record_demonstration(task)
    demo_npz = pack_demo(demo.inputs, demo.actions)
    refined = refined_program(opts, task, out)
    sources = {"mlp": mlp_program(spec), "starter": starter_program(spec.name), "refined": refined.source}

    # 2. Train every condition (IL, then RL from the IL weights), in parallel.
    conds = conditions(opts.low_resets, opts.high_resets)
    train = [(spec.name, sources[c.program], demo_npz, opts.il, rl_config(c, opts)) for c in conds]
    trained = map_jobs(train_job, train, workers=opts.workers, ray_address=opts.ray, desc="train")

    # 3. Evaluate each trained policy on the unseen evaluation seeds.
    seeds = evaluation_seeds(task, opts.seeds)
    evals = [(spec.name, t["bundle"], s, opts.max_steps) for t in trained for s in seeds]
    results = map_jobs(eval_job, evals, workers=opts.workers, ray_address=opts.ray, desc="evaluate")

    # 4. Tables, statistics, plots; everything also lands in experiment.db.
    rows = []
    for i, cond in enumerate(conds):
        for r in results[i * len(seeds):(i + 1) * len(seeds)]:
            rows.append({"condition": cond.name, "label": cond.label, **r})
    episodes = pd.DataFrame(rows)
    summary = outputs.summarise(conds, episodes, trained, refined, spec, opts)
    store(out / "experiment.db", opts, conds, episodes, trained, refined)
    outputs.write_all(out, spec, conds, episodes, trained, refined, summary, opts,
                      wall_time_s=time.perf_counter() - started)
    return out


def evaluation_seeds(task: Task, n: int) -> list[int]:
    seeds = list(task.spec.eval_seeds)
    while len(seeds) < n:
        seeds.append(seeds[-1] + 1)
    return seeds[:n]


def rl_config(cond: Condition, opts: ExperimentOptions) -> dict | None:
    if cond.rl_resets == 0:
        return None
    cfg = {**opts.rl, "reset_budget": cond.rl_resets, "group_size": min(opts.group_size, cond.rl_resets)}
    if cond.program == "mlp" and opts.mlp_rl_lr is not None:
        cfg["lr"] = opts.mlp_rl_lr
    if opts.max_steps:
        cfg["max_steps"] = opts.max_steps
    RLConfig(**cfg)  # refuse a bad setting before any job starts
    return cfg


def parse_rl_settings(items: list[str]) -> dict:
    """["std_scale=0.25", 'param_lr={"log_std": 0}'] -> RLConfig fields; values are JSON
    where they parse as JSON, else strings. Unknown fields are refused by name."""
    from dataclasses import fields as dataclass_fields

    known = {f.name for f in dataclass_fields(RLConfig)}
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in known:
            raise ValueError(f"--rl-set {item!r}: expected FIELD=VALUE with FIELD one of {sorted(known)}")
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def refined_program(opts: ExperimentOptions, task: Task, out: Path) -> RefinedProgram:
    """The best round's program of a given run, or of a refinement run started here."""
    from refine_core.store.db import RunDatabase

    if opts.refined_run is not None:
        db_file = Path(opts.refined_run) / "run.db"
        if not db_file.exists():
            raise FileNotFoundError(f"no run database at {db_file}")
    else:
        from refine_core.analyst.config import load_config
        from refine_core.analyst.factory import make_analyst
        from refine_core.loop import RefineConfig, refine

        run_dir = out / "refinement"
        run_dir.mkdir(parents=True, exist_ok=True)
        db_file = run_dir / "run.db"
        if db_file.exists():
            db_file.unlink()  # a fresh refinement each time, so re-runs reproduce it exactly
            for suffix in ("-wal", "-shm"):
                Path(str(db_file) + suffix).unlink(missing_ok=True)
        analyst = make_analyst(opts.analyst, config=load_config(), task=task.spec.name)
        cfg = RefineConfig(max_rounds=opts.rounds, eval_episodes=opts.seeds, max_steps=opts.max_steps,
                         il=opts.il, verbose=False)
        refine(task, analyst, RunDatabase(db_file), cfg)
    return load_refined(RunDatabase(db_file))


def load_refined(db) -> RefinedProgram:
    run = db.latest_run()
    if run is None or run.get("best_round") is None:
        raise ValueError(f"{db.path}: the run has no best round to take a program from")
    rounds = db.rounds(run["id"])
    best = next(r for r in rounds if r["round"] == run["best_round"])
    calls = db.count("llm_calls", run["id"])
    if calls == 0:  # a rule-based analyst makes no LLM calls: count its answers instead
        calls = 1 + sum(1 for r in rounds if r["status"] == "committed") + db.count("analyses", run["id"])
    resets = db.count("episodes", run["id"], kinds=["diagnostic", "selection"])
    metrics = []
    for r in rounds:
        m = r.get("metrics") or {}  # decoded by the database
        metrics.append({"round": r["round"], "status": r["status"], **{f"{k}_{kk}": vv for k, v in m.items()
                                                                         for kk, vv in v.items()}})
    return RefinedProgram(source=best["program"], analyst_calls=int(calls), resets=int(resets),
                          run_db=Path(db.path), round_metrics=metrics)


def store(path: Path, opts: ExperimentOptions, conds: list[Condition], episodes: pd.DataFrame,
          trained: list[dict], refined: RefinedProgram) -> None:
    """Results of every job in one SQLite file (local or Ray jobs alike)."""
    from refine_core.store.experiment import write_experiment

    rows = [{"name": c.name, "label": c.label, "program": c.program, "rl_resets": c.rl_resets,
             "il": json.dumps(t["il"]), "rl": json.dumps(t["rl"])} for c, t in zip(conds, trained, strict=True)]
    write_experiment(path, asdict(opts), str(refined.run_db), rows, episodes,
                     outputs.rl_updates_frame(conds, trained), refined.round_metrics)
