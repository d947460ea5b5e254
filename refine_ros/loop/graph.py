"""`refine_core.loop.refine`'s two seams implemented over DDS: the learner node fits programs
and drives episodes, the rollout logger writes every step into the run database.

Why this shape: the analysis node runs the very same `refine()` as `refine run`; only *where*
a program is fitted and *who* steps the simulator or the robot differ, and those are exactly
the two interfaces `refine_core.backends` defines. So there is one implementation of the
method, and a run through the graph leaves the rows a local run leaves.

Waiting: `refine()` runs on the analysis node's worker thread and blocks in `fit` / `run`
until the learner's action result arrives (an event, no polling; a learner that starts late is
waited for). The wait has no fixed deadline (a robot episode waits for an operator), but it
ends with a `GraphError` when the learner disappears from the graph or the node shuts down
(the goal is cancelled then). A fit cancelled by a person (`ros2 action`, see
docs/ROS_INTERFACES.md) is a failed fit the analyst is told about; a cancelled rollout ends
the run with that reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_srvs.srv import Trigger

from refine_core.backends import FitOutcome, Rollouts, group_metrics
from refine_core.policy.bundle import PolicyBundle
from refine_core.rollout.demo import Demonstration
from refine_core.rollout.plan import PlannedEpisode
from refine_core.store.db import RunDatabase
from refine_core.store.records import EpisodeRecord
from refine_ros.wire import protocol
from refine_ros_interfaces.action import FitProgram, RunRollout

GONE_AFTER_S = 30.0
"""How long the learner may be absent from the graph before a wait gives up."""
SETTLE_S = 2.0
"""Wait this long after the learner's action server first appears before the first goal: this
side sees the server before the server has matched this side's request writer, and a goal sent
in between is lost without an answer (DDS drops a sample no reader is matched for yet)."""


class GraphError(RuntimeError):
    """The node graph cannot do what the loop asked (the learner is gone, shutdown); the run
    ends with this as its recorded reason."""


class LearnerLink:
    """The analysis node's end of the two actions: send a goal, wait for its result."""

    def __init__(self, node: Node, closing: threading.Event) -> None:
        self.node = node
        self.closing = closing
        group = ReentrantCallbackGroup()
        self.fit_client = ActionClient(node, FitProgram, protocol.FIT_ACTION, callback_group=group)
        self.rollout_client = ActionClient(node, RunRollout, protocol.ROLLOUT_ACTION, callback_group=group)
        self.flush_client = node.create_client(Trigger, "logger/flush", callback_group=group)
        self._settled: set[int] = set()  # ids of the clients whose server has had SETTLE_S

    def ask(self, client: ActionClient, goal: Any, what: str, feedback: Callable[[Any], None] | None = None
            ) -> tuple[int, Any]:
        """Send `goal` and block until its result: (GoalStatus status, result message)."""
        self._wait(None, client, what)
        if id(client) not in self._settled:
            if self.closing.wait(SETTLE_S):
                raise GraphError(f"shutting down while waiting for the learner to {what}")
            self._settled.add(id(client))
        sent = client.send_goal_async(goal, feedback_callback=feedback and (lambda msg: feedback(msg.feedback)))
        self._wait(sent, client, what)
        handle = sent.result()
        if handle is None or not handle.accepted:
            raise GraphError(f"the learner refused the goal to {what}")
        result = handle.get_result_async()
        try:
            self._wait(result, client, what)
        except GraphError:
            handle.cancel_goal_async()  # the learner stops what nobody will read
            raise
        answer = result.result()
        return int(answer.status), answer.result

    def _wait(self, future: Any, client: ActionClient, what: str) -> None:
        """Until `future` is done (None: until the learner's action server is up), the node
        shuts down, or the learner has been gone for GONE_AFTER_S."""
        arrived = threading.Event()
        if future is not None:
            future.add_done_callback(lambda _f: arrived.set())
        absent_since, last_note = None, time.monotonic()
        while not (future.done() if future is not None else client.server_is_ready()):
            if self.closing.is_set():
                raise GraphError(f"shutting down while waiting for the learner to {what}")
            if future is None:
                client.wait_for_server(timeout_sec=1.0)
            else:
                arrived.wait(1.0)
            now = time.monotonic()
            if client.server_is_ready():
                absent_since = None
            else:
                absent_since = absent_since or now
                if now - absent_since > GONE_AFTER_S:
                    raise GraphError(f"no learner on the graph for {GONE_AFTER_S:g} s while waiting for it "
                                     f"to {what} (is learner_node running?)")
            if now - last_note > 60.0:
                last_note = now
                self.node.get_logger().info(f"still waiting for the learner to {what}")

    def flush_logger(self, timeout_s: float) -> str | None:
        """Ask the rollout logger to commit everything it has; None when it confirmed."""
        if not self.flush_client.wait_for_service(timeout_sec=min(5.0, timeout_s)):
            return "no logger/flush service"
        done = threading.Event()
        future = self.flush_client.call_async(Trigger.Request())
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(timeout_s + 1.0) or future.result() is None:
            return f"the logger did not confirm a flush within {timeout_s:g} s"
        result = future.result()
        return None if result.success else result.message


@dataclass
class GraphFitter:
    """Fits a program in the learner node (which holds the sandbox and the demonstration)."""

    link: LearnerLink
    run_id: Callable[[], int]
    log: Callable[[str], None] = print
    note_every_s: float = 15.0

    def fit(self, program: str, demo: Demonstration) -> FitOutcome:
        last = [time.monotonic()]

        def feedback(msg: Any) -> None:
            if time.monotonic() - last[0] >= self.note_every_s:
                last[0] = time.monotonic()
                self.log(f"fitting: epoch {msg.epoch} of at most {msg.max_epochs}, {msg.elapsed:.0f} s")

        status, result = self.link.ask(self.link.fit_client, protocol.fit_goal(self.run_id(), program),
                                       "fit a program", feedback)
        if status == GoalStatus.STATUS_CANCELED:
            return FitOutcome(program=program, error=f"the fit was cancelled on the learner ({result.error})")
        bundle, report, info, error = protocol.read_fit_result(result)
        if error is not None or status != GoalStatus.STATUS_SUCCEEDED:
            return FitOutcome(program=program, error=error or f"the learner's fit ended with status {status}")
        return FitOutcome(program=program, bundle=bundle, report=report, info_schema=info)


@dataclass
class GraphEpisodes:
    """Episodes driven by the learner against the sim node or a robot; the rollout logger
    commits their steps, and the diagnostic table is read back from the run database."""

    link: LearnerLink
    db: RunDatabase
    mode: str = "mean"
    max_steps: int | None = None
    expert_labels: bool = False
    flush_timeout_s: float = 30.0
    log: Callable[[str], None] = print

    def run(self, bundle: PolicyBundle, plan: Sequence[PlannedEpisode], *, run_id: int, round: int) -> Rollouts:
        goal = protocol.rollout_goal(run_id, round, bundle, plan, mode=self.mode, max_steps=self.max_steps,
                                     expert_labels=self.expert_labels)
        status, result = self.link.ask(self.link.rollout_client, goal, f"run round {round}'s episodes")
        if status == GoalStatus.STATUS_CANCELED:
            raise GraphError(f"round {round}'s rollout was cancelled on the learner")
        if status != GoalStatus.STATUS_SUCCEEDED:
            raise GraphError(f"round {round}'s rollout ended with status {status} on the learner (its log says why)")
        answer = protocol.read_rollout_result(result)
        control = answer.get("control_ms") or {}
        if control:
            self.log(f"round {round}: control callback p50 {control.get('p50', 0):.2f} ms, p99 "
                     f"{control.get('p99', 0):.2f} ms over {control.get('steps', 0)} steps")
        episodes, problem = self._committed(run_id, round, answer["episodes"])
        missing = [f"{ep.kind} {ep.index}" for ep in episodes if not ep.stored]
        if missing:
            note = f"the logger has not committed {', '.join(missing)} ({problem or 'flushed'}); their summary rows are kept"
            self.log(f"round {round}: {note}")
            self.db.log_event(run_id, round, "logger_incomplete", note)
        return Rollouts(diagnostic=self.db.load_steps(run_id, round, kind="diagnostic"), episodes=episodes,
                        metrics=group_metrics(episodes),
                        errors=[f"{ep.kind} seed {ep.seed}: {ep.error}" for ep in episodes if ep.error])

    def _committed(self, run_id: int, round: int, answered: list[dict]) -> tuple[list[EpisodeRecord], str | None]:
        """The round's episodes as the database holds them once the logger has committed them.
        The result can overtake the episode's last messages (an action result and a topic are
        separate channels), so a flush that finds no open episode yet is asked again until
        every episode that ran is stored, at most `flush_timeout_s` in all."""
        deadline = time.monotonic() + self.flush_timeout_s
        while True:
            problem = self.link.flush_logger(max(0.1, deadline - time.monotonic()))
            episodes = [self._record(run_id, round, ep) for ep in answered]
            waiting = [ep for ep, sent in zip(episodes, answered, strict=True)
                       if not ep.stored and int(sent.get("steps", 0)) > 0]
            if not waiting or time.monotonic() >= deadline or self.link.closing.is_set():
                return episodes, problem
            time.sleep(0.2)

    def _record(self, run_id: int, round: int, ep: dict[str, Any]) -> EpisodeRecord:
        row = self.db.episode_row(run_id, round, ep["kind"], ep["index"])
        stored = row is not None and row["complete"] is not None and int(row["steps"] or 0) >= int(ep.get("steps", 0))
        summary = {**ep["summary"], "seed": ep["seed"]}
        return EpisodeRecord(ep["kind"], ep["index"], ep["seed"], summary, None, ep.get("error"), stored=stored)
