"""`refine`: a thin argparse front over refine_core; each verb lives in refine_core/commands/."""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = (
    "tasks", "record", "fit", "eval", "run", "analyze", "report",
    "experiment", "export", "up", "bench", "demo",
)


class UserError(Exception):
    """Bad input a user can fix; printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refine", description="Refine structured robot policies from one demonstration."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module = importlib.import_module(f"refine_core.commands.{name}")
        command = module.add_parser(sub)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UserError as exc:
        print(f"refine {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"refine {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # Import ourselves by name: under `python -m` this file is `__main__`, and the commands
    # raise `refine_core.cli.UserError`, which must be the class `main` catches.
    from refine_core.cli import main as _main

    sys.exit(_main())
