"""Benchmark tasks. Importing this package registers the Gymnasium ids
``refine/CarRacingSemantic-v0`` (1000-step limit) and ``refine/DoorOpen-v0`` (500 steps)."""

from __future__ import annotations

import gymnasium as gym

from refine_core.tasks.base import Expert, Task
from refine_core.tasks.registry import UnknownTaskError, get_task, task_names
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

CAR_ENV_ID = "refine/CarRacingSemantic-v0"
DOOR_ENV_ID = "refine/DoorOpen-v0"


def _register() -> None:
    if CAR_ENV_ID not in gym.registry:
        gym.register(
            id=CAR_ENV_ID,
            entry_point="refine_core.tasks.car_racing:CarRacingSemantic",
            max_episode_steps=1000,
        )
    if DOOR_ENV_ID not in gym.registry:
        # the env truncates itself at 500 steps (Meta-World refuses a 501st step)
        gym.register(id=DOOR_ENV_ID, entry_point="refine_core.tasks.door_open:DoorOpenEnv")


_register()

__all__ = [
    "ActionSpec",
    "CAR_ENV_ID",
    "DOOR_ENV_ID",
    "Expert",
    "InputSpec",
    "MetricSpec",
    "Task",
    "TaskSpec",
    "UnknownTaskError",
    "get_task",
    "task_names",
]
