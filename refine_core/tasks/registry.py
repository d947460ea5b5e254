"""Name -> Task lookup. A task is one folder under `refine_core/tasks/`; listing its package
here, in one line, is all it takes for the CLI, the loop, the offline analyst, the experiment,
teleoperation, the ROS nodes and the MCAP export to know it.

Beside the `Task` (the simulation contract, `task.py`), a folder may hold optional parts, each
for one user, which that user finds by task name through `task_part` / `task_file` (the
folder never imports its users, so there is no import cycle):

    scene.py                 viewers (sim node, MCAP export): `refine_core.tasks.view`
    teleop.py                gamepad and keyboard maps (plain data): `refine_ros.teleop.maps`
    programs/starter.py      the zero-shot program: `refine_core.policy.programs`
    offline_catalogue.py     the offline analyst's edits (plain data) over
    programs/offline_template.py   the starter with their regions: `analyst.offline.catalogue`
    diagnostics.py           the offline battery's task checks and features, with the
    diagnostic_checks.py     sandbox code they send as text: `analyst.offline.battery`
    published.py             the published figures and protocol notes: `refine experiment`
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType, ModuleType

from refine_core.tasks.base import Task, TaskEntry, UnknownDescriptionError

__all__ = ["UnknownDescriptionError", "UnknownTaskError", "entries", "get_task", "register_envs", "task_file",
           "task_names", "task_part"]

TASK_PACKAGES: tuple[str, ...] = (
    "refine_core.tasks.car_racing",
    "refine_core.tasks.door_open",
    "refine_core.tasks.pendulum",
)


class UnknownTaskError(ValueError):
    pass


@cache
def _packages() -> Mapping[str, str]:
    """Each registered task's package, by task name."""
    found: dict[str, str] = {}
    for package in TASK_PACKAGES:
        name = importlib.import_module(package).ENTRY.name
        if name in found:
            raise ValueError(f"task {name!r} is registered twice ({package})")
        found[name] = package
    return MappingProxyType(found)


def entries() -> Mapping[str, TaskEntry]:
    """Each registered task's entry (its folder's `ENTRY`), by task name. Importing a task
    folder's package is cheap: the simulator is imported only when an env is made."""
    return MappingProxyType({name: importlib.import_module(package).ENTRY for name, package in _packages().items()})


def register_envs() -> None:
    """Register every task's Gymnasium id (idempotent)."""
    for entry in entries().values():
        entry.register_env()


def task_names() -> tuple[str, ...]:
    return tuple(_packages())


def task_package(name: str) -> str:
    """The package of the task folder `name` (raises `UnknownTaskError`)."""
    try:
        return _packages()[name]
    except (KeyError, TypeError):
        raise UnknownTaskError(
            f"unknown task {name!r}; known tasks: {', '.join(task_names())}"
        ) from None


def get_task(name: str, description: str | None = None) -> Task:
    """The task `name`, described by the variant `description` (None: the task's default;
    raises `UnknownDescriptionError` for a variant the task does not offer)."""
    return importlib.import_module(task_package(name)).ENTRY.load(description)


def task_part(name: str, part: str) -> ModuleType | None:
    """The optional module `part` of task `name`'s folder (e.g. "scene", "teleop"), imported;
    None when the folder has no such module. Raises `UnknownTaskError` for an unknown task."""
    module = f"{task_package(name)}.{part}"
    return importlib.import_module(module) if importlib.util.find_spec(module) is not None else None


def task_file(name: str, path: str) -> str | None:
    """The text of the file `path` (e.g. "programs/starter.py") in task `name`'s folder, never
    imported; None when the folder has no such file. Raises `UnknownTaskError`."""
    found = resources.files(task_package(name)).joinpath(path)
    return found.read_text(encoding="utf-8") if found.is_file() else None
