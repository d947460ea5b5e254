"""Benchmark tasks, one folder each (see `registry.py`). Importing this package registers
every task's Gymnasium id: ``refine/CarRacingSemantic-v0`` (1000-step limit),
``refine/DoorOpen-v0`` (500 steps) and ``refine/Pendulum-v0`` (200 steps)."""

from __future__ import annotations

from refine_core.tasks.base import Expert, Task, TaskEntry
from refine_core.tasks.registry import UnknownTaskError, get_task, register_envs, task_names
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

register_envs()

CAR_ENV_ID = "refine/CarRacingSemantic-v0"
DOOR_ENV_ID = "refine/DoorOpen-v0"
PENDULUM_ENV_ID = "refine/Pendulum-v0"

__all__ = [
    "ActionSpec",
    "CAR_ENV_ID",
    "DOOR_ENV_ID",
    "Expert",
    "InputSpec",
    "MetricSpec",
    "PENDULUM_ENV_ID",
    "Task",
    "TaskEntry",
    "TaskSpec",
    "UnknownTaskError",
    "get_task",
    "task_names",
]
