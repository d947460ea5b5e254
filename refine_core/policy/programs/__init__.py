"""Bundled starter programs: the zero-shot structures the offline analyst begins from.

The program files next to this module are package data, read as text and loaded through the
contract like any program an LLM writes; nothing here imports them, so a broken program can
never break importing the package.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_STARTERS = {"car_racing": "starter_car_racing.py", "door_open": "starter_door_open.py"}


class NoStarterProgramError(ValueError):
    """The task has no bundled starter program (an LLM analyst has to write the first one)."""


def starter_tasks() -> tuple[str, ...]:
    return tuple(_STARTERS)


def program_path(name: str) -> Path:
    """Path of a bundled program file by file name (``starter_car_racing.py``) or task name."""
    filename = _STARTERS.get(name, name)
    if not filename.endswith(".py"):
        filename += ".py"
    path = Path(str(resources.files(__name__).joinpath(filename)))
    if filename == "__init__.py" or not path.is_file():
        raise NoStarterProgramError(
            f"no bundled program {name!r}; bundled starters: {', '.join(sorted(_STARTERS))}"
        )
    return path


def starter_program(task_name: str) -> str:
    """Source text of the bundled starter program for `task_name`."""
    if task_name not in _STARTERS:
        raise NoStarterProgramError(
            f"no bundled starter program for task {task_name!r} (bundled: "
            f"{', '.join(sorted(_STARTERS))}); an LLM analyst has to write the first program"
        )
    return program_path(_STARTERS[task_name]).read_text(encoding="utf-8")
