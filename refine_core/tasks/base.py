"""The small interface every benchmark task implements, and the registry entry that finds it.

Everything task-specific the rest of the project needs goes through these methods: the loop,
the offline analyst, the ROS sim node and the MCAP export call them and never ask which task
they hold. A new task is one folder (`env.py`, `expert.py`, `task.py`, `scene.py`, optionally
`programs/starter.py`) plus one line in `registry.py`.
"""

from __future__ import annotations

import importlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.scene import Scene, Shape
from refine_core.tasks.spec import TaskSpec

Expert = Callable[[Any], np.ndarray]
"""Maps the env's current observation to an action in the task's action space; may read
privileged simulator state through the env it was built for."""

STARTER_FILE = "programs/starter.py"
"""Where a task folder keeps its zero-shot program (read as text, never imported)."""
TEMPLATE_FILE = "programs/offline_template.py"
"""The offline analyst's catalogue template: the starter with every edit's regions."""


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
    camera_frame: str | None = None
    """Frame id of the sim node's camera image; None: the node's fixed frame."""

    # -- simulation -------------------------------------------------------------------------
    @abstractmethod
    def make_env(self, render_mode: str | None = None) -> gym.Env:
        """A fresh environment; `env.reset(seed=s)` fixes the configuration (track, door)."""

    def make_camera_env(self, width: int, height: int) -> gym.Env:
        """An env whose `render()` returns RGB frames for a camera topic. The default renders
        at the env's own size and leaves resizing to the caller; a task whose renderer can
        draw at `width` x `height` directly (MuJoCo) overrides this."""
        return self.make_env(render_mode="rgb_array")

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

    # -- what a viewer draws ----------------------------------------------------------------
    def scene(self, env: gym.Env) -> Scene:
        """The current state of `env` as scene primitives (privileged state allowed). Called
        once per step by the sim node, so it should cost far less than a step; the same
        fields must be filled at every step."""
        return Scene()

    def static_shapes(self, env: gym.Env) -> tuple[Shape, ...]:
        """Shapes fixed for the episode (a race track), read once after each reset; viewers
        re-send them now and then rather than every step."""
        return ()

    def scene_from_observation(self, row: Mapping[str, float]) -> Scene | None:
        """The part of the scene a logged observation row alone determines ({column: value},
        `spec.observation_columns`), for replaying a database without a simulator; None when
        the observation says nothing about where things are."""
        return None

    # -- what an analyst starts from and looks at --------------------------------------------
    def starter_program(self) -> str | None:
        """Source of the zero-shot program an analyst without a model (the offline one)
        starts from: the task folder's `programs/starter.py`, or None."""
        return self._program_file(STARTER_FILE)

    def offline_catalogue(self) -> tuple[str, tuple] | None:
        """The offline analyst's pre-written edits for this task: (template text, edits), from
        the folder's `programs/offline_template.py` and `offline_catalogue.py`; None when the
        task has none (the offline analyst then diagnoses and stops)."""
        template = self._program_file(TEMPLATE_FILE)
        package = type(self).__module__.rpartition(".")[0]
        if template is None or importlib.util.find_spec(f"{package}.offline_catalogue") is None:
            return None
        return template, importlib.import_module(f"{package}.offline_catalogue").EDITS

    def _program_file(self, name: str) -> str | None:
        package = type(self).__module__.rpartition(".")[0]
        path = resources.files(package).joinpath(name) if package else None
        return path.read_text(encoding="utf-8") if path is not None and path.is_file() else None

    def diagnostic_checks(self) -> tuple[list[str], list[str]]:
        """Task-specific checks for the offline diagnostic battery: (helper code defining
        check functions, the `_run(...)` calls that use them), analysis code that runs in the
        sandbox. None by default: the battery then reports a generic metric only."""
        return [], []

    def diagnostic_features(self) -> dict[str, str]:
        """Named state features the offline diagnostic battery looks for expert-disagreement
        hot spots along: {name: expression}, where the expression is numpy code over rollout
        table columns written as ``C('<column>')`` (and ``np``)."""
        return {}
