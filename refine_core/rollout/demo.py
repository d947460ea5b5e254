"""The demonstration every fit in a run uses: one take, or several takes of one session.

Kept as arrays the fit consumes directly (`inputs` keyed like the policy's forward arguments,
`actions` as executed) plus the same step table a policy rollout produces, so diagnostics can
compare a rollout with the demonstration column for column.

Two kinds exist and each says so in `source`: the task's scripted expert in simulation
(`record_demonstration`, `SIMULATED_EXPERT`), or an operator driving a robot or a simulator
through ROS (`recorded_demonstration`, `teleop_source(robot)`). A robot must only ever be
fitted to a demonstration recorded on it, so the source travels with the arrays.

Several takes: an operator may keep several takes of a session (`demonstrations.take`). What
imitation learning gets is their concatenation: the steps of every chosen take, take after take,
as one dataset (`Demonstration.combine`). The fit scores each step's action given that step's
observation, so no training pair straddles two takes; the boundaries stay known
(`take_starts`, and in the step table each take is its own `demo` episode, numbered by take)
for diagnostics and for anything that needs whole episodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from refine_core.rollout.schema import RolloutSchema
from refine_core.rollout.table import TableBuilder
from refine_core.store.db import RunDatabase
from refine_core.store.schema import SIMULATED_EXPERT
from refine_core.tasks.base import Task
from refine_core.tasks.spec import TaskSpec

__all__ = ["SIMULATED_EXPERT", "Demonstration", "DemonstrationError", "parse_takes", "record_demonstration",
           "recorded_demonstration", "teleop_source"]


class DemonstrationError(RuntimeError):
    """No usable demonstration: none recorded, a failed recording, or a stored one that does
    not fit the task."""


def teleop_source(robot: str) -> str:
    """The `source` of a demonstration an operator drove on `robot` (a profile's robot name,
    e.g. `arm_real`, or a simulator profile such as `door_sim`)."""
    robot = str(robot).strip()
    if not robot:
        raise ValueError("a teleoperated demonstration needs the name of the robot it was recorded on")
    return f"teleop ({robot})"


def parse_takes(text: str) -> tuple[int, ...] | None:
    """The takes a fit uses, from text such as `0,2` (None for '' or `all`: every stored take);
    ValueError for anything else."""
    text = str(text).strip().lower()
    if text in ("", "all"):
        return None
    try:
        takes = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise ValueError(f"takes must be 'all' or take numbers separated by commas (e.g. 0,2), got {text!r}") from None
    if not takes or min(takes) < 0 or len(set(takes)) != len(takes):
        raise ValueError(f"takes must list distinct take numbers >= 0, got {text!r}")
    return takes


@dataclass
class Demonstration:
    task: str
    seed: int
    inputs: dict[str, np.ndarray]
    """Forward arguments per step, each (T, *input shape), float32."""
    actions: np.ndarray
    """Executed (clipped) expert actions, (T, A), float32."""
    rewards: np.ndarray
    """(T,), float64 (NaN where nothing measured a reward: a robot)."""
    source: str
    """Who drove: `SIMULATED_EXPERT`, or `teleop_source(robot)`."""
    summary: dict[str, Any] = field(default_factory=dict)
    table: pd.DataFrame | None = field(default=None, repr=False)
    label: str | None = None
    """The operator's note about a teleoperated demonstration."""
    columns: tuple[str, ...] | None = None
    """The observation columns the inputs were built from, in order (None: not recorded, a
    database from before schema version 2)."""
    takes: tuple[int, ...] = (0,)
    """The take numbers the steps come from, in order."""
    take_starts: tuple[int, ...] = (0,)
    """The index of each take's first step in the arrays (the episode boundaries)."""

    @property
    def steps(self) -> int:
        return int(len(self.actions))

    def save(self, db: RunDatabase, run_id: int, take: int | None = None) -> int:
        """Store the demonstration, arrays and step table together: as take `take`, or (None)
        replacing every take the run had."""
        return db.save_demonstration(
            run_id, task=self.task, seed=self.seed, inputs=self.inputs, actions=self.actions,
            rewards=self.rewards, summary=self.summary, source=self.source, label=self.label,
            columns=self.columns, table=self.table, take=take,
        )

    @classmethod
    def load(cls, db: RunDatabase, run_id: int, takes: Sequence[int] | None = None) -> Demonstration:
        """The run's demonstration: every stored take (`takes` None), or the takes listed, in
        that order, concatenated (`combine`)."""
        stored = db.demonstration_takes(run_id)
        if not stored:
            raise DemonstrationError(f"run {run_id} has no demonstration")
        wanted = list(stored) if takes is None else [int(t) for t in takes]
        missing = [t for t in wanted if t not in stored]
        if missing or not wanted:
            raise DemonstrationError(f"run {run_id} has no take {', '.join(map(str, missing)) or '(none chosen)'}; "
                                     f"its takes are {', '.join(map(str, stored))}")
        return cls.combine([cls._load_take(db, run_id, take) for take in wanted])

    @classmethod
    def _load_take(cls, db: RunDatabase, run_id: int, take: int) -> Demonstration:
        row = db.load_demonstration(run_id, take)
        table = db.load_steps(run_id, kind="demo", episode=take)
        columns = row.get("columns")
        return cls(
            task=row["task"], seed=int(row["seed"]), inputs=row["inputs"],
            actions=row["actions"], rewards=row["rewards"], source=row.get("source") or SIMULATED_EXPERT,
            summary=row["summary"] or {}, table=table if len(table) else None, label=row.get("label"),
            columns=None if columns is None else tuple(columns), takes=(take,),
        )

    @classmethod
    def combine(cls, parts: Sequence[Demonstration]) -> Demonstration:
        """Several takes as one demonstration: arrays and step tables concatenated take after
        take, `take_starts` marking where each begins. The takes must share task, source and
        columns (a robot is fitted only to takes recorded on it)."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]
        for part in parts[1:]:
            for name in ("task", "source", "columns"):
                if getattr(part, name) != getattr(first, name):
                    raise DemonstrationError(f"take {part.takes[0]} has {name} {getattr(part, name)!r}, take "
                                             f"{first.takes[0]} {getattr(first, name)!r}: takes of one fit must agree")
        starts = np.cumsum([0] + [p.steps for p in parts[:-1]])
        tables = [p.table for p in parts if p.table is not None]
        summary = {**first.summary, "steps": int(sum(p.steps for p in parts)), "takes": len(parts),
                   "take_summaries": [dict(p.summary, take=p.takes[0]) for p in parts]}
        successes = [float(p.summary.get("success", math.nan)) for p in parts]
        labelled = [s for s in successes if math.isfinite(s)]
        summary["success"] = float(np.mean(labelled)) if labelled else math.nan
        return cls(
            task=first.task, seed=first.seed,
            inputs={k: np.concatenate([p.inputs[k] for p in parts]) for k in first.inputs},
            actions=np.concatenate([p.actions for p in parts]), rewards=np.concatenate([p.rewards for p in parts]),
            source=first.source, summary=summary,
            table=pd.concat(tables, ignore_index=True) if len(tables) == len(parts) else None,
            label="; ".join(p.label for p in parts if p.label) or None, columns=first.columns,
            takes=tuple(t for p in parts for t in p.takes), take_starts=tuple(int(s) for s in starts),
        )

    @property
    def simulated_expert(self) -> bool:
        return self.source == SIMULATED_EXPERT



def record_demonstration(
    task: Task, seed: int | None = None, *, max_steps: int | None = None
) -> Demonstration:
    """One expert episode on `seed` (default: the task's demonstration seed)."""
    from refine_core.rollout.runner import run_episode  # torch: not for the readers of takes

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
    return Demonstration(
        task=spec.name, seed=seed, inputs=_inputs(spec, table),
        actions=table[RolloutSchema.for_task(spec).act()].to_numpy(np.float32),
        rewards=table["reward"].to_numpy(np.float64), source=SIMULATED_EXPERT, summary=result.summary,
        table=table, columns=tuple(spec.observation_columns),
    )


def _inputs(spec: TaskSpec, table: pd.DataFrame) -> dict[str, np.ndarray]:
    """The forward inputs, straight from the table's observation columns, which hold every
    input coordinate in row-major order (InputSpec.columns)."""
    return {inp.name: table[list(inp.columns)].to_numpy(np.float32).reshape(len(table), *inp.shape)
            for inp in spec.inputs}


def recorded_demonstration(
    task: Task, observations: np.ndarray, actions: np.ndarray, *, source: str,
    columns: Sequence[str], rewards: np.ndarray | None = None, seed: int = -1,
    summary: dict[str, Any] | None = None, label: str | None = None,
) -> Demonstration:
    """A demonstration an operator drove: `observations` (T or T + 1 rows, the last one being
    the state after the last action) in the order `columns` names them, `actions` (T, A) as
    the robot executed them. `columns` must be the task's observation columns in the task's
    order, because a fitted program reads its inputs by position; `seed` -1 means a physical
    scene (no simulator seed). Raises DemonstrationError for anything a fit could not use."""
    spec = task.spec
    if tuple(columns) != tuple(spec.observation_columns):
        raise DemonstrationError(_column_mismatch(tuple(columns), tuple(spec.observation_columns)))
    obs = np.asarray(observations, dtype=np.float64)
    act = np.asarray(actions, dtype=np.float64)
    steps = len(act)
    if act.ndim != 2 or act.shape[1] != len(spec.actions):
        raise DemonstrationError(f"actions have shape {act.shape}; {spec.name} has {len(spec.actions)} actions")
    if obs.ndim != 2 or obs.shape[1] != len(columns) or len(obs) not in (steps, steps + 1):
        raise DemonstrationError(f"observations have shape {obs.shape}; need ({steps} or {steps + 1}, "
                                 f"{len(columns)}) for {steps} actions")
    if steps < 2:
        raise DemonstrationError(f"a demonstration needs at least 2 steps, got {steps}")
    for name, values in (("observation", obs), ("action", act)):
        bad = np.flatnonzero(~np.isfinite(values).all(axis=1))
        if bad.size:
            raise DemonstrationError(f"step {int(bad[0])} has a non-finite {name}")
    reward = np.full(steps, np.nan) if rewards is None else np.asarray(rewards, dtype=np.float64)
    if reward.shape != (steps,):
        raise DemonstrationError(f"rewards have shape {reward.shape}, need ({steps},)")
    builder = TableBuilder(spec, {"kind": "demo", "episode": 0, "seed": int(seed)})
    zero = np.zeros(len(spec.actions))
    for t in range(len(obs)):
        builder.observe(dict(zip(columns, obs[t], strict=True)))
        if t < steps:
            builder.step(info={}, mean=act[t], std=zero, act=act[t], expert=None, reward=float(reward[t]),
                         done=t == steps - 1)
    table = builder.build()
    total = float(np.nansum(reward)) if np.isfinite(reward).any() else math.nan
    summary = {"return": total, "metric": math.nan, "success": math.nan, **(summary or {}), "steps": steps}
    return Demonstration(task=spec.name, seed=int(seed), inputs=_inputs(spec, table),
                         actions=act.astype(np.float32), rewards=reward, source=source, summary=summary,
                         table=table, label=label, columns=tuple(columns))


def _column_mismatch(got: tuple[str, ...], want: tuple[str, ...]) -> str:
    if len(got) != len(want):
        return f"the observation has {len(got)} columns, the task needs {len(want)}"
    first = next(i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b)
    return (f"observation column {first} is {got[first]!r}, the task needs {want[first]!r} "
            "(the robot's observation must use the task's column order)")
