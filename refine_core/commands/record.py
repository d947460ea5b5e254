"""`refine record`: record the simulated expert's demonstration a run fits every program to
(its `source` says so: a robot profile never fits it; robots record by teleoperation, see
`refine up <profile>_record_demo`)."""

from __future__ import annotations

import argparse

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir, db_path, task_or_error


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("record", help="record the expert demonstration into a run directory",
                       description="Run the task's expert for one episode and store it as the "
                       "run's demonstration (creating DIR/run.db and the run if needed).")
    p.add_argument("--task", required=True, help="task name (see `refine tasks`)")
    add_run_dir(p)
    p.add_argument("--seed", type=int, default=None,
                   help="configuration seed (default: the task's demonstration seed)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing demonstration (fitted rounds then refer to the old one)")
    return p


def run(args) -> int:
    from refine_core.rollout.demo import record_demonstration
    from refine_core.store.db import RunDatabase, RunDatabaseError

    task = task_or_error(args.task)
    spec = task.spec
    used = set(spec.eval_seeds) | set(spec.selection_seeds) | set(spec.diagnostic_seeds)
    if args.seed is not None and args.seed in used:
        raise UserError(f"seed {args.seed} is an evaluation/selection/diagnostic seed of {spec.name}")
    try:
        db = RunDatabase(db_path(args.run, must_exist=False))
    except (RunDatabaseError, OSError) as exc:
        raise UserError(str(exc)) from None
    with db:
        run_row = db.latest_run()
        if run_row is not None and run_row["task"] != spec.name:
            raise UserError(f"{db.path} holds a run of task {run_row['task']!r}; "
                            f"use another --run directory for {spec.name!r}")
        if run_row is not None and db.load_demonstration(run_row["id"]) is not None and not args.force:
            raise UserError(f"{db.path} already has a demonstration; pass --force to replace it")
        print(f"recording the {spec.name} expert on seed "
              f"{spec.demo_seed if args.seed is None else args.seed} ...", flush=True)
        demo = record_demonstration(task, args.seed)
        with db.transaction():
            run_id = run_row["id"] if run_row else db.create_run(
                spec.name, config={"demo_seed": demo.seed}, status="recorded")
            demo.save(db, run_id)
            db.log_event(run_id, None, "demonstration", f"{demo.source} demonstration on seed {demo.seed}",
                         {"steps": demo.steps, "source": demo.source, **demo.summary})
        s = demo.summary
        metric = "" if spec.metric.name == "return" else f", {spec.metric.name} {s['metric']:.4g}"
        print(f"recorded {spec.name} demonstration ({demo.source}): seed {demo.seed}, {demo.steps} steps, "
              f"return {s['return']:.1f}{metric}, success {int(s['success'])} "
              f"-> {db.path} (run {run_id})")
    return 0
