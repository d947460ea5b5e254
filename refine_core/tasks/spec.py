"""Task specifications: the facts a program author (LLM, offline analyst or human) needs.

A spec is plain data so it can be printed into a prompt, stored in the run database and
shared with the ROS nodes without importing a simulator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np


@dataclass(frozen=True)
class InputSpec:
    """One tensor argument of the policy's `forward`, unbatched shape, plus a semantic name per
    flattened coordinate (row-major), which becomes a column of the rollout table."""

    name: str
    shape: tuple[int, ...]
    columns: tuple[str, ...]
    description: str = ""

    def __post_init__(self) -> None:
        if len(self.columns) != prod(self.shape):
            raise ValueError(
                f"input {self.name!r}: {len(self.columns)} column names for shape {self.shape}"
            )


@dataclass(frozen=True)
class ActionSpec:
    name: str
    low: float
    high: float
    description: str = ""


@dataclass(frozen=True)
class MetricSpec:
    """The task metric the loop optimises; `higher_is_better` decides which round is best."""

    name: str
    higher_is_better: bool
    description: str = ""

    def better(self, a: float, b: float) -> bool:
        """True when metric value `a` is strictly better than `b` (NaN is never better)."""
        if a != a:  # NaN
            return False
        if b != b:
            return True
        return a > b if self.higher_is_better else a < b


@dataclass(frozen=True)
class TaskSpec:
    name: str
    env_id: str
    description: str
    policy_class: str
    inputs: tuple[InputSpec, ...]
    actions: tuple[ActionSpec, ...]
    metric: MetricSpec
    episode_steps: int
    demo_seed: int = 0
    eval_seeds: tuple[int, ...] = tuple(range(1000, 1010))
    selection_seeds: tuple[int, ...] = (100, 101, 102)
    diagnostic_seeds: tuple[int, ...] = (200, 201)
    extra: dict = field(default_factory=dict)
    control_period_s: float = 0.02
    """Simulated seconds per step (replay clocks use it)."""

    def __post_init__(self) -> None:
        used = {self.demo_seed}
        for group in (self.eval_seeds, self.selection_seeds, self.diagnostic_seeds):
            if used & set(group):
                raise ValueError(f"task {self.name}: seed groups overlap: {sorted(used & set(group))}")
            used |= set(group)

    @property
    def action_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.actions)

    @property
    def action_low(self) -> np.ndarray:
        return np.array([a.low for a in self.actions], dtype=np.float32)

    @property
    def action_high(self) -> np.ndarray:
        return np.array([a.high for a in self.actions], dtype=np.float32)

    @property
    def observation_columns(self) -> tuple[str, ...]:
        """Semantic column names of every input coordinate, in input order."""
        return tuple(c for spec in self.inputs for c in spec.columns)

    def input(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)

    def describe(self) -> str:
        """A prompt-ready text: description, forward signature, input columns, actions, metric."""
        lines = [f"Task: {self.name}", self.description.strip(), ""]
        args = ", ".join(s.name for s in self.inputs)
        lines.append(f"Policy class name: {self.policy_class}; forward({args}) with batched tensors:")
        for s in self.inputs:
            lines.append(f"- {s.name}: shape (B, {', '.join(map(str, s.shape))}). {s.description}")
        lines.append("Actions (clipped to bounds after sampling):")
        for i, a in enumerate(self.actions):
            lines.append(f"- [{i}] {a.name} in [{a.low:g}, {a.high:g}]: {a.description}")
        better = "higher" if self.metric.higher_is_better else "lower"
        lines.append(f"Metric: {self.metric.name} ({better} is better). {self.metric.description}")
        lines.append(f"Episodes last {self.episode_steps} steps.")
        return "\n".join(lines)
