"""`refine_core.loop.refine`'s seams implemented over DDS: the learner node fits programs, drives
episodes and runs post-refinement RL on them, the rollout logger writes every step into the run
database.

Why this shape: the analysis node runs the very same `refine()` as `refine run`; only *where*
a program is fitted and *who* steps the simulator or the robot differ, and those are exactly
the two interfaces `refine_core.backends` defines. So there is one implementation of the
method, and a run through the graph leaves the rows a local run leaves.

Waiting: `refine()` runs on the analysis node's worker thread and blocks in `fit` / `run`
until the learner's action result arrives (an event, no polling; a learner that starts late is
waited for). The wait for a result has no fixed deadline (a robot episode waits for an
operator), but every wait can end, with a `GraphError` and a line in the log: the learner has
been gone from the graph for GONE_AFTER_S, it never received the goal or no longer lists it, it
finished the goal but the result never arrived, or the node shuts down (the goal is cancelled
then); and every minute of waiting says on the log what it waits for and how the learner lists
the goal. An answer the middleware lost
on the way (`refine_ros.wire.goals` says when and why) is not waited for: the goal is followed
by its id on the action's status topic. A fit cancelled by a person (`ros2 action`, see
docs/ROS_INTERFACES.md) is a failed fit the analyst is told about; a cancelled rollout ends
the run with that reason.
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_srvs.srv import Trigger
from unique_identifier_msgs.msg import UUID

from refine_core.backends import FitOutcome, PolishOutcome, Rollouts, group_metrics
from refine_core.policy.bundle import PolicyBundle
from refine_core.rollout.demo import Demonstration
from refine_core.rollout.plan import PlannedEpisode
from refine_core.store.db import RunDatabase
from refine_core.store.records import EpisodeRecord
from refine_ros.bringup.spin import action_client
from refine_ros.wire import protocol
from refine_ros.wire.goals import GoalStatuses
from refine_ros_interfaces.action import FitProgram, RunRl, RunRollout

GONE_AFTER_S = 30.0
"""How long the learner may be absent from the graph before a wait gives up."""
ANSWER_S = 10.0
"""The learner answers a goal, and sends a finished goal's result, at once (its work runs on a
worker thread): an answer still missing this long after the learner's status listed the goal
(or listed it as finished) was lost on the way (`refine_ros.wire.goals`), and the goal is
followed by its id instead."""
RESULT_ASKS = 3
"""How many times the result of a goal the learner lists as finished is asked for."""


class GraphError(RuntimeError):
    """The node graph cannot do what the loop asked (the learner is gone, shutdown); the run
    ends with this as its recorded reason."""


class LearnerLink:
    """The analysis node's end of the learner's actions: send a goal, wait for its result."""

    def __init__(self, node: Node, closing: threading.Event) -> None:
        self.node = node
        self.closing = closing
        group = ReentrantCallbackGroup()
        self.fit_client = action_client(node, FitProgram, protocol.FIT_ACTION, callback_group=group)
        self.rollout_client = action_client(node, RunRollout, protocol.ROLLOUT_ACTION, callback_group=group)
        self.rl_client = action_client(node, RunRl, protocol.RL_ACTION, callback_group=group)
        self.flush_client = node.create_client(Trigger, "logger/flush", callback_group=group)
        self._followed = {client: (action, GoalStatuses(node, name, group)) for client, action, name in (
            (self.fit_client, FitProgram, protocol.FIT_ACTION), (self.rollout_client, RunRollout, protocol.ROLLOUT_ACTION),
            (self.rl_client, RunRl, protocol.RL_ACTION))}

    def ask(self, client: ActionClient, goal: Any, what: str, feedback: Callable[[Any], None] | None = None
            ) -> tuple[int, Any]:
        """Send `goal` and block until its result: (GoalStatus status, result message)."""
        self._wait(None, client, what)
        goal_id = UUID(uuid=list(uuid.uuid4().bytes))
        sent = client.send_goal_async(goal, feedback_callback=feedback and (lambda msg: feedback(msg.feedback)),
                                      goal_uuid=goal_id)
        handle = self._accepted(client, sent, goal_id, what)
        try:
            answer = self._result(client, handle, what)
        except GraphError:
            handle.cancel_goal_async()  # the learner stops what nobody will read
            raise
        finally:
            self._followed[client][1].forget(bytes(goal_id.uuid))
        return int(answer.status), answer.result

    def _accepted(self, client: ActionClient, sent: Any, goal_id: UUID, what: str) -> ClientGoalHandle:
        """The goal's handle once the learner accepted it: from its answer, or, when the learner
        lists the goal but its answer has not come for ANSWER_S, one made from the goal's id."""
        action, statuses = self._followed[client]
        key = bytes(goal_id.uuid)
        sent_at = time.monotonic()

        def lost(now: float) -> bool:
            listed = statuses.get(key)
            return (listed is not None and now - listed.first >= ANSWER_S) or now - sent_at >= GONE_AFTER_S

        self._wait(sent, client, what, give_up=lost, detail=lambda now: "no answer to the goal yet")
        if sent.done():
            handle = sent.result()
            if handle is None or not handle.accepted:
                raise GraphError(f"the learner refused the goal to {what}")
            return handle
        if statuses.get(key) is None:
            raise self._error(f"the learner neither answered the goal to {what} nor lists it after {GONE_AFTER_S:g} s: "
                              "the goal was lost between the nodes")
        self.node.get_logger().warning(
            f"the learner lists the goal to {what} but its answer did not arrive within {ANSWER_S:g} s (the middleware "
            "drops an answer sent before the learner's side has matched this node): following the goal by its status")
        return ClientGoalHandle(client, goal_id, action.Impl.SendGoalService.Response(accepted=True))

    def _result(self, client: ActionClient, handle: ClientGoalHandle, what: str) -> Any:
        """The goal's result. The learner keeps a finished goal's result, so one that has not come
        ANSWER_S after the learner listed the goal as finished is asked for again; a goal the
        learner no longer lists (expired, or a learner that restarted and took other goals) has
        no result to wait for."""
        statuses = self._followed[client][1]
        key = bytes(handle.goal_id.uuid)

        def detail(now: float) -> str:
            listed = statuses.get(key)
            return listed.describe(now) if listed is not None else "the learner's status has not listed the goal yet"

        for _ask in range(RESULT_ASKS):
            result = handle.get_result_async()
            asked = time.monotonic()

            def stuck(now: float, asked: float = asked) -> bool:
                listed = statuses.get(key)
                if listed is None:
                    return False
                if not listed.present:
                    return now - listed.seen >= ANSWER_S
                return listed.finished and now - max(listed.since, asked) >= ANSWER_S

            self._wait(result, client, what, give_up=stuck, detail=detail)
            if result.done():
                return result.result()
            listed = statuses.get(key)
            if listed is not None and not listed.present:
                raise self._error(f"the learner no longer lists the goal to {what} ({listed.describe(time.monotonic())}): "
                                  "it has no result to wait for")
            self.node.get_logger().warning(f"the learner finished the goal to {what} but its result did not arrive "
                                           f"within {ANSWER_S:g} s: asking for it again")
        raise self._error(f"the learner finished the goal to {what} but its result did not arrive ({RESULT_ASKS} requests)")

    def _error(self, message: str) -> GraphError:
        self.node.get_logger().error(message)
        return GraphError(message)

    def _wait(self, future: Any, client: ActionClient, what: str, give_up: Callable[[float], bool] | None = None,
              detail: Callable[[float], str] | None = None) -> None:
        """Until `future` is done (None: until the learner's action server is up) or
        `give_up(now)` says so; raises GraphError when the node shuts down or the learner has
        been gone for GONE_AFTER_S. Says on the log every minute what it waits for."""
        arrived = threading.Event()
        if future is not None:
            future.add_done_callback(lambda _f: arrived.set())
        started = time.monotonic()
        absent_since, last_note = None, started
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
                    raise self._error(f"no learner on the graph for {GONE_AFTER_S:g} s while waiting for it to {what} "
                                      "(is learner_node running?)")
            if future is not None and not future.done() and give_up is not None and give_up(now):
                return
            if now - last_note > 60.0:
                last_note = now
                why = "its action server is not on the graph" if future is None else (
                    detail(now) if detail is not None else "")
                self.node.get_logger().info(f"still waiting for the learner to {what} after {now - started:.0f} s"
                                            + (f": {why}" if why else ""))

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


@dataclass
class GraphPolisher:
    """Post-refinement RL as the learner's `learner/run_rl` goal: its episodes run on the sim node
    or the robot (on a robot, each after the operator's confirmation: RL's resets are operator
    resets), and every update's record comes back as feedback while it runs, so the database
    holds them as they are made and the log says how RL is doing. A cancelled goal (any action
    client may cancel it) ends RL as a failed round that keeps those records."""

    link: LearnerLink
    preset: str = "ours"
    log: Callable[[str], None] = print
    note_every_s: float = 15.0

    def polish(self, bundle: PolicyBundle, settings: dict, *, run_id: int, round: int,
               on_update: Callable[[dict], None] | None = None) -> PolishOutcome:
        heard, last_note, lock = [0], [time.monotonic()], threading.Lock()

        def deliver(record: dict) -> bool:
            """Each update once, in order: from its feedback, or from the result's curve."""
            with lock:
                if int(record["update"]) <= heard[0]:
                    return False
                heard[0] = int(record["update"])
                if on_update is not None:
                    on_update(record)
                return True

        def feedback(msg: Any) -> None:
            if msg.record_json:
                record = json.loads(msg.record_json)
                if deliver(record):
                    self.log(update_line(record, msg.updates_planned, msg.resets_done, msg.resets_planned))
            elif time.monotonic() - last_note[0] >= self.note_every_s:
                last_note[0] = time.monotonic()
                self.log(f"RL: {protocol.RL_PHASES[msg.phase].replace('_', ' ')}, {msg.resets_done} of "
                         f"{msg.resets_planned} episodes")

        goal = protocol.rl_goal(run_id, round, bundle, settings, self.preset)
        status, result = self.link.ask(self.link.rl_client, goal, f"run RL ({settings.get('reset_budget')} resets)",
                                       feedback)
        kept, report, error = protocol.read_rl_result(result)
        for record in report.get("curve", []):  # feedback is a topic: its last message may come after the result
            deliver(record)
        if status == GoalStatus.STATUS_CANCELED:
            return PolishOutcome(None, report, f"RL was cancelled on the learner{f' ({error})' if error else ''}")
        if error is not None or status != GoalStatus.STATUS_SUCCEEDED:
            return PolishOutcome(None, report, error or f"the learner's RL ended with status {status}")
        return PolishOutcome(kept, report)


def update_line(record: dict, updates: int, done: int, planned: int) -> str:
    """One RL update as the analysis node logs it: what it did and where the run stands."""
    line = (f"RL update {record['update']} of {updates}: sampled return {record.get('return_mean', math.nan):.4g}, "
            f"KL {record.get('kl', math.nan):.2g}")
    selection = record.get("selection_metric", math.nan)
    if not math.isnan(selection):
        line += f", selection {selection:.4g}" + (" (accepted)" if record.get("selection_accepted") else "")
    return f"{line}; {done} of {planned} episodes"
