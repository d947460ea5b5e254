"""`refine report`: an HTML report of a run and a short text summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir, db_path


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("report", help="write a self-contained HTML report of a run")
    add_run_dir(p)
    p.add_argument("--out", type=Path, default=None, help="HTML file (default DIR/report.html)")
    p.add_argument("--summary", action="store_true",
                   help="also (re)write the run's one-page summary, DIR/summary.json and DIR/summary.md (task, "
                        "description, analyst and model, start, every round, calls, tokens and resets)")
    return p


def run(args) -> int:
    from refine_core.report import build_report
    from refine_core.store.db import RunDatabase

    db = RunDatabase(db_path(args.run))
    try:
        out, summary = build_report(db, args.out or Path(args.run) / "report.html")
    except ValueError as exc:
        raise UserError(str(exc)) from None
    print(summary)
    print(f"report: {out}")
    if args.summary:
        from refine_core.summary import write_summary

        json_path, md_path = write_summary(db, Path(args.run))
        print(f"summary: {json_path} and {md_path}")
    return 0
