"""What an action server says about each goal on the action's status topic, so that a client
can follow its goal when one of the action's answers never arrives.

Why: an action's goal response and result response are service answers, and the middleware
drops a service answer when the server's answer writer has not yet matched the client's answer
reader. rmw_fastrtps waits for that match for the writer's `max_blocking_time` (100 ms unless a
profile sets it; config/fastdds.xml gives service writers 1 s), then gives up ("client will not
receive response"), and rclpy only warns. The server carries on with the goal, but the client's
future never completes: the analysis node waited forever for a fit the learner had long
finished (the live arm graph's intermittent 0-episode stall, seen on a loaded machine). The
status topic is reliable and transient local and lists every goal the server holds with its
state, so it reaches the client even when it matched late: a client that knows its goal's id
can tell an answer that was lost (the goal is listed) from one that is merely slow, and a
result that was lost (the goal is listed as finished) from work still going on.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from action_msgs.msg import GoalStatus, GoalStatusArray
from rclpy.node import Node
from rclpy.qos import qos_profile_action_status_default

FINISHED = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_CANCELED, GoalStatus.STATUS_ABORTED)
NAMES = {GoalStatus.STATUS_UNKNOWN: "unknown", GoalStatus.STATUS_ACCEPTED: "accepted",
         GoalStatus.STATUS_EXECUTING: "executing", GoalStatus.STATUS_CANCELING: "canceling",
         GoalStatus.STATUS_SUCCEEDED: "succeeded", GoalStatus.STATUS_CANCELED: "canceled",
         GoalStatus.STATUS_ABORTED: "aborted"}


@dataclass(frozen=True)
class Listed:
    """One goal as the server last listed it: its state, since when (monotonic seconds), when
    the server first listed it, and when it last did (a goal it no longer lists keeps that
    time, with `present` False)."""

    state: int
    since: float
    first: float
    seen: float
    present: bool = True

    @property
    def finished(self) -> bool:
        return self.present and self.state in FINISHED

    def describe(self, now: float) -> str:
        if not self.present:
            return f"the server has not listed the goal for {now - self.seen:.0f} s"
        return f"the server lists the goal as {NAMES.get(self.state, self.state)} for {now - self.since:.0f} s"


class GoalStatuses:
    """The latest status array of one action (action_msgs/GoalStatusArray on
    `<action>/_action/status`, the topic `ros2 action info` reads), by goal id."""

    def __init__(self, node: Node, action_name: str, callback_group=None) -> None:
        self._lock = threading.Lock()
        self._goals: dict[bytes, Listed] = {}
        node.create_subscription(GoalStatusArray, f"{action_name}/_action/status", self._on_status,
                                 qos_profile_action_status_default, callback_group=callback_group)

    def _on_status(self, msg: GoalStatusArray) -> None:
        now = time.monotonic()
        listed = {bytes(s.goal_info.goal_id.uuid): int(s.status) for s in msg.status_list}
        with self._lock:
            for key, old in list(self._goals.items()):
                if key not in listed and old.present:
                    self._goals[key] = Listed(old.state, old.since, old.first, old.seen, present=False)
            for key, state in listed.items():
                old = self._goals.get(key)
                since = old.since if old is not None and old.present and old.state == state else now
                self._goals[key] = Listed(state, since, old.first if old is not None else now, now)

    def get(self, goal_id: bytes) -> Listed | None:
        """How the server last listed the goal; None if it never has (to this client's knowledge)."""
        with self._lock:
            return self._goals.get(goal_id)

    def forget(self, goal_id: bytes) -> None:
        with self._lock:
            self._goals.pop(goal_id, None)
