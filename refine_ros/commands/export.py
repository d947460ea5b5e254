"""`refine export`: a round's rollouts as ROS 2 messages in an MCAP file (Foxglove opens it,
`ros2 bag play` replays it into RViz)."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir, db_path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="export a round's rollouts to MCAP")
    add_run_dir(p)
    p.add_argument("--mcap", type=Path, required=True, metavar="FILE", help="output .mcap file")
    p.add_argument("--round", default="best", help="round number or 'best' (default)")
    p.add_argument("--kind", default=None, help="episode kind (diagnostic, eval, ...); default all logged")
    return p


def run(args) -> int:
    from refine_ros.viewers.export import ExportError, export_mcap

    try:
        counts = export_mcap(db_path(args.run), args.mcap, round_=args.round, kind=args.kind)
    except ExportError as exc:
        raise UserError(str(exc)) from None
    total = sum(counts.values())
    print(f"wrote {total} messages to {args.mcap}: " + ", ".join(f"{t} {n}" for t, n in sorted(counts.items())))
    return 0
