"""The simulation contract every benchmark task implements, and the registry entry that finds it.

A `Task` is what the method needs to run a task: its spec (the text and columns the analyst
reads), an environment, a scripted expert for the demonstration, how an observation becomes
the policy's inputs and the table's row, and how an episode becomes figures. The loop, the
rollout runner, IL and RL use nothing else. What only one user needs (what a viewer draws,
the offline analyst's catalogue and checks, teleop maps, published figures) lives in optional
modules of the task's folder that the user looks up by task name (`registry.task_part`).
A new task is one folder (`__init__.py`, `env.py`, `expert.py`, `task.py`, and any optional
parts) plus one line in `registry.py`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.spec import TaskSpec

Expert = Callable[[Any], np.ndarray]
"""Maps the env's current observation to an action in the task's action space; may read
privileged simulator state through the env it was built for."""

def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class TaskEntry:
    """What the registry knows about a task before importing its simulator: enough to
    register the Gymnasium id and to build the `Task` on demand. Each task folder's
    `__init__.py` defines one as `ENTRY`."""

    name: str
    task: str
    """``"module:Class"`` of the `Task` subclass."""
    env_id: str
    env_entry_point: str
    """``"module:Class"`` of the Gymnasium env."""
    max_episode_steps: int | None = None
    """Gymnasium's TimeLimit; None when the env truncates itself."""

    def load(self, description: str | None = None) -> Task:
        """The task, described by the variant `description` (None: the task's default)."""
        cls = _load(self.task)
        offered = tuple(getattr(cls, "description_variants", ()) or ())
        if description is None or (not offered and cls().spec.description_variant == description):
            return cls()
        if description not in offered:
            have = ", ".join(offered) or cls().spec.description_variant
            raise UnknownDescriptionError(
                f"task {self.name!r} has no {description!r} description (it has: {have})")
        return cls(description=description)

    def register_env(self) -> None:
        if self.env_id not in gym.registry:
            gym.register(id=self.env_id, entry_point=self.env_entry_point,
                         max_episode_steps=self.max_episode_steps)


class UnknownDescriptionError(ValueError):
    """A task was asked for a description variant it does not have."""


class Task(ABC):
    spec: TaskSpec
    description_variants: tuple[str, ...] = ()
    """The description variants the task offers (`spec.DESCRIPTION_VARIANTS`), its default
    first; a task with one text leaves this empty and takes no `description` argument."""
    metric_from_observations: bool = False
    """True when `episode_summary`'s metric is computed from the observations alone (not from
    the simulator's rewards), so a robot that publishes no reward still measures it; RL on such
    a robot takes it as the reward of each episode (`refine_ros.loop.rl_episodes`)."""

    # -- simulation -------------------------------------------------------------------------
    @abstractmethod
    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """A fresh environment; `env.reset(seed=s)` fixes the configuration (track, door)."""

    @abstractmethod
    def expert(self, env: gym.Env) -> Expert:
        """The scripted expert bound to `env` (privileged access allowed)."""

    # -- observations and episodes ----------------------------------------------------------
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
