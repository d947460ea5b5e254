"""Benchmark tasks, one folder each (see `registry.py`). Importing this package registers
every task's Gymnasium id (each folder's `ENTRY.env_id`, e.g. ``refine/DoorOpen-v0``)."""

from __future__ import annotations

from refine_core.tasks.base import Expert, Task, TaskEntry
from refine_core.tasks.registry import UnknownTaskError, get_task, register_envs, task_names
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

register_envs()

__all__ = [
    "ActionSpec",
    "Expert",
    "InputSpec",
    "MetricSpec",
    "Task",
    "TaskEntry",
    "TaskSpec",
    "UnknownTaskError",
    "get_task",
    "task_names",
]
