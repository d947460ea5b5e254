"""Name -> Task lookup; the one place a new benchmark task is listed."""

from __future__ import annotations

from collections.abc import Callable

from refine_core.tasks.base import Task


class UnknownTaskError(ValueError):
    pass


def _car() -> Task:
    from refine_core.tasks.car_task import CarRacingTask

    return CarRacingTask()


def _door() -> Task:
    from refine_core.tasks.door_task import DoorOpenTask

    return DoorOpenTask()


_TASKS: dict[str, Callable[[], Task]] = {"car_racing": _car, "door_open": _door}


def task_names() -> tuple[str, ...]:
    return tuple(_TASKS)


def get_task(name: str) -> Task:
    try:
        factory = _TASKS[name]
    except (KeyError, TypeError):
        raise UnknownTaskError(
            f"unknown task {name!r}; known tasks: {', '.join(task_names())}"
        ) from None
    return factory()
