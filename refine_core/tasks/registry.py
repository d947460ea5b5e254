"""Name -> Task lookup. A task is one folder under `refine_core/tasks/`; listing its package
here, in one line, is all it takes for the CLI, the loop, the offline analyst, the ROS nodes
and the MCAP export to know it."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import cache
from types import MappingProxyType

from refine_core.tasks.base import Task, TaskEntry, UnknownDescriptionError

__all__ = ["UnknownDescriptionError", "UnknownTaskError", "entries", "get_task", "register_envs", "task_names"]

TASK_PACKAGES: tuple[str, ...] = (
    "refine_core.tasks.car_racing",
    "refine_core.tasks.door_open",
    "refine_core.tasks.pendulum",
)


class UnknownTaskError(ValueError):
    pass


@cache
def entries() -> Mapping[str, TaskEntry]:
    """Each registered task's entry (its folder's `ENTRY`), by task name. Importing a task
    folder's package is cheap: the simulator is imported only when an env is made."""
    found: dict[str, TaskEntry] = {}
    for package in TASK_PACKAGES:
        entry = importlib.import_module(package).ENTRY
        if entry.name in found:
            raise ValueError(f"task {entry.name!r} is registered twice ({package})")
        found[entry.name] = entry
    return MappingProxyType(found)


def register_envs() -> None:
    """Register every task's Gymnasium id (idempotent)."""
    for entry in entries().values():
        entry.register_env()


def task_names() -> tuple[str, ...]:
    return tuple(entries())


def get_task(name: str, description: str | None = None) -> Task:
    """The task `name`, described by the variant `description` (None: the task's default;
    raises `UnknownDescriptionError` for a variant the task does not offer)."""
    try:
        entry = entries()[name]
    except (KeyError, TypeError):
        raise UnknownTaskError(
            f"unknown task {name!r}; known tasks: {', '.join(task_names())}"
        ) from None
    return entry.load(description)
