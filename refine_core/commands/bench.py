"""`refine bench`: benchmark figures as one JSON object (see refine_core/bench.py)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("bench", help="measure speed figures side by side and print them")
    p.add_argument("--json", action="store_true", help="print one JSON object (default: key = value lines)")
    p.add_argument("--only", nargs="*", default=None,
                   help="subset: envs sqlite il sandbox analysis rl parallel ros twin")
    p.add_argument("--quick", action="store_true",
                   help="every benchmark at its smallest size: checks that each section runs (a test uses it); "
                        "the figures mean nothing")
    return p


def run(args) -> int:
    from refine_core.bench import run_all

    results = run_all(set(args.only) if args.only else None, quick=args.quick)
    if args.json:
        print(json.dumps(results, indent=1, sort_keys=True))
    else:
        for key, value in sorted(results.items()):
            print(f"{key} = {value:.4g}" if isinstance(value, float) else f"{key} = {value}")
    return 0
