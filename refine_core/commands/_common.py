"""Argument helpers shared by several verbs, so every command spells them the same way."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError

DB_NAME = "run.db"


def add_run_dir(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--run", type=Path, required=required, metavar="DIR",
                        help=f"run directory (holds {DB_NAME})")


def db_path(run_dir: Path, must_exist: bool = True) -> Path:
    path = Path(run_dir) / DB_NAME
    if must_exist and not path.exists():
        raise UserError(f"no run database at {path} (record a demonstration or start a run first)")
    return path


def task_or_error(name: str, description: str | None = None):
    """The task `name` under the description variant `description` (None: its default)."""
    from refine_core.tasks.registry import UnknownDescriptionError, UnknownTaskError, get_task

    try:
        return get_task(name, description)
    except (UnknownTaskError, UnknownDescriptionError) as exc:
        raise UserError(str(exc)) from None
