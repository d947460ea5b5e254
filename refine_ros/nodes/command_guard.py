"""Command guard: the driver's exact stop when our command stream to it stops after a moving
command (the bridge killed, hung or cut off), from a process of its own beside the bridge.
The rule and why it is needed: refine_ros/command_guard.py.

`ros2 run refine_ros command_guard --ros-args -p command_type:=joint_velocities`: the profiles
start it with the bridge's command settings (arm_real, rc_car_real). It reads and writes the
driver's own topic in the driver's own type (imported only for the type in use), reliable
depth 1 as the bridges write it. A TwistStamped stop carries the guard's clock as its stamp
and the last command's frame (MoveIt Servo judges staleness by the stamp); a joint-velocity
stop has as many zeros as the last command had joints; an Ackermann stop is speed 0 and
straight wheels (the bridges' stop), a Twist stop all zero.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from rclpy.node import Node

from refine_ros.bringup.dds import may_use_shared_memory
from refine_ros.command_guard import COMMAND_TYPES, STANDARD_TOPICS, Guard, moving
from refine_ros.nodes._main import run_node, without_shared_memory
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.wire import qos

PARAMETERS: dict[str, Param] = {
    "command_type": Param("twist_stamped", f"the driver's command type: {' | '.join(COMMAND_TYPES)}"),
    "command_topic": Param("", "the driver's command topic; '' = the type's standard one: "
                           + ", ".join(f"{t} {s}" for t, s in STANDARD_TOPICS.items())),
    "timeout": Param(0.15, "s without a command after a moving one before the stop goes out", (0.01, 5.0)),
    "repeats": Param(5, "stops sent each time (one per period), so a lost message does not leave the robot moving",
                     (1, 100)),
    "period": Param(0.01, "s between checks (and between the repeated stops)", (0.001, 1.0)),
    "hold": Param(0.1, "s between the stops sent after the burst, for as long as no moving command comes",
                  (0.01, 10.0)),
}

_TYPES = {
    "twist_stamped": ("geometry_msgs.msg", "TwistStamped"),
    "joint_velocities": ("std_msgs.msg", "Float64MultiArray"),
    "ackermann": ("ackermann_msgs.msg", "AckermannDriveStamped"),
    "twist": ("geometry_msgs.msg", "Twist"),
}


def motion_fields(command_type: str, msg: Any) -> list[float]:
    """The fields of `msg` that move the robot (refine_ros.command_guard.moving reads them)."""
    if command_type == "twist_stamped":
        msg = msg.twist
    if command_type in ("twist_stamped", "twist"):
        v, w = msg.linear, msg.angular
        return [v.x, v.y, v.z, w.x, w.y, w.z]
    if command_type == "ackermann":
        return [msg.drive.speed, msg.drive.steering_angle]
    return list(msg.data)


class CommandGuard(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("command_guard", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            self.command_type = str(p["command_type"])
            if self.command_type not in COMMAND_TYPES:
                raise StartRefused(f"command_guard: command_type must be one of {', '.join(COMMAND_TYPES)}, "
                                   f"got {self.command_type!r}")
            package, name = _TYPES[self.command_type]
            try:
                self.msg_type = getattr(importlib.import_module(package), name)
            except ImportError:
                raise StartRefused(f"command_guard: {self.command_type} needs the {package.split('.')[0]} "
                                   "messages; install ros-$ROS_DISTRO-"
                                   f"{package.split('.')[0].replace('_', '-')}") from None
        self.topic = str(p["command_topic"]) or STANDARD_TOPICS[self.command_type]
        self.guard = Guard(float(p["timeout"]), int(p["repeats"]), float(p["hold"]))
        self._frame, self._joints = "", 0
        self._pub = self.create_publisher(self.msg_type, self.topic, qos.COMMAND)
        self._sub = self.create_subscription(self.msg_type, self.topic, self._on_command, qos.COMMAND)
        self._started = self._now()
        self._matched: tuple[int, int] | None = None
        self.create_timer(float(p["period"]), self._tick)
        self.get_logger().info(f"guarding {self.topic} ({self.command_type}): the stop after "
                               f"{self.guard.timeout:g} s of silence following a moving command")
        if may_use_shared_memory(os.environ):
            self.get_logger().warning(
                "this process's Fast DDS configuration may use shared memory: a frozen bridge can then hold "
                "the guard's stop for a second or more; start it with FASTDDS_DEFAULT_PROFILES_FILE set to "
                "refine_ros's config/fastdds_udp.xml (for a LOCALHOST graph config/fastdds_udp_localhost.xml "
                "and ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT)")

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _say_matches(self) -> None:
        """Log when the guard first both hears another publisher of the topic (the bridge) and
        reaches another subscriber (the driver), and every change after: DDS matches, not the
        graph, since a participant can be in the graph before its endpoints match, and over
        UDP only that took seconds now and then (the guard's own reader and writer match each
        other, hence the -1). Until then it protects nothing; an operator (or a test rig) can
        wait for the line."""
        matched = (self._sub.get_publisher_count() - 1, self._pub.get_subscription_count() - 1)
        if matched == self._matched or (self._matched is None and min(matched) <= 0):
            return
        said = (f"connected after {self._now() - self._started:.2f} s" if self._matched is None
                else "matches changed")
        self._matched = matched
        self.get_logger().info(f"{said}: hears {matched[0]} publisher(s) of {self.topic}, "
                               f"its stop reaches {matched[1]} subscriber(s)")

    def _on_command(self, msg: Any) -> None:
        if self.command_type == "twist_stamped":
            self._frame = msg.header.frame_id
        elif self.command_type == "joint_velocities":
            self._joints = len(msg.data)
        self.guard.heard(moving(self.command_type, motion_fields(self.command_type, msg)), self._now())

    def _tick(self) -> None:
        self._say_matches()
        trips = self.guard.trips
        if not self.guard.tick(self._now()):
            return
        if self.guard.trips != trips:
            self.get_logger().error(f"no command on {self.topic} for {self.guard.timeout:g} s after a moving one "
                                    "(the bridge is gone or hung): sending the stop")
        self._pub.publish(self.stop())

    def stop(self) -> Any:
        """The driver's exact stop."""
        msg = self.msg_type()
        if self.command_type == "twist_stamped":
            msg.header.stamp = self.get_clock().now().to_msg()
            msg.header.frame_id = self._frame
        elif self.command_type == "joint_velocities":
            msg.data = [0.0] * self._joints
        elif self.command_type == "ackermann":
            msg.header.stamp = self.get_clock().now().to_msg()
        return msg


def main(args: list[str] | None = None) -> None:
    without_shared_memory("command_guard", args)
    run_node(CommandGuard, args)


if __name__ == "__main__":
    main()
