"""The seams between the method and the machine it runs on: how a program is fitted, how a
fitted policy's episodes are run, and where post-refinement RL samples its episodes.
`loop.refine` only talks to these interfaces.

Why seams: the method is the same whether everything happens in one process or across a ROS
graph; what differs is *where* a program is fitted (here in the sandbox, or in the learner
node) and *who* steps the simulator or the robot (here, or the sim / hardware nodes over DDS,
with the rollout logger writing the steps). The local implementations below are the
defaults; `refine_ros.loop.graph` implements the same interfaces over DDS (RL there runs as the
learner's `learner/run_rl` goal, on the sim node or the robot).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import pandas as pd

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import InfoSchema, validate_policy
from refine_core.policy.errors import ContractError
from refine_core.policy.static_check import check_program_source
from refine_core.rollout.demo import Demonstration
from refine_core.rollout.metrics import summarise
from refine_core.rollout.plan import PlannedEpisode
from refine_core.rollout.runner import run_episodes
from refine_core.rollout.schema import EPISODE_KINDS
from refine_core.sandbox import fit_in_sandbox
from refine_core.sandbox.fit import FIT_VALIDATION_S
from refine_core.store.records import EpisodeRecord
from refine_core.tasks.base import Task


# ----------------------------------------------------------------------------- fitting
@dataclass
class FitOutcome:
    """A fitted program (bundle + info schema), or the error that stopped it."""

    program: str
    bundle: PolicyBundle | None = None
    report: dict | None = None
    info_schema: InfoSchema | None = None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.bundle is None


class Fitter(Protocol):
    def fit(self, program: str, demo: Demonstration) -> FitOutcome:
        """Build `program`, check it against the contract and fit it to `demo`. Never raises
        for a bad program: the outcome carries the error the analyst will be shown."""
        ...


def check_demonstration(task: Task, demo: Demonstration, source: str | None = None) -> str | None:
    """Why `demo` cannot train a program for `task` (None when it can): a demonstration
    recorded for another task, or with other observation columns (or the same ones in another
    order: programs read their inputs by position), would fit nonsense. With `source`, a
    demonstration from anyone else (a robot must never be fitted to the simulated expert, nor
    to another robot) is refused too."""
    spec = task.spec
    if demo.task != spec.name:
        return f"the demonstration was recorded for task {demo.task!r}, not {spec.name!r}"
    if source is not None and demo.source != source:
        return f"the run's demonstration comes from {demo.source}, and this profile fits only one from {source}"
    want = tuple(spec.observation_columns)
    if demo.columns is not None and tuple(demo.columns) != want:
        extra = sorted(set(demo.columns) - set(want))[:3]
        missing = sorted(set(want) - set(demo.columns))[:3]
        detail = (f"missing {missing}, unknown {extra}" if extra or missing
                  else "the same names in another order")
        return f"the demonstration's observation columns do not match task {spec.name!r}: {detail}"
    for inp in spec.inputs:
        array = demo.inputs.get(inp.name)
        if array is None:
            return f"the demonstration has no input {inp.name!r}"
        if tuple(array.shape[1:]) != tuple(inp.shape):
            return (f"the demonstration's {inp.name!r} has shape {tuple(array.shape[1:])}, the task "
                    f"needs {tuple(inp.shape)}")
    if demo.actions.ndim != 2 or demo.actions.shape[1] != len(spec.actions):
        return f"the demonstration's actions have shape {demo.actions.shape}, the task has {len(spec.actions)}"
    if demo.table is not None:
        missing = [c for c in spec.observation_columns if c not in demo.table.columns]
        if missing:
            return f"the demonstration lacks observation columns {missing[:5]}"
    return None


@dataclass
class LocalFitter:
    """Static check here, build + validate + fit in the sandbox, then rebuild the fitted policy
    here from source + plain arrays (the program passed the static check first)."""

    task: Task
    il: dict = field(default_factory=dict)
    timeout_s: float = 600.0
    allow_weak_isolation: bool = False
    validation_s: float = FIT_VALIDATION_S
    """CPU-time budget of the fit's validation phase (build, contract check, first epochs)."""
    source: str | None = None
    """Fit only a demonstration from this source (a robot: `teleop (<robot>)`); None: any."""

    def fit(self, program: str, demo: Demonstration, *, on_epoch: Callable[[int, int], None] | None = None,
            cancel: threading.Event | None = None) -> FitOutcome:
        """`on_epoch` and `cancel` go to the sandboxed fit (`fit_in_sandbox`): the learner node
        reports epochs as action feedback and stops a fit whose goal was cancelled."""
        outcome = FitOutcome(program=program)
        if not program:
            outcome.error = "empty program"
            return outcome
        outcome.error = check_demonstration(self.task, demo, self.source)
        if outcome.error:
            return outcome
        try:
            check_program_source(program)
        except ContractError as exc:
            outcome.error = str(exc)
            return outcome
        fit = fit_in_sandbox(program, self.task.spec.name, demo.inputs, demo.actions, self.il,
                             timeout_s=self.timeout_s, validation_s=self.validation_s,
                             allow_weak_isolation=self.allow_weak_isolation, on_epoch=on_epoch, cancel=cancel)
        if fit.status != "ok" or fit.weights is None:
            outcome.error = fit.error or f"sandboxed fit ended with status {fit.status}"
            return outcome
        bundle = PolicyBundle(program, fit.weights)
        try:
            outcome.info_schema = validate_policy(bundle.build(self.task.spec), self.task.spec)
        except ContractError as exc:
            outcome.error = str(exc)
            return outcome
        outcome.bundle, outcome.report = bundle, fit.report
        return outcome


# ----------------------------------------------------------------------------- episodes
@dataclass
class Rollouts:
    """What a round's episodes produced."""

    diagnostic: pd.DataFrame
    """The diagnostic episodes' step table: what the analyst's code reads as `df`."""
    episodes: list[EpisodeRecord]
    metrics: dict[str, dict]
    """Per kind (diagnostic, selection, eval): `rollout.metrics.summarise` of its episodes."""
    errors: list[str]


class EpisodeRunner(Protocol):
    def run(self, bundle: PolicyBundle, plan: Sequence[PlannedEpisode], *, run_id: int, round: int) -> Rollouts:
        """Run every planned episode with the fitted policy and report what happened. A
        program that fails mid-episode ends that episode with an error, never the round."""
        ...


def group_metrics(episodes: Sequence[EpisodeRecord]) -> dict[str, dict]:
    """`summarise` per episode kind, in plan order."""
    return {kind: summarise([ep.summary for ep in episodes if ep.kind == kind])
            for kind in EPISODE_KINDS if any(ep.kind == kind for ep in episodes)}


@dataclass
class LocalEpisodes:
    """Episodes in this process (or a local pool): the simulator is the task's Gymnasium env."""

    task: Task
    mode: str = "mean"
    workers: int = 1
    max_steps: int | None = None
    expert_labels: bool = False
    store_steps: tuple[str, ...] = ("diagnostic",)
    """Kinds whose steps are kept; the others keep only their summary row."""
    progress: bool | None = None

    def run(self, bundle: PolicyBundle, plan: Sequence[PlannedEpisode], *, run_id: int, round: int) -> Rollouts:
        episodes: list[EpisodeRecord] = []
        for kind in EPISODE_KINDS:
            planned = [p for p in plan if p.kind == kind]
            if not planned:
                continue
            results = run_episodes(self.task, bundle, [p.seed for p in planned], mode=self.mode,
                                   workers=self.workers, ids={"run_id": run_id, "round": round, "kind": kind},
                                   max_steps=self.max_steps, label_expert=self.expert_labels,
                                   desc=f"round {round} {kind}", progress=self.progress)
            for p, res in zip(planned, results, strict=True):
                table = res.table if kind in self.store_steps else None
                episodes.append(EpisodeRecord(kind, p.index, p.seed, res.summary, table, res.error))
        tables = [ep.table for ep in episodes if ep.kind == "diagnostic" and ep.table is not None]
        return Rollouts(
            diagnostic=pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(),
            episodes=episodes, metrics=group_metrics(episodes),
            errors=[f"{ep.kind} seed {ep.seed}: {ep.error}" for ep in episodes if ep.error],
        )


# ----------------------------------------------------------------------------- post-refinement RL
@dataclass
class PolishOutcome:
    """RL's result: the weights it kept (`RLConfig.checkpoint`) and its report, or why not."""

    bundle: PolicyBundle | None
    report: dict = field(default_factory=dict)
    """`learn.rl.RLReport.to_dict()`."""
    error: str | None = None


class Polisher(Protocol):
    def polish(self, bundle: PolicyBundle, settings: dict, *, run_id: int, round: int,
               on_update: Callable[[dict], None] | None = None) -> PolishOutcome:
        """RL from the fitted `bundle` with the polisher's preset changed by `settings`
        (`learn.rl.RLConfig` fields, `reset_budget` among them); `on_update`
        hears every update's record as it is made. Never raises for a policy that fails: the
        outcome carries the error."""
        ...


@dataclass
class LocalPolisher:
    """RL in this process: `train_rl`'s lockstep groups of the task's Gymnasium env."""

    task: Task
    preset: str = "ours"
    """The named RL settings `settings` change (`learn.rl.PRESETS`)."""
    progress: bool = False

    def polish(self, bundle: PolicyBundle, settings: dict, *, run_id: int, round: int,
               on_update: Callable[[dict], None] | None = None) -> PolishOutcome:
        from refine_core.learn.rl import RLConfig, train_rl

        policy = bundle.build(self.task.spec)
        config = RLConfig.preset(self.preset, self.task.spec.rl_settings, **settings)
        report = train_rl(self.task, policy, config, progress=self.progress, on_update=on_update)
        return PolishOutcome(PolicyBundle.from_module(bundle.source, policy), report.to_dict())
