"""The bundled zero-shot starter programs, looked up by task name.

Each task folder may keep its own starter (`refine_core/tasks/<task>/programs/starter.py`,
read as text and loaded through the contract like any program an analyst writes); this is the
lookup the commands, the experiment and the offline analyst use.
"""

from __future__ import annotations

from pathlib import Path

STARTER_FILE = "programs/starter.py"
"""Where a task folder keeps its zero-shot program (read as text, never imported)."""


class NoStarterProgramError(ValueError):
    """The task has no bundled starter program (an LLM analyst has to write the first one)."""


def starter_tasks() -> tuple[str, ...]:
    from refine_core.tasks.registry import task_names

    return tuple(name for name in task_names() if find_starter(name) is not None)


def find_starter(task_name: str) -> str | None:
    """Source text of the task's bundled starter, or None (also for an unknown task)."""
    from refine_core.tasks.registry import UnknownTaskError, task_file

    try:
        return task_file(task_name, STARTER_FILE)
    except UnknownTaskError:
        return None


def program_path(task_name: str) -> Path:
    """Path of the task's bundled starter program file."""
    from importlib import resources

    from refine_core.tasks.registry import UnknownTaskError, task_package

    try:
        package = task_package(task_name)
    except UnknownTaskError:
        raise NoStarterProgramError(f"no bundled program {task_name!r}; bundled starters: "
                                    f"{', '.join(starter_tasks())}") from None
    path = Path(str(resources.files(package).joinpath(STARTER_FILE)))
    if not path.is_file():
        raise NoStarterProgramError(f"task {task_name!r} has no bundled starter program")
    return path


def starter_program(task_name: str) -> str:
    """Source text of the bundled starter program for `task_name`."""
    source = find_starter(task_name)
    if source is None:
        raise NoStarterProgramError(
            f"no bundled starter program for task {task_name!r} (bundled: {', '.join(starter_tasks())}); "
            "an LLM analyst has to write the first program")
    return source
