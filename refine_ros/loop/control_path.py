"""The learner's control path: observation in, one forward pass, action out. No ROS import.

Why separate: this is the only code that runs at the control rate, so it must stay small and
never wait on anything (no fitting, no database, no service call). The learner node calls
`ActiveEpisode.on_observation` / `on_reward` from its subscriptions and publishes what comes
back; the round driver only starts episodes and waits for them to finish.

A step over DDS computes exactly what a step in `refine run` computes: `PolicyRunner` uses the
rollout runner's own step function (batching, sampling, clipping, checks).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from refine_core.policy.bundle import PolicyBundle
from refine_core.rollout.metrics import episode_summary
from refine_core.rollout.plan import PlannedEpisode
from refine_core.rollout.runner import _policy_step, episode_generator
from refine_core.rollout.schema import RolloutSchema
from refine_core.tasks.base import Task


class PolicyRunner:
    """A fitted policy at the control rate: one forward pass per observation."""

    def __init__(self, task: Task, bundle: PolicyBundle, info_keys: Sequence[str], mode: str = "mean") -> None:
        self.task, self.mode = task, mode
        self.info_keys = tuple(info_keys)
        self.columns = RolloutSchema.for_task(task.spec, self.info_keys).policy_step()
        self.module: nn.Module = bundle.build(task.spec)
        self.module.eval()
        self.generator = torch.Generator().manual_seed(0)
        torch.set_num_threads(1)  # one small forward pass: more threads only add wake-up latency

    def new_episode(self, seed: int) -> None:
        """The same action noise a local rollout of this seed draws."""
        self.generator = episode_generator(seed)

    def act(self, obs: Any) -> tuple[np.ndarray, list[float]]:
        """-> (executed action, policy-step values in `self.columns` order). Raises whatever
        the program raises; the caller turns it into an episode error."""
        mean, std, act, info = _policy_step(self.module, self.task, obs, self.generator, self.mode)
        values = [*mean.tolist(), *std.tolist(), *act.tolist()]
        values += [float(info.get(k, math.nan)) for k in self.info_keys]
        return act, values


@dataclass
class ActiveEpisode:
    """The episode being driven. The control callbacks write it; the round driver waits on
    `ended`, then reads it."""

    planned: PlannedEpisode
    counter: int
    """The episode counter carried by the counted vectors on every control topic."""
    limit: int
    """Steps in the episode (the task's length or the request's cap)."""
    runner: PolicyRunner
    step_budget_ends: bool = False
    """True on a robot: no simulator says 'done', the step budget ends the episode."""
    observations: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)
    actions: int = 0
    last_step: int = -1
    last_seen: float | None = None
    """time.monotonic() of the last observation taken (None: none yet)."""
    error: str | None = None
    control_ms: list[float] = field(default_factory=list)
    """Observation in -> action out, per step."""
    ended: threading.Event = field(default_factory=threading.Event)
    """The last reward (or the step budget, or an error) arrived: no more actions."""
    closed: threading.Event = field(default_factory=threading.Event)
    """The terminal observation arrived too (wanted for the episode summary)."""

    def on_observation(self, counter: int, step: int, obs: Any) -> tuple[np.ndarray, list[float]] | None:
        """The action and policy-step values to publish for this observation, or None (another
        episode's message, a stale or repeated step, the terminal observation, a failure)."""
        started = time.perf_counter()
        if counter != self.counter or step <= self.last_step or self.closed.is_set():
            return None
        self.last_step = step
        self.last_seen = time.monotonic()
        self.observations.append(obs)
        if self.ended.is_set() or step >= self.limit:
            self.closed.set()  # the terminal observation: nothing to act on
            return None
        try:
            act, values = self.runner.act(obs)
        except Exception as exc:  # noqa: BLE001 - an untrusted program failing is a result, not a crash
            self.fail(f"step {step}: {type(exc).__name__}: {exc}")
            return None
        self.actions += 1
        if self.step_budget_ends and step >= self.limit - 1:
            self.ended.set()
            self.closed.set()
        self.control_ms.append((time.perf_counter() - started) * 1000.0)
        return act, values

    def on_reward(self, counter: int, step: int, values: Sequence[float]) -> None:
        """`[reward, done, success]` for the step just taken."""
        if counter != self.counter or not values or self.ended.is_set():
            return
        self.rewards.append(float(values[0]))
        self.infos.append({"success": float(values[2]) if len(values) > 2 else 0.0})
        done = len(values) > 1 and values[1] > 0.5
        if done or step >= self.limit - 1:
            self.ended.set()
            if self.last_step > step:
                self.closed.set()

    def fail(self, error: str) -> None:
        self.error = self.error or error
        self.ended.set()
        self.closed.set()

    @property
    def steps(self) -> int:
        return len(self.rewards) if self.rewards else self.actions

    def summary(self, task: Task) -> dict[str, Any]:
        summary = episode_summary(task, self.observations, self.rewards, self.infos)
        summary.update(seed=self.planned.seed, steps=self.steps, complete=self.error is None, error=self.error)
        return summary
