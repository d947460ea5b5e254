"""`refine`: a thin argparse front over refine_core; each verb lives in refine_core/commands/.

Verbs that need ROS (`up`, `export`, `demo`) belong to refine_ros, which contributes them
through the `refine.commands` entry-point group: refine_core never imports refine_ros, and a
verb whose package cannot be imported here is listed with the reason instead of breaking
`refine`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib.metadata import entry_points

COMMANDS = (
    "tasks", "record", "fit", "eval", "run", "analyze", "report", "experiment", "rl", "bench", "serve-inbox",
)
PLUGIN_GROUP = "refine.commands"


def command_modules() -> dict[str, str]:
    """Verb name -> module, core verbs first, then those other packages contribute."""
    modules = {name: f"refine_core.commands.{name.replace('-', '_')}" for name in COMMANDS}
    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        modules.setdefault(entry.name, entry.value)
    return modules


class UserError(Exception):
    """Bad input a user can fix; printed as one line, exit status 2."""


def build_parser(verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `verb`, only that verb's flags are built, and every other
    verb that says its one-line `HELP` is listed by it alone (building a verb's flags can import
    the configs it takes, torch among them, which `refine tasks` should not wait for)."""
    parser = argparse.ArgumentParser(
        prog="refine", description="Refine structured robot policies from one demonstration."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, path in command_modules().items():
        try:
            module = importlib.import_module(path)
        except ImportError as exc:  # e.g. `up` on a machine without the ROS 2 client libraries
            command = sub.add_parser(name, help=f"unavailable here: {exc}")
            command.set_defaults(_run=_unavailable(name, exc))
            continue
        if verb is not None and name != verb and hasattr(module, "HELP"):
            sub.add_parser(name, help=module.HELP)
            continue
        command = module.add_parser(sub)
        command.set_defaults(_run=module.run)
    return parser


def _unavailable(name: str, exc: ImportError):
    def run(_args) -> int:
        raise UserError(f"`refine {name}` cannot run here: {exc}")

    return run


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    verb = next((a for a in argv if not a.startswith("-")), "")  # "": `refine --help` lists the verbs
    args = build_parser(verb).parse_args(argv)
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
