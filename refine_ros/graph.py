"""`refine_core.loop.refine`'s two seams implemented over DDS: the learner node fits programs
and drives episodes, the rollout logger writes every step into the run database.

Why this shape: the analysis node runs the very same `refine()` as `refine run`; only *where*
a program is fitted and *who* steps the simulator or the robot differ, and those are exactly
the two interfaces `refine_core.backends` defines. So there is one implementation of the
method, and a run through the graph leaves the rows a local run leaves.

Waiting: `refine()` runs on the analysis node's worker thread and blocks in `fit` / `run`
until the learner's answer arrives on a latched topic (an event, no polling). The wait has no
fixed deadline (a robot episode waits for an operator), but it ends with a `GraphError` when
the learner disappears from the graph or the node shuts down.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from refine_core.backends import FitOutcome, Rollouts, group_metrics
from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import InfoSchema
from refine_core.rollout.demo import Demonstration
from refine_core.rollout.plan import PlannedEpisode
from refine_core.store.db import RunDatabase
from refine_core.store.records import EpisodeRecord
from refine_ros import protocol, qos
from refine_ros.messages import pack_json

GONE_AFTER_S = 30.0
"""How long the learner may be absent from the graph before a wait gives up."""


class GraphError(RuntimeError):
    """The node graph cannot do what the loop asked (the learner is gone, shutdown); the run
    ends with this as its recorded reason."""


class LearnerLink:
    """The analysis node's end of the protocol: publish a request, wait for its answer."""

    def __init__(self, node: Node, closing: threading.Event) -> None:
        self.node = node
        self.closing = closing
        group = ReentrantCallbackGroup()
        self._pubs = {topic: node.create_publisher(String, topic, qos.REQUEST)
                      for topic in (protocol.FIT_REQUEST, protocol.ROLLOUT_REQUEST)}
        self._answers: dict[tuple[str, int], dict] = {}
        self._arrived = threading.Condition()
        for topic in (protocol.FIT_RESULT, protocol.ROLLOUT_RESULT):
            node.create_subscription(String, topic, lambda msg, t=topic: self._on_answer(t, msg), qos.REQUEST,
                                     callback_group=group)
        self.flush_client = node.create_client(Trigger, "logger/flush", callback_group=group)
        self._next = int(time.time() * 1000) % 1_000_000_000  # unique across restarts of this node

    def next_request(self) -> int:
        self._next += 1
        return self._next

    def _on_answer(self, topic: str, msg: String) -> None:
        try:
            payload = json.loads(msg.data)
            request = int(payload["request"])
        except (ValueError, KeyError, TypeError) as exc:
            self.node.get_logger().error(f"ignored a malformed message on {topic}: {exc}")
            return
        with self._arrived:
            self._answers[(topic, request)] = payload
            self._arrived.notify_all()

    def ask(self, request_topic: str, answer_topic: str, payload: dict, what: str) -> dict:
        """Publish `payload` and block until the learner answers it."""
        key = (answer_topic, int(payload["request"]))
        self._pubs[request_topic].publish(pack_json(payload))
        absent_since = None
        last_note = time.monotonic()
        with self._arrived:
            while key not in self._answers:
                if self.closing.is_set():
                    raise GraphError(f"shutting down while waiting for the learner to {what}")
                self._arrived.wait(1.0)
                now = time.monotonic()
                if self.node.count_publishers(answer_topic) == 0:
                    absent_since = absent_since or now
                    if now - absent_since > GONE_AFTER_S:
                        raise GraphError(f"no learner on the graph for {GONE_AFTER_S:g} s while waiting for it "
                                         f"to {what} (is learner_node running?)")
                else:
                    absent_since = None
                if now - last_note > 60.0:
                    last_note = now
                    self.node.get_logger().info(f"still waiting for the learner to {what}")
            return self._answers.pop(key)

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

    def fit(self, program: str, demo: Demonstration) -> FitOutcome:
        request = self.link.next_request()
        answer = protocol.parse_fit_result(self.link.ask(
            protocol.FIT_REQUEST, protocol.FIT_RESULT, protocol.fit_request(request, self.run_id(), program),
            "fit a program"))
        if not answer["ok"]:
            return FitOutcome(program=program, error=str(answer.get("error") or "the learner's fit failed"))
        info = answer.get("info_schema") or {}
        return FitOutcome(program=program, bundle=protocol.decode_bundle(answer["bundle_b64"]),
                          report=answer.get("report"),
                          info_schema=InfoSchema(tuple(info.get("weights", ())), tuple(info.get("latents", ())),
                                                 tuple(info.get("warnings", ()))))


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
        request = self.link.next_request()
        payload = protocol.rollout_request(request, run_id, round, bundle, plan, mode=self.mode,
                                           max_steps=self.max_steps, expert_labels=self.expert_labels)
        answer = protocol.parse_rollout_result(self.link.ask(
            protocol.ROLLOUT_REQUEST, protocol.ROLLOUT_RESULT, payload, f"run round {round}'s episodes"))
        control = answer.get("control_ms") or {}
        if control:
            self.log(f"round {round}: control callback p50 {control.get('p50', 0):.2f} ms, p99 "
                     f"{control.get('p99', 0):.2f} ms over {control.get('steps', 0)} steps")
        problem = self.link.flush_logger(self.flush_timeout_s)
        episodes = [self._record(run_id, round, ep) for ep in answer["episodes"]]
        missing = [f"{ep.kind} {ep.index}" for ep in episodes if not ep.stored]
        if missing:
            note = f"the logger has not committed {', '.join(missing)} ({problem or 'flushed'}); their summary rows are kept"
            self.log(f"round {round}: {note}")
            self.db.log_event(run_id, round, "logger_incomplete", note)
        return Rollouts(diagnostic=self.db.load_steps(run_id, round, kind="diagnostic"), episodes=episodes,
                        metrics=group_metrics(episodes),
                        errors=[f"{ep.kind} seed {ep.seed}: {ep.error}" for ep in episodes if ep.error])

    def _record(self, run_id: int, round: int, ep: dict[str, Any]) -> EpisodeRecord:
        row = self.db.episode_row(run_id, round, ep["kind"], ep["index"])
        stored = row is not None and row["complete"] is not None and int(row["steps"] or 0) >= int(ep.get("steps", 0))
        summary = {**ep["summary"], "seed": ep["seed"]}
        return EpisodeRecord(ep["kind"], ep["index"], ep["seed"], summary, None, ep.get("error"), stored=stored)
