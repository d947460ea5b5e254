"""The bridges' mappings without DDS: task actions -> the commands real stacks take (in the
robot's units), robot sensors -> task observations, the TF buffer and the arm kinematics."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from refine_ros.robots.arm import interface as arm
from refine_ros.robots.arm.kinematics import (
    Chain,
    KinematicsError,
    damped_least_squares,
    joint_velocities,
    scale_to_limits,
)
from refine_ros.robots.arm.tf_buffer import TfBuffer, quaternion_multiply, rotate
from refine_ros.robots.rc_car import interface as car

ROOT = Path(__file__).resolve().parents[1]
LIMITS = car.CarLimits(max_speed=2.0, max_steering_angle=0.34, wheelbase=0.33)


# ---- car ---------------------------------------------------------------------------------------
def test_the_cars_stop_is_zero_speed_in_every_mode_never_reverse():
    """Issue 16: "A stopped car drives backwards" ([steer 0, gas 0, brake 1] became linear.x =
    -max_speed in twist mode). The stop is speed 0 in ackermann and twist, brake in array."""
    stop = (0.0, 0.0, 1.0)
    sp = car.setpoint(stop, LIMITS)
    assert sp == car.Setpoint(0.0, 0.0)
    assert car.yaw_rate(sp, LIMITS.wheelbase) == 0.0
    assert car.array_command(stop, 0.5, LIMITS) == car.STOP_ARRAY
    for action in [(0.3, 0.2, 0.9), (-1.0, 0.0, 1.0), (1.0, 0.5, 0.5)]:
        assert car.setpoint(action, LIMITS).speed == 0.0, "braking never reverses"


def test_gas_is_a_speed_setpoint_capped_at_max_speed_and_steer_is_an_angle():
    sp = car.setpoint((0.5, 0.8, 0.2), LIMITS)
    assert sp.speed == pytest.approx(0.6 * 2.0)
    assert sp.steering_angle == pytest.approx(-0.17), "task steer +0.5 is right: a negative ROS angle"
    assert car.setpoint((-9.0, 9.0, -9.0), LIMITS) == car.Setpoint(0.34, 2.0), "clipped to the car's limits"
    assert car.setpoint((0.0, math.nan, 0.0), LIMITS) == car.STOP
    assert car.yaw_rate(car.Setpoint(0.2, 1.5), 0.33) == pytest.approx(1.5 * math.tan(0.2) / 0.33)


def test_array_mode_cuts_the_throttle_at_the_speed_limit():
    """Issue 16: "array mode has no speed limit at all". Now max_speed (m/s) caps it too."""
    assert car.array_command((0.1, 0.7, 0.0), 1.0, LIMITS) == (0.1, 0.7, 0.0)
    assert car.array_command((0.1, 0.7, 0.0), 2.0, LIMITS) == (0.1, 0.0, 0.0)
    assert car.array_command((0.1, 0.7, 0.0), None, LIMITS) == (0.1, 0.0, 0.0), "unknown speed: no throttle"
    assert car.array_command((0.1, math.inf, 0.0), 1.0, LIMITS) == car.STOP_ARRAY


def test_indicators_convert_metres_per_second_to_the_simulators_scale():
    """Issue 16: "the 0.3 cap is 30 m/s" with speed_to_sim 1.0. Speeds are converted with the
    profile's world units per metre; a rolling wheel reads the speed, as in the simulator."""
    ind = car.car_indicators(2.0, math.pi / 2, 0.4, [2.0, 2.0, 2.2, 2.2], speed_to_sim=44.4)
    assert ind[0] == pytest.approx(2.0 * 44.4 / 100)
    assert ind[1] == pytest.approx(0.5) and ind[2] == 0.4
    assert list(ind[3:]) == pytest.approx([0.888, 0.888, 2.2 * 0.444, 2.2 * 0.444])
    assert car.erpm_to_speed(4614.0 * 1.5, 4614.0) == pytest.approx(1.5)
    assert car.erpm_to_speed(100.0, 4614.0, 100.0) == 0.0


# ---- arm ---------------------------------------------------------------------------------------
def test_arm_velocity_and_grippers_of_both_directions():
    assert list(arm.cartesian_velocity([0.5, -2.0, 0.25, 1.0], 0.1)) == pytest.approx([0.05, -0.1, 0.025])
    assert list(arm.cartesian_velocity([math.nan, 0, 0, 1], 0.1)) == [0.0, 0.0, 0.0]
    # Franka: 0.04 m per finger open; Robotiq 2F-85 knuckle: 0.0 open, 0.8 closed (inverted)
    assert arm.gripper_position(1.0, 0.04, 0.0) == 0.04 and arm.gripper_position(0.25, 0.04, 0.0) == 0.01
    assert arm.gripper_position(1.0, 0.0, 0.8) == 0.0 and arm.gripper_position(0.0, 0.0, 0.8) == 0.8
    assert arm.gripper_position(0.25, 0.0, 0.8) == pytest.approx(0.6)
    assert arm.gripper_opening(0.08, 0.08, 0.0) == 1.0 and arm.gripper_opening(0.02, 0.08, 0.0) == 0.25
    assert arm.gripper_opening(0.6, 0.0, 0.8) == pytest.approx(0.25) and arm.gripper_opening(0.9, 0.0, 0.8) == 0.0


def test_gripper_goals_only_when_the_target_moves():
    goals = arm.GripperGoals(0.0, 0.8, deadband=0.05)
    assert goals.next_goal(1.0) == 0.0
    assert goals.next_goal(0.98) is None, "within 5 % of the range: no new goal"
    assert goals.next_goal(0.0) == 0.8
    assert goals.next_goal(0.0) is None


def test_servo_rejections_follow_each_releases_status_codes():
    # Humble: 4 is HALT_FOR_COLLISION, 5 JOINT_BOUND; Jazzy: 4 is DECELERATE_FOR_COLLISION
    assert arm.servo_rejection("servo_humble", 4) == "halt for collision"
    assert arm.servo_rejection("servo_jazzy", 4) is None
    assert arm.servo_rejection("servo_jazzy", 5) == "halt for collision"
    assert arm.servo_rejection("servo_jazzy", 6) == "joint bound"
    assert arm.servo_rejection("servo_humble", 0) is None and arm.servo_rejection("servo_jazzy", 1) is None
    assert arm.servo_rejection("servo_jazzy", -1) == "invalid"


# ---- TF ----------------------------------------------------------------------------------------
def _quat_z(angle: float) -> list[float]:
    return [0.0, 0.0, math.sin(angle / 2), math.cos(angle / 2)]


def test_tf_buffer_chains_transforms_and_reports_the_oldest_stamp():
    tf = TfBuffer()
    assert tf.set_transform("base_link", "shoulder", [0, 0, 0.1], _quat_z(math.pi / 2), 10.0)
    assert tf.set_transform("/shoulder", "tool0", [0.5, 0, 0], [0, 0, 0, 1], 10.5)
    assert tf.set_transform("base_link", "camera", [0, 0, 1.0], [0, 0, 0, 1], None)  # static
    assert tf.set_transform("camera", "door_handle", [0.2, 0.3, -0.8], _quat_z(math.pi), 9.0)
    tool = tf.lookup("base_link", "tool0")
    assert tool.transform.translation == pytest.approx([0.0, 0.5, 0.1]), "rotated 90 degrees about z"
    assert tool.stamp == 10.0
    handle = tf.lookup("base_link", "door_handle")
    assert handle.transform.translation == pytest.approx([0.2, 0.3, 0.2]) and handle.stamp == 9.0
    assert abs(handle.transform.rotation[2]) == pytest.approx(1.0)
    rel = tf.lookup("tool0", "door_handle")  # across branches: through the common base
    assert rotate(rel.transform.rotation, np.zeros(3)) == pytest.approx(np.zeros(3))
    back = tf.lookup("base_link", "tool0").transform.then(rel.transform)
    assert back.translation == pytest.approx(handle.transform.translation)
    assert tf.lookup("base_link", "camera").stamp is None, "static only: timeless"
    assert tf.lookup("base_link", "nowhere") is None


def test_a_quaternion_rotates_a_vector_as_its_rotation_matrix_does():
    rng = np.random.default_rng(7)
    for _ in range(50):
        q = rng.normal(size=4)
        x, y, z, w = q = q / np.linalg.norm(q)
        matrix = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                           [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                           [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        v = rng.normal(size=3)
        np.testing.assert_allclose(rotate(q, v), matrix @ v, atol=1e-12)


def test_tf_buffer_refuses_loops_and_non_rotations():
    tf = TfBuffer()
    assert tf.set_transform("a", "b", [0, 0, 0], [0, 0, 0, 1], 1.0)
    assert not tf.set_transform("b", "a", [0, 0, 0], [0, 0, 0, 1], 1.0), "a loop"
    assert not tf.set_transform("a", "c", [0, 0, math.nan], [0, 0, 0, 1], 1.0)
    assert not tf.set_transform("a", "c", [0, 0, 0], [0, 0, 0, 2], 1.0)
    assert quaternion_multiply(np.array(_quat_z(0.3)), np.array(_quat_z(0.4))) == pytest.approx(_quat_z(0.7))


# ---- kinematics --------------------------------------------------------------------------------
ARM_URDF = (ROOT / "urdf" / "door_scene.urdf").read_text()
SAWYER = Chain(ARM_URDF, "right_arm_base_link", "hand")
Q = {name: 0.3 * (i + 1) * (-1) ** i for i, name in enumerate(SAWYER.joint_names)}


def test_the_jacobian_matches_finite_differences_of_forward_kinematics():
    assert SAWYER.joint_names == tuple(f"right_j{i}" for i in range(7))
    jac = SAWYER.jacobian(Q)
    eps = 1e-6
    base = SAWYER.forward(Q)[:3, 3]
    for k, name in enumerate(SAWYER.joint_names):
        moved = SAWYER.forward({**Q, name: Q[name] + eps})[:3, 3]
        assert jac[:3, k] == pytest.approx((moved - base) / eps, abs=1e-5)


def test_damped_least_squares_moves_the_tip_along_the_commanded_velocity_within_limits():
    v = np.array([0.05, -0.02, 0.03])
    qdot = joint_velocities(SAWYER, Q, v, damping=0.01)
    achieved = SAWYER.jacobian(Q) @ qdot
    assert achieved[:3] == pytest.approx(v, abs=2e-3) and achieved[3:] == pytest.approx(np.zeros(3), abs=2e-3)
    assert np.all(np.abs(qdot) <= SAWYER.velocity_limits())
    fast = scale_to_limits(np.array([4.0, 1.0]), np.array([2.0, 10.0]))
    assert fast == pytest.approx([2.0, 0.5]), "scaled as a whole: the direction is kept"
    assert not np.any(joint_velocities(SAWYER, Q, [0.0, 0.0, 0.0], 0.01)), "zero velocity: zero joint speeds"
    singular = damped_least_squares(np.zeros((6, 3)), np.ones(6), 0.05)
    assert np.all(np.isfinite(singular)), "a singular Jacobian gives bounded joint speeds"


def test_a_chain_that_does_not_exist_is_refused():
    with pytest.raises(KinematicsError, match="no chain"):
        Chain(ARM_URDF, "right_arm_base_link", "not_a_link")
    with pytest.raises(KinematicsError, match="XML"):
        Chain("<robot", "a", "b")
