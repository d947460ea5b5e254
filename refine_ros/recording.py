"""One teleoperated demonstration being recorded, without ROS (the demo recorder node feeds it).

Pairing rule: the action that belongs to an observation is the one the robot was executing
until the next observation arrived, i.e. the newest safe action received before that next
observation (the hardware keeps executing the last command it got; the safety node's watchdog
sends its stop command when the operator goes quiet, so a stop is a received action too).
Observations before the first action of the take are dropped (nothing was commanded yet).
When a simulator reports rewards, only the steps it actually took (a reward arrived for that
step) are kept, with their rewards; on a robot rewards are unknown (NaN).

Nothing is written anywhere while recording: the take lives in memory until the operator
labels it a success, and then the whole demonstration goes into the run database in one
transaction (`save_take`). An e-stop, a sensor dropout longer than `max_gap_s` or a discard
leaves the database untouched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refine_core.rollout.demo import Demonstration, DemonstrationError, recorded_demonstration
from refine_core.store.db import RunDatabase
from refine_core.tasks.base import Task


@dataclass
class Take:
    """Observation/action pairs of one recording, in arrival order."""

    axes: int
    episode: int | None = None
    """The episode counter the take follows (None: any, a robot bridge)."""
    observations: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    """The observation's step counter of each pair (to match a simulator's rewards)."""
    times: list[float] = field(default_factory=list)
    rewards: dict[int, tuple[float, bool, float]] = field(default_factory=dict)
    """step -> (reward, done, success), from a simulator."""
    final_observation: np.ndarray | None = None
    summary: dict[str, float] = field(default_factory=dict)
    """The simulator's episode summary, when its episode ended during the take."""
    _pending: tuple[np.ndarray, int, float] | None = None
    _action: np.ndarray | None = None
    _last_time: float | None = None
    max_gap: float = 0.0
    max_gap_step: int = 0
    actions_received: int = 0

    def on_action(self, values: Sequence[float]) -> None:
        action = np.asarray(values, dtype=float)
        if action.shape == (self.axes,) and np.all(np.isfinite(action)):
            self._action = action
            self.actions_received += 1

    def on_observation(self, values: Sequence[float], step: int, now: float) -> None:
        obs = np.asarray(values, dtype=float)
        if self._last_time is not None and now - self._last_time > self.max_gap:
            self.max_gap, self.max_gap_step = now - self._last_time, len(self.actions)
        self._last_time = now
        if self._pending is not None and self._action is not None:
            pending, pending_step, pending_time = self._pending
            self.observations.append(pending)
            self.actions.append(self._action.copy())
            self.steps.append(pending_step)
            self.times.append(pending_time)
        self._pending = (obs, int(step), now)

    def on_reward(self, step: int, reward: float, done: bool, success: float) -> None:
        self.rewards[int(step)] = (float(reward), bool(done), float(success))

    @property
    def done(self) -> bool:
        """A simulator ended the episode (its done flag) during the take."""
        return any(done for _, done, _ in self.rewards.values())

    def finish(self) -> None:
        """End of the take: the last observation was acted on with the newest action, unless a
        simulator's rewards say which steps happened (then it is the final state)."""
        if self._pending is None:
            return
        pending, pending_step, pending_time = self._pending
        self._pending = None
        if self.rewards:
            if pending_step in self.rewards and self._action is not None:
                self.observations.append(pending)
                self.actions.append(self._action.copy())
                self.steps.append(pending_step)
                self.times.append(pending_time)
            else:
                self.final_observation = pending
        elif self._action is not None:
            self.observations.append(pending)
            self.actions.append(self._action.copy())
            self.steps.append(pending_step)
            self.times.append(pending_time)

    def __len__(self) -> int:
        return len(self.actions)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(observations incl. the final one when known, actions, rewards or None)."""
        keep = list(range(len(self.actions)))
        rewards = None
        if self.rewards:  # a simulator: only the steps it took, with their rewards
            keep = [i for i in keep if self.steps[i] in self.rewards]
            rewards = np.array([self.rewards[self.steps[i]][0] for i in keep], dtype=float)
        obs = [self.observations[i] for i in keep]
        if self.final_observation is not None:
            obs.append(self.final_observation)
        width = len(self.observations[0]) if self.observations else 0
        return (np.array(obs, dtype=float).reshape(len(obs), width),
                np.array([self.actions[i] for i in keep], dtype=float).reshape(len(keep), self.axes), rewards)


def take_problem(take: Take, *, min_steps: int, max_gap_s: float) -> str | None:
    """Why `take` cannot become a demonstration (None when it can)."""
    if take.actions_received == 0:
        return ("no action reached the robot during the take (in a dry run the safety node sends none: "
                "record with --live / dry_run:=false)")
    if len(take) < min_steps:
        return f"the take has {len(take)} steps, fewer than min_steps={min_steps}"
    if take.max_gap > max_gap_s:
        return (f"the observations paused for {take.max_gap:.2f} s around step {take.max_gap_step} (a sensor "
                f"dropped out; the robot was stopped): record the take again")
    return None


def build_demonstration(task: Task, take: Take, *, source: str, columns: Sequence[str], seed: int,
                        label: str | None, success: bool) -> Demonstration:
    """The take as the run's demonstration (DemonstrationError if it cannot be one)."""
    obs, actions, rewards = take.arrays()
    summary: dict[str, Any] = dict(take.summary)
    if "success" not in summary or not math.isfinite(float(summary["success"])):
        summary["success"] = 1.0 if success else 0.0  # no simulator said: the operator's label
    return recorded_demonstration(task, obs, actions, source=source, columns=columns, rewards=rewards, seed=seed,
                                  summary=summary, label=label)


def save_take(db: RunDatabase, demo: Demonstration) -> tuple[int, bool]:
    """Store `demo` as the run's demonstration in one transaction: the run (created when the
    directory has none), the demonstration row, its step table and an event. Returns (run id,
    whether an earlier demonstration was replaced). Refuses a directory whose run is of another
    task or already has rounds fitted on its demonstration."""
    with db.transaction():
        run = db.latest_run()
        if run is not None and run["task"] != demo.task:
            raise DemonstrationError(f"{db.path} holds a {run['task']} run, not {demo.task}: use another run directory")
        if run is not None and db.rounds(int(run["id"])):
            raise DemonstrationError(f"run {run['id']} in {db.path} already has rounds fitted on its demonstration; "
                                     "record into a new run directory")
        run_id = int(run["id"]) if run is not None else db.create_run(
            demo.task, config={"demonstration": demo.source}, status="recorded")
        replaced = db.load_demonstration(run_id) is not None
        demo.save(db, run_id)
        db.log_event(run_id, None, "demonstration", f"{demo.source} demonstration, {demo.steps} steps",
                     {"source": demo.source, "label": demo.label, "steps": demo.steps, "replaced": replaced,
                      **{k: v for k, v in demo.summary.items() if isinstance(v, (int, float))}})
    return run_id, replaced
