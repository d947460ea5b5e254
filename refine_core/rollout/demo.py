"""The one expert demonstration every fit in a run uses.

Kept as arrays the fit consumes directly (`inputs` keyed like the policy's forward arguments,
`actions` as executed) plus the same step table a policy rollout produces, so diagnostics can
compare a rollout with the demonstration column for column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from refine_core.rollout.runner import run_episode
from refine_core.rollout.schema import RolloutSchema
from refine_core.store.db import RunDatabase
from refine_core.tasks.base import Task


class DemonstrationError(RuntimeError):
    """The expert episode could not be recorded or a stored one is unusable."""


@dataclass
class Demonstration:
    task: str
    seed: int
    inputs: dict[str, np.ndarray]
    """Forward arguments per step, each (T, *input shape), float32."""
    actions: np.ndarray
    """Executed (clipped) expert actions, (T, A), float32."""
    rewards: np.ndarray
    """(T,), float64."""
    summary: dict[str, Any] = field(default_factory=dict)
    table: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def steps(self) -> int:
        return int(len(self.actions))

    def save(self, db: RunDatabase, run_id: int) -> int:
        """Store (or replace) the run's demonstration, arrays and step table together."""
        return db.save_demonstration(
            run_id, task=self.task, seed=self.seed, inputs=self.inputs, actions=self.actions,
            rewards=self.rewards, summary=self.summary, table=self.table,
        )

    @classmethod
    def load(cls, db: RunDatabase, run_id: int) -> Demonstration:
        row = db.load_demonstration(run_id)
        if row is None:
            raise DemonstrationError(f"run {run_id} has no demonstration")
        table = db.load_steps(run_id, kind="demo")
        return cls(
            task=row["task"], seed=int(row["seed"]), inputs=row["inputs"],
            actions=row["actions"], rewards=row["rewards"], summary=row["summary"] or {},
            table=table if len(table) else None,
        )


def record_demonstration(
    task: Task, seed: int | None = None, *, max_steps: int | None = None
) -> Demonstration:
    """One expert episode on `seed` (default: the task's demonstration seed)."""
    seed = task.spec.demo_seed if seed is None else int(seed)
    result = run_episode(
        task, None, seed, mode="mean", label_expert=False, max_steps=max_steps,
        ids={"kind": "demo", "episode": 0},
    )
    if result.error is not None:
        raise DemonstrationError(f"expert episode on seed {seed} failed: {result.error}")
    table = result.table
    if len(table) == 0:
        raise DemonstrationError(f"expert episode on seed {seed} has no steps")
    spec = task.spec
    # The forward inputs come straight from the table's observation columns, which hold every
    # input coordinate in row-major order (InputSpec.columns).
    inputs = {
        inp.name: table[list(inp.columns)].to_numpy(np.float32).reshape(len(table), *inp.shape)
        for inp in spec.inputs
    }
    actions = table[RolloutSchema.for_task(spec).act()].to_numpy(np.float32)
    rewards = table["reward"].to_numpy(np.float64)
    return Demonstration(
        task=spec.name, seed=seed, inputs=inputs, actions=actions, rewards=rewards,
        summary=result.summary, table=table,
    )
