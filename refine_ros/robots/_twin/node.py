"""What the twin driver nodes (each robot folder's twin node) share: their dropout and noise
parameters, the operator's `~/silence` lever, ROS stamps from the twin's seconds, and the
tick that keeps the simulator on the wall clock.

Why a helper: every twin declares the same kinds of parameters (per-sensor dropout windows
and random dropouts, a command latency, a seed) and must read them the same way, or a
rehearsal configured for one robot would mean something else on another.
"""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool

from refine_ros.params import Param, Unset
from refine_ros.robots._twin.realtime import DropoutPlan, Window

# QoS of a driver's own topics, as the drivers the twins stand in for publish and read them
COMMAND_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
"""Commands: reliable, the newest one counts (as Servo and ackermann_mux read them)."""
STATE_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
"""Joint states, odometry, ERPM, status: reliable depth 10 (the drivers' default QoS)."""
TF_QOS = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
"""/tf as tf2_ros's TransformBroadcaster publishes it."""
TF_STATIC_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
"""/tf_static as tf2_ros's StaticTransformBroadcaster publishes it: late joiners get it."""


def transform_message(t: Any, seconds: float) -> TransformStamped:
    """A twin `Transform` (refine_ros/robots/_twin/frames.py) as a TransformStamped."""
    msg = TransformStamped()
    msg.header.stamp, msg.header.frame_id, msg.child_frame_id = stamp(seconds), t.parent, t.child
    tr, q = msg.transform.translation, msg.transform.rotation
    tr.x, tr.y, tr.z = t.pose.position
    q.x, q.y, q.z, q.w = t.pose.orientation
    return msg


def dropout_parameters(sensors: tuple[str, ...]) -> dict[str, Param]:
    """Per sensor: fixed silent windows and random ones (a Poisson rate and a mean length)."""
    table: dict[str, Param] = {}
    for sensor in sensors:
        table[f"dropouts.{sensor}.windows"] = Param(
            Unset("double_array"), f"{sensor}: silent windows as [start, end, start, end, ...] seconds since the "
            "twin started (unset: none)")
        table[f"dropouts.{sensor}.rate"] = Param(
            0.0, f"{sensor}: random dropouts per second (a Poisson process; 0: none)", (0.0, 100.0))
        table[f"dropouts.{sensor}.mean_duration"] = Param(
            0.2, f"{sensor}: mean length of a random dropout, s (exponential)", (0.001, 60.0))
    return table


def dropout_plans(p: dict[str, Any], sensors: tuple[str, ...]) -> dict[str, DropoutPlan]:
    """The parameters' dropouts as plans; ValueError naming the sensor when a window list is
    odd or a window is empty."""
    plans: dict[str, DropoutPlan] = {}
    for sensor in sensors:
        flat = list(p.get(f"dropouts.{sensor}.windows") or ())
        if len(flat) % 2:
            raise ValueError(f"dropouts.{sensor}.windows needs [start, end] pairs, got {len(flat)} values")
        try:
            windows = tuple(Window(float(a), float(b)) for a, b in zip(flat[::2], flat[1::2], strict=True))
        except ValueError as exc:
            raise ValueError(f"dropouts.{sensor}.windows: {exc}") from None
        rate = float(p.get(f"dropouts.{sensor}.rate") or 0.0)
        if windows or rate > 0:
            plans[sensor] = DropoutPlan(windows, rate, float(p[f"dropouts.{sensor}.mean_duration"]))
    return plans


def stamp(seconds: float) -> Time:
    """A ROS stamp from seconds on the node's clock."""
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def now_s(node: Node) -> float:
    return node.get_clock().now().nanoseconds * 1e-9


class SilenceLever:
    """`~/silence_<sensor>` (std_srvs/SetBool) per sensor: the operator pulls a sensor's plug
    during a rehearsal (true) and puts it back (false), on top of the configured dropouts. A
    silenced sensor publishes nothing, as a disconnected driver."""

    def __init__(self, node: Node, sensors: tuple[str, ...]) -> None:
        self.silent = dict.fromkeys(sensors, False)
        self._node = node
        for sensor in sensors:
            node.create_service(SetBool, f"~/silence_{sensor}",
                                lambda req, res, s=sensor: self._set(s, req, res))  # fmt: skip

    def _set(self, sensor: str, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.silent[sensor] = bool(request.data)
        self._node.get_logger().warning(f"{sensor}: {'silenced by the operator' if request.data else 'back'}")
        response.success, response.message = True, f"{sensor} {'silent' if request.data else 'publishing'}"
        return response

    def __call__(self, sensor: str) -> bool:
        return self.silent[sensor]
