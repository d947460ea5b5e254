"""The arm as the rest of refine_ros knows it: its nodes, profiles, stand-ins and rig settings
(refine_ros/robots/descriptor.py says who reads what)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from refine_ros.robots.descriptor import Robot, RobotRig


class ArmRig(RobotRig):
    """MoveIt Servo's TwistStamped (or a ros2_control forward velocity controller's joint
    velocities), joint states as the heartbeat, the door handle's marker on /tf."""

    def command_topic(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        if bridge.get("command_interface") == "forward_velocity":
            from std_msgs.msg import Float64MultiArray

            return Float64MultiArray, bridge.get("velocity_command_topic", "/forward_velocity_controller/commands")
        from geometry_msgs.msg import TwistStamped

        return TwistStamped, bridge.get("servo_topic", "/servo_node/delta_twist_cmds")

    def motion(self, msg: Any) -> tuple[float, ...]:
        """The linear and angular velocity of a twist, or the joint velocities."""
        if hasattr(msg, "twist"):
            v, w = msg.twist.linear, msg.twist.angular
            return (v.x, v.y, v.z, w.x, w.y, w.z)
        return tuple(msg.data)

    def beyond_limits(self, msg: Any, bridge: Mapping[str, Any]) -> bool:
        values = self.motion(msg)
        if not all(math.isfinite(v) for v in values):
            return True
        return hasattr(msg, "twist") and max(abs(v) for v in values[:3]) > float(bridge["max_speed"]) + 1e-9

    def fake_driver_parameters(self, bridge: Mapping[str, Any]) -> dict[str, Any]:
        return {"interface": bridge.get("command_interface", "servo_jazzy")}

    def heartbeat(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        from sensor_msgs.msg import JointState

        return JointState, "/joint_states"

    def watch_sensor(self, node: Any, bridge: Mapping[str, Any], arrived: Callable[[], None]) -> None:
        """The handle marker's sightings on /tf."""
        from tf2_msgs.msg import TFMessage

        from refine_ros.wire import qos

        handle = str(bridge.get("handle_frame", "door_handle"))

        def on_tf(msg) -> None:
            if any(t.child_frame_id == handle for t in msg.transforms):
                arrived()
        node.create_subscription(TFMessage, "/tf", on_tf, qos.TF)

    def controller(self, values: np.ndarray) -> tuple[float, ...]:
        """The hand circles slowly with the gripper open."""
        phase = 2.0 * math.pi * time.monotonic() / 4.0
        return (0.3 * math.cos(phase), 0.3 * math.sin(phase), 0.0, 1.0)


ROBOT = Robot(
    name="arm",
    task="door_open",
    profile="arm_real",
    bridge="arm_bridge",
    twin="arm_twin",
    fake_driver="refine_ros.robots.arm.fake_driver:FakeArmDriver",
    rig=ArmRig(),
    twin_bridge_overrides={"target_mode": "topic"},
    moving_action=(0.3, 0.0, 0.0, 1.0),  # 0.03 m/s forward, gripper open
    fault_levers={"stale_sensor": "handle_lost", "servo_rejects": "servo_halt"},
    twin_heartbeat="joints",
    take_stick={"left_y": 0.6},  # left stick forward: the tool's +y
    live_bench={"rate": 50.0},
)
