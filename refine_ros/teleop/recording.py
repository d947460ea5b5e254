"""One teleoperated demonstration being recorded, without ROS (the demo recorder node feeds it).

Pairing rule: the action that belongs to an observation is the one the robot was executing
until the next observation arrived, i.e. the newest safe action received before that next
observation (the hardware keeps executing the last command it got; the safety node's watchdog
sends its stop command when the operator goes quiet, so a stop is a received action too).
Observations before the first action of the take are dropped (nothing was commanded yet).
When a simulator reports rewards, only the steps it actually took (a reward arrived for that
step) are kept, with their rewards; on a robot rewards are unknown (NaN).

Pauses: the teleop nodes publish nothing while the dead-man button is released (or no key is
held), and the safety node's watchdog then commands its stop. Such a stretch is the operator
pausing, not a stop worth imitating: a step whose newest operator command
(`refine/teleop_action`) is older than `pause_after` seconds is left out of the take, and so
are the steps between that last command and the moment the silence became a pause, and any
step whose executed command was one of the safety node's stops (its label says so: the
dead-man, stale input, the watchdog), which is the safety node's action, not the operator's
(`paused_steps` counts them all).

Gaps: an observation that arrives more than `GAP_FACTOR` times the take's median interval (and
at least `GAP_MIN_S`) after the one before marks a gap: a sensor dropped out briefly. The take
keeps its steps and says where the gaps were (`gaps()`, stored in the demonstration's summary
as `gaps`: [[step index, seconds], ...]); only a pause longer than `max_gap_s` refuses it.

Nothing is written anywhere while recording: the take lives in memory until the operator
keeps it, and then the whole take goes into the run database in one transaction
(`save_take`), as the next take number of the run. An e-stop, a sensor dropout longer than
`max_gap_s`, a discard or a re-record leaves the database untouched.
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

GAP_FACTOR = 3.0
"""An observation interval this many times the take's median interval marks a gap..."""
GAP_MIN_S = 0.1
"""...when it is also at least this long (scheduling jitter at high rates is not a gap)."""


def find_gaps(intervals: Sequence[float]) -> list[tuple[int, float]]:
    """(index, seconds) of each interval that is a gap by the rule above."""
    finite = [x for x in intervals if math.isfinite(x)]
    if not finite:
        return []
    limit = max(GAP_FACTOR * float(np.median(finite)), GAP_MIN_S)
    return [(i, float(x)) for i, x in enumerate(intervals) if math.isfinite(x) and x > limit]


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
    intervals: list[tuple[int, float]] = field(default_factory=list)
    """(index the next kept step gets, seconds since the observation before) of every
    observation, kept or paused: a dropout is marked even when the steps around it are not kept."""
    pause_after: float = 0.0
    """Seconds without an operator command after which a step is a pause (0: no pauses)."""
    success: float = math.nan
    """The operator's success label (1 success, 0 failure, NaN unlabelled)."""
    _pending: tuple[np.ndarray, int, float, float | None] | None = None
    _action: np.ndarray | None = None
    _action_stop: bool = False
    _last_time: float | None = None
    _last_teleop: float | None = None
    max_gap: float = 0.0
    max_gap_step: int = 0
    actions_received: int = 0
    paused_steps: int = 0

    def on_action(self, values: Sequence[float], stop: bool = False) -> None:
        """A command the robot executed; `stop`: one of the safety node's stops (its label)."""
        action = np.asarray(values, dtype=float)
        if action.shape == (self.axes,) and np.all(np.isfinite(action)):
            self._action, self._action_stop = action, bool(stop)
            self.actions_received += 1

    def on_teleop(self, now: float) -> None:
        """The operator sent a command (the dead-man button is held, or a key)."""
        self._last_teleop = now

    def paused(self, at: float, last_teleop: float | None) -> bool:
        """A step observed at `at`, the operator's newest command then being `last_teleop`."""
        return self.pause_after > 0 and (last_teleop is None or at - last_teleop > self.pause_after)

    def on_observation(self, values: Sequence[float], step: int, now: float) -> None:
        obs = np.asarray(values, dtype=float)
        if self._pending is not None and self._action is not None:
            self._close_pending()
        if self._last_time is not None:
            self.intervals.append((len(self.actions), now - self._last_time))
            if now - self._last_time > self.max_gap:
                self.max_gap, self.max_gap_step = now - self._last_time, len(self.actions)
        self._last_time = now
        self._pending = (obs, int(step), now, self._last_teleop)

    def _close_pending(self) -> None:
        pending, pending_step, pending_time, last_teleop = self._pending
        if self.pause_after > 0 and self._action_stop:  # the safety node stopped the robot: not the operator's
            self.paused_steps += 1
            return
        if self.paused(pending_time, last_teleop):
            self.paused_steps += 1
            # the silence began at the operator's last command: steps since then are the pause too
            # (the safety node's stale-input and watchdog stops come before `pause_after` is over)
            since = -math.inf if last_teleop is None else last_teleop
            while self.times and self.times[-1] > since:
                for column in (self.observations, self.actions, self.steps, self.times):
                    column.pop()
                self.paused_steps += 1
            return
        self.observations.append(pending)
        self.actions.append(self._action.copy())
        self.steps.append(pending_step)
        self.times.append(pending_time)

    def gaps(self) -> list[tuple[int, float]]:
        """(index of the first kept step after it, seconds) of every brief sensor dropout."""
        found = find_gaps([seconds for _, seconds in self.intervals])
        return [(min(self.intervals[i][0], len(self.actions)), seconds) for i, seconds in found]

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
        pending, pending_step = self._pending[:2]
        if self.rewards:
            if pending_step in self.rewards and self._action is not None:
                self._close_pending()
            else:
                self.final_observation = pending
        elif self._action is not None:
            self._close_pending()
        self._pending = None

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
        paused = f" ({take.paused_steps} paused steps, dead-man released, left out)" if take.paused_steps else ""
        return f"the take has {len(take)} steps{paused}, fewer than min_steps={min_steps}"
    if take.max_gap > max_gap_s:
        return (f"the observations paused for {take.max_gap:.2f} s around step {take.max_gap_step} (a sensor "
                f"dropped out; the robot was stopped): record the take again")
    return None


def build_demonstration(task: Task, take: Take, *, source: str, columns: Sequence[str], seed: int,
                        label: str | None) -> Demonstration:
    """The take as one demonstration take (DemonstrationError if it cannot be one). Its summary
    carries the operator's success label (unless a simulator measured success), the gaps the
    take kept and how many paused steps were left out."""
    obs, actions, rewards = take.arrays()
    summary: dict[str, Any] = dict(take.summary)
    if "success" not in summary or not math.isfinite(float(summary["success"])):
        summary["success"] = take.success  # no simulator said: the operator's label (NaN: none given)
    gaps = take.gaps() if rewards is None else []  # a simulator's steps are matched by step counter instead
    summary.update(gaps=[[i, round(s, 4)] for i, s in gaps], gap_count=len(gaps),
                   max_gap_s=round(max((s for _, s in gaps), default=0.0), 4), paused_steps=take.paused_steps)
    return recorded_demonstration(task, obs, actions, source=source, columns=columns, rewards=rewards, seed=seed,
                                  summary=summary, label=label)


def save_take(db: RunDatabase, demo: Demonstration) -> tuple[int, int]:
    """Store `demo` as the run's next take in one transaction: the run (created when the
    directory has none), the demonstration row, its step table and an event. Returns (run id,
    take number). Refuses a directory whose run is of another task or already has rounds
    fitted on its demonstration."""
    with db.transaction():
        run = db.latest_run()
        if run is not None and run["task"] != demo.task:
            raise DemonstrationError(f"{db.path} holds a {run['task']} run, not {demo.task}: use another run directory")
        if run is not None and db.rounds(int(run["id"])):
            raise DemonstrationError(f"run {run['id']} in {db.path} already has rounds fitted on its demonstration; "
                                     "record into a new run directory")
        run_id = int(run["id"]) if run is not None else db.create_run(
            demo.task, config={"demonstration": demo.source}, status="recorded")
        takes = db.demonstration_takes(run_id)
        take = takes[-1] + 1 if takes else 0
        demo.save(db, run_id, take=take)
        db.log_event(run_id, None, "demonstration", f"{demo.source} take {take}, {demo.steps} steps",
                     {"source": demo.source, "label": demo.label, "steps": demo.steps, "take": take,
                      "gaps": demo.summary.get("gaps", []),
                      **{k: v for k, v in demo.summary.items() if isinstance(v, (int, float))}})
    return run_id, take
