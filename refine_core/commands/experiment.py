"""`refine experiment`: the published comparison (MLP / zero-shot / refined x IL / RL budgets)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run the published table's conditions and write results/<task>/<date>/"
"""The one line `refine --help` shows (without building this verb's flags)."""


def add_parser(sub) -> argparse.ArgumentParser:
    from refine_core.experiment.runner import ExperimentOptions
    from refine_core.flags import add_flags
    from refine_core.learn.il import ILConfig
    from refine_core.learn.rl import RLConfig

    p = sub.add_parser("experiment", help=HELP)
    add_flags(p, ExperimentOptions, aliases={"max_rounds": ("--rounds",)}, settings={"rl": RLConfig, "il": ILConfig})
    p.add_argument("--foreign", type=Path, default=None, metavar="DIR",
                   help="instead of the table: fit and evaluate every *<task>.py program in DIR (programs "
                        "written elsewhere to the contract), writing foreign.md beside the results")
    return p


def run(args) -> int:
    from refine_core.commands._common import task_or_error
    from refine_core.experiment.runner import ExperimentOptions, run_experiment

    task_or_error(args.task, args.description)  # an unknown task or description: one line, before any job

    if args.foreign is not None:
        from refine_core.cli import UserError
        from refine_core.experiment.foreign import score_foreign

        if not args.foreign.is_dir():
            raise UserError(f"--foreign {args.foreign}: not a directory")
        base = ExperimentOptions(task=args.task)  # the defaults of what was not given
        try:
            out = score_foreign(args.task, args.foreign, seeds=args.seeds or base.seeds, workers=args.workers or 1,
                                out=args.out or base.out, date=args.date, max_steps=args.max_steps)
        except FileNotFoundError as exc:
            raise UserError(str(exc)) from None
        print((out / "foreign.md").read_text())
        return 0

    from refine_core.cli import UserError
    from refine_core.experiment.runner import ExperimentSetupError
    from refine_core.rollout.plan import SeedRangeError

    if args.offline_rows is False and args.from_run is None:
        raise UserError("--no-offline-rows leaves only the rows of --from-run; give --from-run DIR")
    try:
        options = ExperimentOptions.from_args(args)
    except ValueError as exc:  # --rl-set, --il-set, or a value the options refuse
        raise UserError(str(exc)) from None
    try:
        out = run_experiment(options)
    except (FileNotFoundError, ExperimentSetupError, SeedRangeError) as exc:
        raise UserError(str(exc)) from None
    print(f"results: {out}")
    return 0
