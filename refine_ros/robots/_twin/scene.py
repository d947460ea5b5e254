"""The twin's scene channel: what a person standing at the robot sees, from the twin's ground
truth, for a teleoperator and for the ground-truth figures of live episodes.

`~/scene` (std_msgs/String, JSON, every `every`-th tick: the robot's `truth.py` scene with the
twin's time) and `~/scene_layout` (latched, what does not move: the car's track; re-sent after a
reset). No node of a robot's profile reads either: the robot's graph sees only the drivers'
interfaces (`test/test_ros_twin_operator.py` checks who subscribes), so a policy or an analyst
can never learn from them what the robot's own sensors do not give.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

SCENE_TOPIC = "~/scene"
LAYOUT_TOPIC = "~/scene_layout"
SCENE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
LAYOUT_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


class SceneChannel:
    """Publishes a twin's scene (`scene()`: a JSON-able dict) and its layout (`layout()`)."""

    def __init__(self, node: Node, scene: Callable[[], dict[str, Any]],
                 layout: Callable[[], dict[str, Any]] | None = None, every: int = 1) -> None:
        self.scene, self.layout, self.every = scene, layout, max(1, int(every))
        self.pub = node.create_publisher(String, SCENE_TOPIC, SCENE_QOS)
        self.pub_layout = node.create_publisher(String, LAYOUT_TOPIC, LAYOUT_QOS) if layout else None
        self._ticks = 0
        self.publish_layout()

    def publish(self, now: float) -> None:
        """Called from the twin's tick."""
        self._ticks += 1
        if self._ticks % self.every == 0 and self.pub.get_subscription_count() > 0:
            self.pub.publish(String(data=json.dumps({"time": round(now, 4), **self.scene()})))

    def publish_layout(self) -> None:
        """At start and after each reset."""
        if self.pub_layout is not None:
            self.pub_layout.publish(String(data=json.dumps(self.layout())))
