"""`refine experiment`: the published comparison (MLP / zero-shot / refined x IL / RL budgets)."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.tasks.spec import DESCRIPTION_VARIANTS


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("experiment", help="run the published table's conditions and write results/<task>/<date>/")
    p.add_argument("--task", required=True, help="task name (see `refine tasks`)")
    p.add_argument("--seeds", type=int, default=10, help="evaluation seeds per condition")
    p.add_argument("--workers", type=int, default=None, help="local processes (default: CPU count)")
    p.add_argument("--ray", default=None, metavar="ADDRESS", help="run jobs as Ray tasks ('local' starts one)")
    p.add_argument("--low-resets", type=int, default=400, help="low RL reset budget")
    p.add_argument("--high-resets", type=int, default=2000, help="high RL reset budget")
    p.add_argument("--mlp-rl-lr", type=float, default=None,
                   help="Adam learning rate for the MLP's RL (default: METHOD.md's 0.007, as for every program)")
    p.add_argument("--rl-set", action="append", default=[], metavar="FIELD=VALUE",
                   help="an RLConfig field for every RL condition, e.g. std_scale=0.25 (repeatable; "
                        "the results name every departure from the published method)")
    p.add_argument("--from-run", type=Path, default=None, metavar="DIR",
                   help="a committed LLM run (a folder with summary.json, e.g. results/llm/<task>/<run>): its "
                        "zero-shot program and its best refined program get rows of their own")
    p.add_argument("--no-offline-rows", action="store_true",
                   help="with --from-run: leave out the offline catalogue's rows (bundled starter and its refinement)")
    p.add_argument("--refined-run", type=Path, default=None, metavar="DIR",
                   help="a run directory (run.db) whose zero-shot and best programs are the non-LLM-run rows "
                        "(default: refine now with --analyst)")
    p.add_argument("--analyst", default="offline", help="analyst for refinement when no --refined-run")
    p.add_argument("--description", choices=DESCRIPTION_VARIANTS, default=None,
                   help="task description for a refinement run started here (default: published)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--best-checkpoint", action="store_true",
                   help="beside every RL row (final weights, the published rule), a row with the best weights on "
                        "the selection seeds from the same training; its selection resets are counted as extra")
    p.add_argument("--out", type=Path, default=Path("results"), help="results root")
    p.add_argument("--smoke", action="store_true", help="every condition with tiny budgets (CI)")
    p.add_argument("--date", default=None, help="results sub-folder name (default: today)")
    p.add_argument("--foreign", type=Path, default=None, metavar="DIR",
                   help="instead of the table: fit and evaluate every *<task>.py program in DIR (programs "
                        "written elsewhere to the contract), writing foreign.md beside the results")
    p.add_argument("--max-steps", type=int, default=None, help="cap episode length (smoke runs)")
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
        try:
            out = score_foreign(args.task, args.foreign, seeds=args.seeds, workers=args.workers or 1, out=args.out,
                                date=args.date, max_steps=args.max_steps)
        except FileNotFoundError as exc:
            raise UserError(str(exc)) from None
        print((out / "foreign.md").read_text())
        return 0

    from refine_core.cli import UserError
    from refine_core.experiment.runner import ExperimentSetupError

    if args.no_offline_rows and args.from_run is None:
        raise UserError("--no-offline-rows leaves only the rows of --from-run; give --from-run DIR")
    try:
        options = ExperimentOptions.from_args(args)
    except ValueError as exc:  # --rl-set
        raise UserError(str(exc)) from None
    try:
        out = run_experiment(options)
    except (FileNotFoundError, ExperimentSetupError) as exc:
        raise UserError(str(exc)) from None
    print(f"results: {out}")
    return 0
