"""`refine analyze`: run your own analysis script over a logged rollout, in the same sandbox
the analysts' diagnostics run in and under the same column names the run's analyst read (so a
script that works here works in the loop, and a recorded diagnostic script runs again)."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir, db_path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("analyze", help="run an analysis script over a round's rollout table (sandboxed)")
    add_run_dir(p)
    p.add_argument("--round", type=int, required=True, help="round whose diagnostic rollouts to analyse")
    p.add_argument("--code", type=Path, required=True, metavar="FILE",
                   help="Python script; sees `df` (rollout steps) and `demo` (demonstration steps)")
    p.add_argument("--kind", default=None, help="episode kind to load (default: diagnostic, else any)")
    p.add_argument("--timeout", type=float, default=120.0, help="wall-clock limit in seconds")
    return p


def run(args) -> int:
    from refine_core.rollout.demo import Demonstration, DemonstrationError
    from refine_core.sandbox import run_diagnostics
    from refine_core.store.db import RunDatabase

    if not args.code.is_file():
        raise UserError(f"no such script: {args.code}")
    db = RunDatabase(db_path(args.run))
    run_row = db.latest_run()
    if run_row is None:
        raise UserError(f"{args.run} holds no run")
    table = db.load_steps(run_row["id"], round=args.round, kind=args.kind or "diagnostic")
    if table.empty and args.kind is None:
        table = db.load_steps(run_row["id"], round=args.round)
    if table.empty:
        raise UserError(f"round {args.round} has no logged steps in {args.run}")
    try:
        demo_table = Demonstration.load(db, run_row["id"]).table
    except DemonstrationError:
        demo_table = None  # a run logged by hand (e.g. on a robot) may have none
    # the analyst's code read the tables under its description's column names: so does this
    from refine_core.loop import analyst_table
    from refine_core.tasks.registry import UnknownDescriptionError, UnknownTaskError, get_task

    config = run_row.get("config") if isinstance(run_row.get("config"), dict) else {}
    try:
        spec = get_task(run_row["task"], config.get("task_description")).spec
    except (UnknownTaskError, UnknownDescriptionError):
        spec = None
    if spec is not None:
        table, demo_table = analyst_table(spec, table), analyst_table(spec, demo_table)
    result = run_diagnostics(args.code.read_text(), table, demo_table, timeout_s=args.timeout)
    print(result.stdout, end="" if result.stdout.endswith("\n") else "\n")
    if result.status != "ok":
        print(f"[sandbox] status {result.status} ({result.isolation}): {result.message}")
        if result.stderr_tail:
            print(result.stderr_tail)
        return 1
    return 0
