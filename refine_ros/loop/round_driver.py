"""The learner's round driver: runs a rollout request's episodes one after another. No ROS import.

Why separate from the control path: starting an episode waits (for the operator's
confirmation on a robot, for the sim's reset service), and waiting must never happen where
observations are answered. The driver runs on its own thread, hands each episode to the
control path through `activate`, and blocks on the episode's `ended` event; the node supplies
the few ROS operations it needs through the `Robot` interface.

Per episode: confirmation (robots) -> seed / counter / step cap / expert relabels to the sim ->
start event ->
reset -> wait for the end -> end event with the summary. The start event precedes the reset
because the sim publishes step 0 before it answers, and a hardware bridge starts counting at
that event.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from refine_core.rollout.plan import PlannedEpisode
from refine_core.tasks.base import Task
from refine_ros.loop.control_path import ActiveEpisode, PolicyRunner
from refine_ros.wire.protocol import episode_counter

NOTE_EVERY_S = 30.0


class Stop(Protocol):
    def is_set(self) -> bool: ...


Progress = Callable[[str, int, PlannedEpisode], None]
"""progress(phase, episodes_done, planned): phase is one of `protocol.PHASES`."""


class Robot(Protocol):
    """The operations that start an episode; each returns None or the reason it failed."""

    def await_confirmation(self, planned: PlannedEpisode, round_: int) -> str | None: ...

    def prepare(self, planned: PlannedEpisode, counter: int, limit: int, expert_labels: bool) -> str | None: ...

    def start(self) -> str | None: ...

    def announce(self, event: dict[str, Any]) -> None: ...

    def why_silent(self) -> str | None:
        """What the robot's side says keeps the observations back (a bridge's stale input), if
        anything: an episode that fails for want of observations names it."""
        ...


@dataclass
class RoundDriver:
    task: Task
    robot: Robot
    episode_timeout_s: float = 300.0
    step_budget_ends: bool = False
    """A robot: no simulator says 'done'; an episode ends after its step budget."""
    observation_timeout_s: float = 0.0
    """An episode whose observations stop for this long (from its start, or its last one) ends
    as failed; 0: only `episode_timeout_s` ends it. On a robot the observations stop when a
    sensor goes silent (a car whose camera lost the road): the safety node has stopped the robot,
    and the operator should not wait out the episode timeout."""
    episode_steps: int = 0
    """A robot's live episode length in steps, as its owner sets it (its profile); 0: the
    task's own length, which is the simulator's (a door in 500 steps of 12.5 ms, where the
    arm's 50 Hz and its speed limit need longer)."""
    log: Callable[[str], None] | None = None
    """Hears, every NOTE_EVERY_S of an episode, where it stands (a run that hangs says where)."""

    def run(self, request: dict, runner: PolicyRunner, activate: Callable[[ActiveEpisode | None], None],
            closing: Stop, progress: Progress | None = None) -> tuple[list[dict], dict]:
        """Drive every planned episode of a rollout request (`protocol.read_rollout_goal`) until
        `closing` is set; returns the entries of the episodes driven and the control-path latency
        figures. `progress(phase, episodes_done, planned)` hears each phase change (the action's
        feedback)."""
        progress = progress or (lambda phase, done, planned: None)
        spec = self.task.spec
        length = self.episode_steps or spec.episode_steps
        limit = min(request["max_steps"], length) if request["max_steps"] > 0 else length
        entries, latencies = [], []
        for position, planned in enumerate(request["plan"]):
            if closing.is_set():
                break
            first = int(request.get("first_position", 0))  # RL drives one round's episodes in many calls
            episode = ActiveEpisode(planned, episode_counter(request["round"], first + position), limit, runner,
                                    step_budget_ends=self.step_budget_ends)
            progress("preparing", position, planned)
            self._drive(episode, request, runner, activate, lambda n=position, p=planned: progress("running", n, p))
            latencies += episode.control_ms
            entries.append({"kind": planned.kind, "index": planned.index, "seed": planned.seed,
                            "counter": episode.counter, "steps": episode.steps,
                            "summary": episode.summary(self.task), "error": episode.error})
        return entries, _latency(latencies)

    def _drive(self, episode: ActiveEpisode, request: dict, runner: PolicyRunner,
               activate: Callable[[ActiveEpisode | None], None], running: Callable[[], None]) -> None:
        planned, context = episode.planned, {"round": request["round"], "run_id": request["run_id"]}
        event = {"episode": episode.counter, "kind": planned.kind, "seed": planned.seed, "index": planned.index,
                 **context}
        error = self.robot.await_confirmation(planned, request["round"])
        if error is None:
            error = self.robot.prepare(planned, episode.counter, episode.limit, request["expert_labels"])
        if error is not None:  # never started: still announced and closed, so the database has its row
            episode.fail(error)
            self.robot.announce({"event": "start", **event})
            self.robot.announce({"event": "end", **event, "summary": episode.summary(self.task), "complete": False})
            return
        runner.new_episode(planned.seed)
        activate(episode)
        running()
        self.robot.announce({"event": "start", **event})
        error = self.robot.start()
        if error is None:
            error = self._wait_for_end(episode)
        if error is None:
            episode.closed.wait(1.0)  # the terminal observation, for the summary
        if error:
            episode.fail(error)
        activate(None)
        self.robot.announce({"event": "end", **event, "summary": episode.summary(self.task),
                             "complete": episode.error is None})

    def _wait_for_end(self, episode: ActiveEpisode) -> str | None:
        """None once the episode has ended; else why it never will."""
        started = time.monotonic()
        deadline, note = started + self.episode_timeout_s, started + NOTE_EVERY_S
        while not episode.ended.wait(min(0.25, max(0.0, deadline - time.monotonic()))):
            now = time.monotonic()
            if self.log is not None and now >= note:
                note = now + NOTE_EVERY_S
                self.log(f"episode {episode.counter}: {episode.last_step + 1} of {episode.limit} steps after "
                         f"{now - started:.0f} s (it fails after {self.episode_timeout_s:g} s)")
            if now >= deadline:
                return f"no end of episode within {self.episode_timeout_s:g} s ({episode.last_step + 1} steps seen)"
            silent = now - (episode.last_seen if episode.last_seen is not None else started)
            if self.observation_timeout_s > 0 and silent > self.observation_timeout_s:
                where = f"after step {episode.last_step}" if episode.last_seen is not None else "since the start"
                why = self.robot.why_silent()
                cause = f"the bridge says: {why}" if why else "a sensor or the robot's bridge went silent"
                return (f"no observation for {silent:.1f} s {where}: {cause} "
                        f"(observation_timeout {self.observation_timeout_s:g} s)")
        return None


def _latency(values: list[float]) -> dict:
    if not values:
        return {}
    ms = np.asarray(values)
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "max": float(ms.max()),
            "steps": int(ms.size)}
