"""`refine demo`: what `make demo` runs — refinement on the door simulation through the ROS 2
node graph in one process, then the evaluation and the report."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("demo", help="the main job: refine door_open through the ROS 2 nodes, then report")
    p.add_argument("--run", type=Path, default=Path("runs/demo"), metavar="DIR")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--profile", default="door_sim")
    return p


def run(args) -> int:
    from refine_core.cli import main as refine_main

    args.run.mkdir(parents=True, exist_ok=True)
    steps = [
        ["up", args.profile, "--run", str(args.run), "--analyst", "offline", "--rounds", str(args.rounds), "--no-rviz"],
        ["report", "--run", str(args.run)],
    ]
    for argv in steps:
        print(f"$ refine {' '.join(argv)}", flush=True)
        code = refine_main(argv)
        if code:
            return code
    return 0
