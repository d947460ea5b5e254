"""The arm's side of the door task, as plain functions (no ROS, no simulator): the task's
action [dx, dy, dz, gripper] -> what an arm's standard interfaces take, and the arm's sensors ->
the door task's observation. `arm_bridge` is a thin adapter around these.

Motion (`command_interface`), always a Cartesian velocity of the tool in the robot's base frame,
deltas in [-1, 1] x `max_speed` m/s per axis:
- `servo_jazzy`: MoveIt Servo as of Jazzy: geometry_msgs/TwistStamped on
  `/servo_node/delta_twist_cmds`; the bridge switches Servo to twist commands
  (`~/switch_command_type`, moveit_msgs/srv/ServoCommandType TWIST = 1), unpauses it
  (`~/pause_servo`, std_srvs/SetBool false) and reads `~/status` (moveit_msgs/ServoStatus);
- `servo_humble`: MoveIt Servo as of Humble: the same TwistStamped topic, started with
  `~/start_servo` (std_srvs/Trigger), paused with `~/pause_servo` / `~/unpause_servo` (Trigger),
  status as std_msgs/Int8 on `~/status`;
- `twist`: a plain TwistStamped topic (any Cartesian velocity controller), no services;
- `forward_velocity`: a ros2_control forward command controller taking joint velocities
  (std_msgs/Float64MultiArray on `/<controller>/commands`, in the controller's joint order).
  The Cartesian velocity becomes joint velocities through the arm's own URDF
  (`robot_description`) and damped least squares (refine_ros/robots/arm/kinematics.py).

A step Servo refuses is *rejected*: Servo reports a halt (singularity, collision, joint bound,
invalid) in the status in force when the command is sent; the two releases number their codes
differently (moveit_servo's StatusCode in each branch).

Gripper (`gripper_interface`): the control_msgs GripperCommand action (Franka's and Robotiq's
drivers), a std_msgs/Float64 topic, or none. The task's gripper action (0 closed, 1 open) maps
linearly onto [`gripper_closed_position`, `gripper_open_position`], which may be decreasing (a
Robotiq knuckle: 0.0 open, 0.8 closed). A new action goal is sent only when the target moved by
more than `gripper_deadband` of the range, so a steady command is one goal, not 50 a second.
The opening observation reads the gripper joints' summed positions between
`gripper_joint_closed` and `gripper_joint_open` (again in either order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

COMMAND_INTERFACES = ("servo_jazzy", "servo_humble", "twist", "forward_velocity")
GRIPPER_INTERFACES = ("action", "topic", "none")

SERVO_TWIST_COMMAND = 1
"""moveit_msgs/srv/ServoCommandType: JOINT_JOG 0, TWIST 1, POSE 2."""
SERVO_HALTS = {
    # moveit_servo StatusCode values that mean "no motion was commanded": INVALID, and the halts
    # for a singularity, a collision and a joint bound
    "servo_humble": {-1: "invalid", 2: "halt for singularity", 4: "halt for collision", 5: "joint bound"},
    "servo_jazzy": {-1: "invalid", 2: "halt for singularity", 5: "halt for collision", 6: "joint bound"},
}


def servo_rejection(interface: str, code: int) -> str | None:
    """Why Servo refuses commands while it reports `code` (None: it executes them)."""
    return SERVO_HALTS.get(interface, {}).get(int(code))


def cartesian_velocity(action: Sequence[float], max_speed: float) -> np.ndarray:
    """[dx, dy, dz, ...] -> linear velocity (m/s) in the base frame; non-finite is no motion."""
    delta = np.asarray(action[:3], dtype=float)
    if delta.shape != (3,) or not np.all(np.isfinite(delta)):
        return np.zeros(3)
    return np.clip(delta, -1.0, 1.0) * max_speed


def gripper_position(action: float, open_position: float, closed_position: float) -> float:
    """The task's gripper action (0 closed, 1 open) -> the driver's position command."""
    g = min(max(float(action), 0.0), 1.0) if math.isfinite(action) else 0.0
    return closed_position + g * (open_position - closed_position)


def gripper_opening(joint_sum: float, joint_open: float, joint_closed: float) -> float:
    """Summed gripper joint positions -> opening in [0 closed, 1 open] (either direction)."""
    span = joint_open - joint_closed
    if span == 0 or not math.isfinite(joint_sum):
        return 0.0
    return float(min(max((joint_sum - joint_closed) / span, 0.0), 1.0))


class GripperGoals:
    """When to send a gripper goal: the first time, and whenever the target moved by more than
    `deadband` x |open - closed| since the last goal."""

    def __init__(self, open_position: float, closed_position: float, deadband: float) -> None:
        self.open, self.closed = open_position, closed_position
        self.tolerance = abs(open_position - closed_position) * deadband
        self.last: float | None = None

    def next_goal(self, action: float) -> float | None:
        target = gripper_position(action, self.open, self.closed)
        if self.last is not None and abs(target - self.last) <= self.tolerance:
            return None
        self.last = target
        return target


def door_step_values(gripper_xyz: Sequence[float], opening: float, handle_xyz: Sequence[float],
                     handle_quat_xyzw: Sequence[float]) -> np.ndarray:
    """The 18 per-step values of the door observation (11-17 unused, zero as in Meta-World).
    Meta-World stores the handle orientation scalar-last (x, y, z, w), as ROS does."""
    out = np.zeros(18)
    out[0:3], out[3], out[4:7], out[7:11] = gripper_xyz, opening, handle_xyz, handle_quat_xyzw
    return out


def door_observation(current: np.ndarray, previous: np.ndarray, target_xyz: Sequence[float]) -> np.ndarray:
    return np.concatenate([current, previous, np.asarray(target_xyz, dtype=float)])
