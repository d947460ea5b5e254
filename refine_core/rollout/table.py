"""The rollout table of one episode: one row per step, named by `rollout.schema.RolloutSchema`.

Rows are collected as per-step arrays and the DataFrame is built once at the end: building
frames row by row costs more than the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from refine_core.rollout.schema import ID_COLUMNS, RolloutSchema
from refine_core.tasks.spec import TaskSpec


class TableBuilder:
    """Accumulates one episode's steps; `build()` returns the DataFrame.

    `ids` fills the id columns (run_id, round, kind, episode, seed); missing ids are NULL.
    """

    def __init__(self, spec: TaskSpec, ids: Mapping[str, Any] | None = None) -> None:
        self.spec = spec
        self.ids = {k: (ids or {}).get(k) for k in ID_COLUMNS if k != "step"}
        unknown = set(ids or {}) - set(ID_COLUMNS)
        if unknown:
            raise ValueError(f"unknown table id columns {sorted(unknown)}")
        self._obs_columns: list[str] | None = None
        self._obs: list[list[float]] = []
        self._info_keys: list[str] | None = None
        self._info: list[list[float]] = []
        self._mean: list[np.ndarray] = []
        self._std: list[np.ndarray] = []
        self._act: list[np.ndarray] = []
        self._expert: list[np.ndarray] = []
        self._reward: list[float] = []
        self._done: list[int] = []

    def __len__(self) -> int:
        return len(self._reward)

    def observe(self, row: Mapping[str, float]) -> None:
        """The observation the next step acts on (call once after reset, then after each step)."""
        if self._obs_columns is None:
            self._obs_columns = list(row)
        elif len(row) != len(self._obs_columns):
            raise ValueError("observation rows changed their columns mid-episode")
        self._obs.append([float(v) for v in row.values()])

    def check_info_keys(self, info: Mapping[str, float]) -> None:
        """Raise if `info` does not have the keys of the earlier steps (the columns are fixed
        by the first step)."""
        if self._info_keys is not None and list(info) != self._info_keys:
            raise ValueError(
                f"info keys changed mid-episode: {sorted(info)} vs {sorted(self._info_keys)}"
            )

    def step(
        self,
        *,
        info: Mapping[str, float],
        mean: np.ndarray,
        std: np.ndarray,
        act: np.ndarray,
        expert: np.ndarray | None,
        reward: float,
        done: bool,
    ) -> None:
        self.check_info_keys(info)
        if self._info_keys is None:
            self._info_keys = list(info)
        self._info.append([float(info[k]) for k in self._info_keys])
        self._mean.append(np.asarray(mean, dtype=np.float64).reshape(-1))
        self._std.append(np.asarray(std, dtype=np.float64).reshape(-1))
        self._act.append(np.asarray(act, dtype=np.float64).reshape(-1))
        if expert is not None:
            self._expert.append(np.asarray(expert, dtype=np.float64).reshape(-1))
        self._reward.append(float(reward))
        self._done.append(int(bool(done)))

    def schema(self) -> RolloutSchema:
        """The schema of the table being built (info keys as the program returned them)."""
        return RolloutSchema.for_task(self.spec, self._info_keys or (), expert=bool(self._expert))

    def build(self) -> pd.DataFrame:
        """The episode's table. Needs one more observation than steps (the final one) for the
        `next_` columns; if the episode stopped early without it, the last row's `next_` values
        are NaN."""
        n = len(self._reward)
        schema = self.schema()
        obs_columns = self._obs_columns or list(self.spec.observation_columns)
        obs = np.full((n + 1, len(obs_columns)), np.nan)
        if self._obs:
            given = np.asarray(self._obs[: n + 1], dtype=np.float64)
            obs[: len(given)] = given
        data: dict[str, Any] = {}
        for key in ("run_id", "round", "kind", "episode", "seed"):
            data[key] = [self.ids[key]] * n
        data["step"] = np.arange(n, dtype=np.int64)
        for j, column in enumerate(obs_columns):
            data[column] = obs[:n, j]
        info_keys = list(schema.info_keys)
        info = np.asarray(self._info, dtype=np.float64).reshape(n, len(info_keys))
        for j, key in enumerate(info_keys):
            data[key] = info[:, j]
        width = len(schema.action_names)
        for names, rows in ((schema.mean(), self._mean), (schema.std(), self._std), (schema.act(), self._act)):
            block = np.asarray(rows, dtype=np.float64).reshape(n, width)
            data.update({name: block[:, j] for j, name in enumerate(names)})
        if self._expert:
            if len(self._expert) != n:
                raise ValueError("expert labels were given for only some steps")
            block = np.asarray(self._expert, dtype=np.float64).reshape(n, width)
            data.update({name: block[:, j] for j, name in enumerate(schema.expert_columns())})
        data["reward"] = np.asarray(self._reward, dtype=np.float64)
        data["done"] = np.asarray(self._done, dtype=np.int64)
        for j, column in enumerate(schema.next_observation()):
            data[column] = obs[1 : n + 1, j]
        frame = pd.DataFrame(data)
        for key in ("run_id", "round", "episode", "seed"):
            if self.ids[key] is not None:
                frame[key] = frame[key].astype("int64")
        return frame
