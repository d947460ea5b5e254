"""The bundled zero-shot starter programs, looked up by task name.

Each task folder keeps its own starter (`refine_core/tasks/<task>/programs/starter.py`, read as
text and loaded through the contract like any program an analyst writes); this is the lookup
the commands and the offline analyst use.
"""

from __future__ import annotations

from pathlib import Path


class NoStarterProgramError(ValueError):
    """The task has no bundled starter program (an LLM analyst has to write the first one)."""


def starter_tasks() -> tuple[str, ...]:
    from refine_core.tasks.registry import get_task, task_names

    return tuple(name for name in task_names() if get_task(name).starter_program() is not None)


def program_path(task_name: str) -> Path:
    """Path of the task's bundled starter program file."""
    from importlib import resources

    from refine_core.tasks.base import STARTER_FILE
    from refine_core.tasks.registry import UnknownTaskError, get_task

    try:
        package = type(get_task(task_name)).__module__.rpartition(".")[0]
    except UnknownTaskError:
        raise NoStarterProgramError(f"no bundled program {task_name!r}; bundled starters: "
                                    f"{', '.join(starter_tasks())}") from None
    path = Path(str(resources.files(package).joinpath(STARTER_FILE)))
    if not path.is_file():
        raise NoStarterProgramError(f"task {task_name!r} has no bundled starter program")
    return path


def starter_program(task_name: str) -> str:
    """Source text of the bundled starter program for `task_name`."""
    from refine_core.tasks.registry import UnknownTaskError, get_task

    try:
        source = get_task(task_name).starter_program()
    except UnknownTaskError:
        source = None
    if source is None:
        raise NoStarterProgramError(
            f"no bundled starter program for task {task_name!r} (bundled: {', '.join(starter_tasks())}); "
            "an LLM analyst has to write the first program")
    return source
