"""`refine rl`: one instrumented RL run (or a probe of the IL weights, or a comparison of
earlier runs), for questions about RL itself; see refine_core/experiment/rl_study.py."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

RL_ALIASES = {"reset_budget": ("--resets",)}
"""The flag's spelling in the RL study before it was generated from `RLConfig` (deprecated)."""


HELP = 'one instrumented RL run of a program after IL (docs/RL.md)'
"""The one line `refine --help` shows (without building this verb's flags)."""


def add_parser(sub) -> argparse.ArgumentParser:
    from refine_core.flags import add_flags
    from refine_core.learn.rl import PRESETS, RLConfig

    p = sub.add_parser("rl", help=HELP,
                       description="Record the demonstration, fit PROGRAM by IL, run RL from the IL weights printing "
                                   "every update, and evaluate the IL, final and kept (accepted or best) weights on "
                                   "the evaluation seeds.")
    p.add_argument("--task", default="car_racing", help="task name (see `refine tasks`)")
    p.add_argument("--program", help="'mlp', 'starter' or a program file")
    p.add_argument("--eval-seeds", type=int, default=10, help="evaluation seeds at the end (0: none)")
    p.add_argument("--perturb", action="append", default=[], metavar="NAME=DELTA[,NAME=DELTA]",
                   help="instead of RL: evaluate the IL weights with these parameter offsets (repeatable; "
                        "mean action and sampled on the selection seeds and seeds 5000-5002)")
    p.add_argument("--noise-shift", type=float, default=0.0,
                   help="with --perturb: add this to every log-std element first (the sampled policy's noise)")
    p.add_argument("--out", type=Path, default=None, help="write the full record as JSON here")
    p.add_argument("--compare", nargs="+", type=Path, default=None, metavar="RUN.json",
                   help="instead of running: plot the selection curves of earlier --out files into --figure")
    p.add_argument("--figure", type=Path, default=None)
    p.add_argument("--param", default="v_straight", help="with --compare: the parameter drawn beside")
    p.add_argument("--rl-preset", default="ours", choices=tuple(PRESETS),
                   help="named RL settings the flags below change: 'ours' (the product default: smaller step, trust "
                        "region, accepted checkpoint in the deployed mode) or 'published' (METHOD.md exactly) "
                        "(default: ours)")
    add_flags(p.add_argument_group("RL (refine_core.learn.rl.RLConfig; each flag overrides the preset)"), RLConfig,
              aliases=RL_ALIASES)
    return p


def run(args) -> int:
    from refine_core.cli import UserError
    from refine_core.commands._common import task_or_error
    from refine_core.experiment.rl_study import compare, run_study
    from refine_core.flags import given
    from refine_core.learn.rl import RLConfig

    if args.compare:
        compare(args.compare, args.figure or Path("rl_compare.png"), args.param)
        return 0
    if not args.program:
        raise UserError("--program is required unless --compare is given")
    task = task_or_error(args.task)
    try:
        config = RLConfig.preset(args.rl_preset, task.spec.rl_settings, **given(args, RLConfig))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    result = run_study(task.spec.name, args.program, config, eval_seeds=args.eval_seeds, perturb=args.perturb,
                       noise_shift=args.noise_shift)
    if args.out and result:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"argv": sys.argv[1:], **result}, indent=1, default=float))
    return 0
