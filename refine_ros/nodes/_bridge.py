"""What both hardware bridges share: the shape re-check of every safe action (defence in
depth: the safety node already checked it) and the step counter an episode's start event
resets, so a bridge's observations carry the learner's episode counter from step 0."""

from __future__ import annotations

from typing import Any

import numpy as np
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String

from refine_ros.messages import unpack_json
from refine_ros.safety import InvalidCommand, parse_command


class BridgeNode(Node):
    """Base of the arm and RC-car bridges; `axes` is the task's action width."""

    axes: int = 0

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.episode, self.step, self.rejected = 0, 0, 0

    def _param(self, name: str):
        return self.get_parameter(name).value

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _safe_values(self, msg: Float64MultiArray) -> np.ndarray | None:
        """The command's values, or None (counted, logged at most once a second) if malformed."""
        try:
            _, _, values = parse_command(msg.layout.data_offset, msg.data, self.axes)
        except InvalidCommand as exc:
            self.rejected += 1
            self.get_logger().warning(f"dropped safe_action: {exc}", throttle_duration_sec=1.0)
            return None
        return values

    def _on_event(self, msg: String) -> None:
        try:
            event = unpack_json(msg)
            if isinstance(event, dict) and event.get("event") == "start":
                self.episode, self.step = int(event.get("episode", self.episode + 1)), 0
                self._on_start()
        except (ValueError, TypeError):
            self.get_logger().warning("ignored a malformed episode event")

    def _on_start(self) -> None:
        """A new episode begins (after the counters were reset)."""
