"""Task specifications: the facts a program author (LLM, offline analyst or human) needs.

A spec is plain data so it can be printed into a prompt, stored in the run database and
shared with the ROS nodes without importing a simulator.

A task may be described in more than one way (`DESCRIPTION_VARIANTS`): "published" carries
the information the published prompts gave the model and nothing more (no simulator, robot or
library name: a robot owner could not tell the model one), "detailed" the richer, true facts
we know about our environments, and "legacy_published" the first wording of the published
variant, which named the simulators; it is kept only so that runs recorded with it replay with
the words they were sent (`LEGACY_VARIANT`). "robot_owner" is what the owner of a robot
running the task writes about its own observation (`ROBOT_OWNER_VARIANT`): where each input comes
from on the robot (TF and a fiducial tag, a camera's road detector, odometry), its units and
frames, the target the owner set, the commands in the robot's units and how long a live
episode lasts, and nothing only a simulator knows; the real profiles choose it. The variant decides every word the analyst reads
about the task (the description, the input, action and metric lines, and the names of
observation columns it sees), never what is stored: the run database, demonstrations, the ROS topics and the MCAP
export always use the task's own column names, so one demonstration serves every variant and
a robot's bridge never depends on how a prompt was worded. `TaskSpec.for_analyst` is the spec
with the analyst's column names; `rollout.schema.analyst_renames` maps a stored table onto it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod

import numpy as np

DESCRIPTION_VARIANTS: tuple[str, ...] = ("published", "detailed", "legacy_published", "robot_owner")
"""Every description variant a task may offer; each task lists the ones it has, default first."""
LEGACY_VARIANT = "legacy_published"
ROBOT_OWNER_VARIANT = "robot_owner"
"""The description a robot's owner gives of the task on that robot (the real profiles'
choice)."""
"""The published variant as worded before the simulator names were taken out (runs recorded
before then were sent it; their transcripts say "published")."""
ACTION_MODES: tuple[str, ...] = ("mean", "sample")
"""How a policy's action is executed: its Gaussian's mean, or a seeded draw from it."""


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
    eval_mode: str = "mean"
    """The action mode the published results were verified in for this task (the primary
    evaluation: 'mean' or 'sample', a draw seeded by the episode's own seed); runs use it
    unless told otherwise, and tables put it first."""
    extra: dict = field(default_factory=dict)
    control_period_s: float = 0.02
    """Simulated seconds per step (replay clocks use it)."""
    deployed_mode: str = "mean"
    """The action mode the policy runs in when it is deployed: the mean action on a robot
    (nobody ships a policy that adds noise to its commands). Post-refinement RL selects and
    accepts its checkpoints in this mode, so RL improves what the robot runs; an evaluation
    mode chosen to match published figures may differ."""
    rl_settings: dict = field(default_factory=dict)
    """This task's measured changes to RL's default preset ("ours"; `RLConfig` field names):
    e.g. a scripted demonstration leaves IL a noise too small to explore with, so the task
    explores wider and steps further (docs/RL.md says how each was chosen). Empty: the preset."""
    description_variant: str = "detailed"
    """Which description the texts of this spec are (`DESCRIPTION_VARIANTS`); runs and result
    tables name it."""
    analyst_columns: tuple[tuple[str, str], ...] = ()
    """(stored column, the name the analyst sees) for each observation column this variant
    names differently; e.g. the door's features 4-6 are "the door's" coordinates under the
    published description, so the analyst must not read `handle_x` there."""
    action_ranges_shown: bool = True
    """Whether the action lines give each action's range (the published door prompt gave
    none)."""

    def __post_init__(self) -> None:
        if self.deployed_mode not in ACTION_MODES:
            raise ValueError(f"task {self.name}: deployed mode {self.deployed_mode!r} is not one of {ACTION_MODES}")
        if self.description_variant not in DESCRIPTION_VARIANTS:
            raise ValueError(f"task {self.name}: description variant {self.description_variant!r} is not one of "
                             f"{DESCRIPTION_VARIANTS}")
        stored = set(self.observation_columns)
        unknown = [c for c, _ in self.analyst_columns if c not in stored]
        if unknown:
            raise ValueError(f"task {self.name}: analyst names for unknown columns {unknown}")
        if self.eval_mode not in ACTION_MODES:
            raise ValueError(f"task {self.name}: eval_mode {self.eval_mode!r} is not one of {ACTION_MODES}")
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

    def for_analyst(self) -> TaskSpec:
        """This spec as the analyst reads it: observation columns under their analyst names.
        Everything an analyst is given (prompts, column lists, the tables its code reads) is
        built from this spec; storage keeps using `self`."""
        if not self.analyst_columns:
            return self
        names = dict(self.analyst_columns)
        inputs = tuple(replace(s, columns=tuple(names.get(c, c) for c in s.columns)) for s in self.inputs)
        return replace(self, inputs=inputs, analyst_columns=())

    def describe(self) -> str:
        """A prompt-ready text: description, forward signature, inputs, actions, metric. All of
        it is the variant's own wording (the metric's storage name is not shown: under the
        published door description it would name the handle). Action ranges appear only when
        the variant gives them, the metric line only when it has words of its own."""
        lines = [f"Task: {self.name}", self.description.strip(), ""]
        args = ", ".join(s.name for s in self.inputs)
        lines.append(f"Policy class name: {self.policy_class}; forward({args}) with batched tensors:")
        for s in self.inputs:
            lines.append(f"- {s.name}: shape (B, {', '.join(map(str, s.shape))}). {s.description}")
        lines.append("Actions (clipped to bounds after sampling):")
        for i, a in enumerate(self.actions):
            bounds = f" in [{a.low:g}, {a.high:g}]" if self.action_ranges_shown else ""
            lines.append(f"- [{i}] {a.name}{bounds}: {a.description}")
        if self.metric.description:
            better = "higher" if self.metric.higher_is_better else "lower"
            lines.append(f"Metric ({better} is better): {self.metric.description}")
        return "\n".join(lines)
