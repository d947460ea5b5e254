"""Post-refinement RL with its episodes driven by the learner, one at a time. No ROS import.

Why: `refine_core.learn.rl.train_rl` samples a group by stepping k local environments in
lockstep; on a robot (or the sim node over DDS) an episode is something the round driver
runs, after the operator's confirmation, at the control rate. This module gives `train_rl`
its two seams for that case:

- `DriverSampler`: the k episodes of a group through `RoundDriver.run` with a
  `RecordingRunner`, which draws each action exactly as RL does (`learn.rl.draw`: the
  training generator, the noise scale) and records what the update needs (inputs, raw
  action, its log-probability, the sampling Gaussian); the episode's rewards come from
  `refine/reward`. A robot publishes none: then the episode's measured metric is its one,
  final reward (signed so that higher is better), when the task measures it from its
  observations (`Task.metric_from_observations`; the door does, from the handle and the
  target); otherwise RL cannot run there and says so.
- `DriverScorer`: the selection episodes in the deployed mode, on the live policy.

Every RL episode is an episode of the run's RL round in the logger (kind `rl` for training,
`rl_selection` for selection), with its counter continuing across calls, and on a robot each
one waits for the operator: RL's resets are operator resets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from refine_core.learn.rl import Group, Trajectory, draw, group_from_trajectories
from refine_core.policy.contract import validate_policy
from refine_core.policy.distribution import clip_actions, to_batch
from refine_core.rollout.plan import PlannedEpisode
from refine_core.rollout.runner import _policy_step, episode_generator
from refine_core.rollout.schema import RolloutSchema
from refine_core.tasks.base import Task
from refine_ros.loop.control_path import ActiveEpisode
from refine_ros.loop.round_driver import Progress, RoundDriver, Stop

TRAINING_KIND, SELECTION_KIND = "rl", "rl_selection"
"""Episode kinds of RL's episodes in the run database."""


class RlEpisodeError(RuntimeError):
    """RL cannot go on with the episodes it got (no reward measured, too few episodes ran)."""


class ModuleRunner:
    """The live policy (the module RL trains) at the control rate, as `PolicyRunner` runs a
    bundle: the same step function, the same per-seed action noise."""

    def __init__(self, task: Task, module: nn.Module, mode: str = "mean") -> None:
        self.task, self.module, self.mode = task, module, mode
        self.info_keys = validate_policy(module, task.spec).keys
        self.columns = RolloutSchema.for_task(task.spec, self.info_keys).policy_step()
        self.generator = torch.Generator().manual_seed(0)

    def new_episode(self, seed: int) -> None:
        self.generator = episode_generator(seed)

    def act(self, obs: Any) -> tuple[np.ndarray, list[float]]:
        mean, std, act, info = _policy_step(self.module, self.task, obs, self.generator, self.mode)
        values = [*mean.tolist(), *std.tolist(), *act.tolist()]
        return act, values + [float(info.get(k, math.nan)) for k in self.info_keys]


@dataclass
class RecordingRunner:
    """Actions drawn as RL draws them (`draw`: RL's generator, its noise scale), every step
    recorded for the update."""

    task: Task
    module: nn.Module
    generator: torch.Generator
    std_scale: float = 1.0
    info_keys: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    steps: list[list[tuple]] = field(default_factory=list)
    """Per episode, per step: (inputs, raw action, log-probability, mean, scaled factor)."""

    def __post_init__(self) -> None:
        self.info_keys = validate_policy(self.module, self.task.spec).keys
        self.columns = RolloutSchema.for_task(self.task.spec, self.info_keys).policy_step()

    def new_episode(self, seed: int) -> None:
        self.steps.append([])  # RL's own generator runs on across episodes: the seed only names the scene

    def act(self, obs: Any) -> tuple[np.ndarray, list[float]]:
        spec = self.task.spec
        batch = to_batch(spec, self.task.split_observation(obs), batched=False)
        info: dict = {}
        with torch.no_grad():
            action, logp, mean, tril = draw(self.module, spec, batch, self.generator, self.std_scale, info=info)
        if not (torch.isfinite(mean).all() and torch.isfinite(tril).all()):
            raise ValueError(f"non-finite action_mean {mean.reshape(-1).tolist()} or scale_tril")
        executed = clip_actions(action, spec).numpy()[0]
        self.steps[-1].append((batch, action[0], logp[0], mean[0], tril[0]))
        std = torch.linalg.vector_norm(tril[0], dim=-1)
        values = [*mean[0].tolist(), *std.tolist(), *executed.tolist()]
        values += [float(info[k].reshape(-1)[0]) if k in info else math.nan for k in self.info_keys]
        return executed, values


@dataclass
class EpisodeSource:
    """What RL needs from the learner to drive episodes: its round driver, how an episode is
    handed to the control path, what stops the run, and where feedback goes."""

    task: Task
    driver: RoundDriver
    activate: Callable[[ActiveEpisode | None], None]
    stop: Stop
    run_id: int
    round: int
    progress: Progress | None = None
    """Hears each episode's phase (the RunRollout phases), as the learner's feedback."""
    position: int = 0
    """Episodes driven so far in this RL round: their counters continue from here."""
    training_index: int = 0
    selection_index: int = 0

    def drive(self, plan: list[PlannedEpisode], runner: Any, max_steps: int | None) -> list[tuple[dict, Any]]:
        """Each planned episode through the round driver; (its entry, its ActiveEpisode)."""
        seen: list[ActiveEpisode] = []

        def activate(episode: ActiveEpisode | None) -> None:
            if episode is not None:
                seen.append(episode)
            self.activate(episode)

        request = {"run_id": self.run_id, "round": self.round, "max_steps": int(max_steps or 0),
                   "expert_labels": False, "plan": plan, "first_position": self.position}
        entries, _control = self.driver.run(request, runner, activate, self.stop, progress=self.progress)
        self.position += len(entries)
        by_counter = {ep.counter: ep for ep in seen}
        return [(entry, by_counter.get(entry["counter"])) for entry in entries]


@dataclass
class DriverSampler:
    """`train_rl`'s sampler over the round driver: the group's k episodes one after another,
    all from the scene of `env_seed` (a simulator resets to it; on a robot the operator sets
    the scene up again)."""

    source: EpisodeSource

    def __call__(self, policy: nn.Module, env_seed: int, k: int, generator: torch.Generator, max_steps: int,
                 std_scale: float) -> Group:
        task, source = self.source.task, self.source
        runner = RecordingRunner(task, policy, generator, std_scale)
        plan = [PlannedEpisode(TRAINING_KIND, source.training_index + i, int(env_seed)) for i in range(k)]
        source.training_index += k
        driven = source.drive(plan, runner, max_steps)
        trajectories = []
        for (entry, episode), steps in zip(driven, runner.steps, strict=False):
            if not steps:
                continue  # never started (no confirmation, a failed reset): nothing to learn from
            trajectories.append(trajectory(task, steps, episode, entry))
        if source.stop.is_set():
            return _stopped_group(task)  # train_rl sees the stop and never learns from it
        if len(trajectories) < 2:
            errors = "; ".join(str(e.get("error")) for e, _ in driven if e.get("error")) or "no episode ran"
            raise RlEpisodeError(f"only {len(trajectories)} of {k} RL episodes ran ({errors})")
        return group_from_trajectories(trajectories)


def trajectory(task: Task, steps: list[tuple], episode: ActiveEpisode | None, entry: dict) -> Trajectory:
    """One recorded episode as RL's trajectory, its rewards from `refine/reward` or, on a
    robot that publishes none, its measured metric as the one, final reward."""
    n = len(steps)
    received = list(episode.rewards) if episode is not None else []
    if received:
        rewards = torch.zeros(n)
        rewards[:min(n, len(received))] = torch.tensor(received[:n], dtype=torch.float32)
    else:
        if not task.metric_from_observations:
            raise RlEpisodeError(
                f"RL needs a reward: no refine/reward arrived, and {task.spec.name}'s metric "
                f"({task.spec.metric.name}) is not measured from its observations")
        metric = float(entry["summary"].get("metric", math.nan))
        if not math.isfinite(metric):
            raise RlEpisodeError(f"RL needs a reward: episode {entry['index']}'s {task.spec.metric.name} "
                                 "was not measured")
        rewards = torch.zeros(n)
        rewards[-1] = metric if task.spec.metric.higher_is_better else -metric
    names = steps[0][0].keys()
    return Trajectory(inputs={name: torch.cat([s[0][name] for s in steps]) for name in names},
                      actions=torch.stack([s[1] for s in steps]), logp=torch.stack([s[2] for s in steps]),
                      mean=torch.stack([s[3] for s in steps]), tril=torch.stack([s[4] for s in steps]),
                      rewards=rewards)


def _stopped_group(task: Task) -> Group:
    """What a stopped sampler hands back (two one-step trajectories): `train_rl` checks the stop
    before it learns, so these are never used."""
    spec = task.spec
    a = len(spec.actions)
    one = Trajectory(inputs={s.name: torch.zeros(1, *s.shape) for s in spec.inputs}, actions=torch.zeros(1, a),
                     logp=torch.zeros(1), mean=torch.zeros(1, a), tril=torch.eye(a)[None], rewards=torch.zeros(1))
    return group_from_trajectories([one, one])


@dataclass
class DriverScorer:
    """`train_rl`'s scorer over the round driver: the selection episodes in `mode` on the
    live policy; each episode's metric as the task measures it."""

    source: EpisodeSource

    def __call__(self, policy: nn.Module, seeds: tuple[int, ...], mode: str, max_steps: int | None) -> dict:
        source = self.source
        runner = ModuleRunner(source.task, policy, mode)
        plan = [PlannedEpisode(SELECTION_KIND, source.selection_index + i, int(s)) for i, s in enumerate(seeds)]
        source.selection_index += len(seeds)
        driven = source.drive(plan, runner, max_steps)
        metrics = [float(e["summary"].get("metric", math.nan)) if not e.get("error") else math.nan for e, _ in driven]
        metrics += [math.nan] * (len(seeds) - len(metrics))  # a stop mid-way: the rest never ran
        returns = [float(e["summary"].get("return", math.nan)) for e, _ in driven]
        return {"metric": float(np.nanmean(metrics)) if any(m == m for m in metrics) else math.nan,
                "return": float(np.nanmean(returns)) if returns else math.nan, "per_seed": metrics}
