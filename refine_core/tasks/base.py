"""The small interface every benchmark task implements.

Everything task-specific the rest of the project needs goes through these few methods, so a
new task is one module plus a registry line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.spec import TaskSpec

Expert = Callable[[Any], np.ndarray]
"""Maps the env's current observation to an action in the task's action space; may read
privileged simulator state through the env it was built for."""


class Task(ABC):
    spec: TaskSpec

    @abstractmethod
    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """A fresh environment; `env.reset(seed=s)` fixes the configuration (track, door)."""

    @abstractmethod
    def expert(self, env: gym.Env) -> Expert:
        """The scripted expert bound to `env` (privileged access allowed)."""

    @abstractmethod
    def split_observation(self, obs: Any) -> dict[str, np.ndarray]:
        """Env observation -> the policy's forward inputs, unbatched, float32, keyed by
        `spec.inputs[i].name` with shape `spec.inputs[i].shape`."""

    def observation_row(self, obs: Any) -> dict[str, float]:
        """Env observation -> {semantic column name: value} for the rollout table."""
        parts = self.split_observation(obs)
        row: dict[str, float] = {}
        for spec in self.spec.inputs:
            row.update(
                zip(
                    spec.columns,
                    np.asarray(parts[spec.name], dtype=float).ravel().tolist(),
                    strict=True,
                )
            )
        return row

    @abstractmethod
    def episode_summary(
        self, observations: Sequence[Any], rewards: Sequence[float], infos: Sequence[dict]
    ) -> dict[str, float]:
        """Per-episode figures: at least `return`, `metric` (the spec's metric) and `success`
        (0/1). `observations` holds every observation including the initial one."""
