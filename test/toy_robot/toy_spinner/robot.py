"""The spinner as refine_ros knows it (registered through the entry point group refine.robots)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from refine_ros.robots.descriptor import Robot, RobotRig

COMMAND_TOPIC = "/diff_drive_controller/cmd_vel"
ODOM_TOPIC = "/diff_drive_controller/odom"


class SpinnerRig(RobotRig):
    def command_topic(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        from geometry_msgs.msg import TwistStamped

        return TwistStamped, COMMAND_TOPIC

    def motion(self, msg: Any) -> tuple[float, ...]:
        return (msg.twist.linear.x, msg.twist.angular.z)

    def beyond_limits(self, msg: Any, bridge: Mapping[str, Any]) -> bool:
        forward, turn = self.motion(msg)
        return not (math.isfinite(forward) and math.isfinite(turn)) or forward != 0.0 or \
            abs(turn) > float(bridge["max_speed"]) + 1e-9

    def heartbeat(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        from nav_msgs.msg import Odometry

        return Odometry, ODOM_TOPIC

    def controller(self, values: np.ndarray) -> tuple[float, ...]:
        return (1.0,)


ROBOT = Robot(
    name="spinner",
    task="pendulum",
    profile="spinner_real",
    bridge="spinner_bridge",
    twin="spinner_twin",
    fake_driver="toy_spinner.spinner_twin:SpinnerTwin",
    rig=SpinnerRig(),
    moving_action=(1.0,),
    twin_heartbeat="odom",
    take_stick={"left_x": -0.5},  # torque +1 (the pendulum's map: -2 x left_x)
)
