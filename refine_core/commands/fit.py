"""`refine fit`: fit a program to the run's demonstration and store it as a round."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir, db_path, task_or_error

HELP = "fit a program to the run's demonstration (imitation learning)"
"""The one line `refine --help` shows (without building this verb's flags)."""


def add_parser(sub) -> argparse.ArgumentParser:
    from refine_core.commands.run import LOOP_ALIASES
    from refine_core.flags import add_flags
    from refine_core.learn.il import ILConfig
    from refine_core.loop import RefineConfig

    p = sub.add_parser("fit", help=HELP,
                       description="Load a structured-policy program, check it against the "
                       "contract, fit it to the run's demonstration by NLL and store the result "
                       "as a round. `--program starter` uses the task's bundled starter program.")
    add_run_dir(p)
    p.add_argument("--program", required=True, metavar="FILE",
                   help="program source file (or `starter` for the bundled starter program)")
    p.add_argument("--round", type=int, default=None,
                   help="round number to store (default: one after the last round)")
    p.add_argument("--takes", default="all", metavar="LIST",
                   help="which recorded takes to fit: all (default) or take numbers such as 0,2; the takes' "
                   "steps are concatenated take after take into one dataset")
    add_flags(p, RefineConfig, only=("allow_weak_isolation",), aliases=LOOP_ALIASES)
    add_flags(p.add_argument_group("imitation learning (refine_core.learn.il.ILConfig)"), ILConfig,
              exclude=("progress",))
    return p


def open_run(run_dir: Path):
    """(database, run row, task) of a run directory, or a UserError saying what is missing."""
    from refine_core.store.db import RunDatabase, RunDatabaseError

    try:
        db = RunDatabase(db_path(run_dir), create=False)
    except RunDatabaseError as exc:
        raise UserError(str(exc)) from None
    run_row = db.latest_run()
    if run_row is None:
        db.close()
        raise UserError(f"{db.path} holds no run; record a demonstration first (refine record)")
    return db, run_row, task_or_error(run_row["task"])


def read_program(path_text: str, task_name: str) -> tuple[str, str]:
    """(source, label) of `--program`."""
    if path_text == "starter" and not Path(path_text).exists():
        from refine_core.policy.programs import find_starter

        source = find_starter(task_or_error(task_name).spec.name)
        if source is None:
            raise UserError(f"task {task_name} ships no starter program; pass --program FILE")
        return source, f"bundled starter for {task_name}"
    path = Path(path_text)
    if not path.is_file():
        raise UserError(f"program file {path} not found")
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read program file {path}: {exc}") from None


def run(args) -> int:
    from refine_core.backends import check_demonstration
    from refine_core.flags import given
    from refine_core.learn.il import ILConfig
    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.contract import validate_policy
    from refine_core.rollout.demo import Demonstration, DemonstrationError, parse_takes
    from refine_core.sandbox import fit_in_sandbox

    db, run_row, task = open_run(args.run)
    with db:
        spec = task.spec
        source, label = read_program(args.program, spec.name)
        try:
            takes = parse_takes(args.takes)
        except ValueError as exc:
            raise UserError(str(exc)) from None
        try:
            demo = Demonstration.load(db, run_row["id"], takes)
        except DemonstrationError as exc:
            if db.demonstration_takes(run_row["id"]):
                raise UserError(str(exc)) from None
            raise UserError(f"{exc}; record one first (refine record in simulation, or by teleoperation: "
                            "refine up <profile>_record_demo)") from None
        problem = check_demonstration(task, demo)
        if problem:
            raise UserError(f"the run's demonstration cannot be fitted: {problem}")
        config = given(args, ILConfig)
        start = time.perf_counter()
        # The program is checked statically here, then built, validated and fitted in the
        # sandbox like any generated program; only plain arrays come back.
        fit = fit_in_sandbox(source, spec.name, demo.inputs, demo.actions, config,
                             allow_weak_isolation=bool(args.allow_weak_isolation))
        fit_s = time.perf_counter() - start
        first_line = (fit.error or "").splitlines()[0] if fit.error else f"sandbox status {fit.status}"
        if fit.status == "contract_error":
            raise UserError(f"invalid program {label}: {first_line}")
        if not fit.ok:
            raise UserError(f"fitting {label} failed: {first_line}")
        policy = PolicyBundle(source, fit.weights).build(spec)
        schema = validate_policy(policy, spec)
        report = fit.report or {}
        last = db.last_round(run_row["id"])
        number = args.round if args.round is not None else (0 if last is None else last + 1)
        with db.transaction():
            db.save_round(
                run_row["id"], number, status="committed", program=source, fit_report=report,
                weights=fit.weights, info_schema=schema, timings={"fit_s": fit_s},
            )
            db.log_event(run_row["id"], number, "fit", f"fitted {label}",
                         {"best_val_nll": report.get("best_val_nll"), "epochs": report.get("epochs"),
                          "takes": list(demo.takes), "steps": demo.steps})
        takes = (f" (takes {', '.join(map(str, demo.takes))}, concatenated)" if len(demo.takes) > 1
                 else f" (take {demo.takes[0]})")
        print(f"round {number}: fitted {label} on {demo.steps} steps of the {demo.source} demonstration{takes} in "
              f"{fit_s:.1f} s "
              f"(sandboxed, {fit.result.isolation}); val NLL {report.get('initial_val_nll', float('nan')):.3f} -> "
              f"{report.get('best_val_nll', float('nan')):.3f} (best epoch {report.get('best_epoch')} of "
              f"{report.get('epochs')}); {len(schema.weights)} weights, {len(schema.latents)} latents")
        for warning in schema.warnings:
            print(f"  warning: {warning}")
    return 0
