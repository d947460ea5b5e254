"""The stock stacks the twins emulate, rule by rule, without DDS or a simulator: MoveIt Servo
(Jazzy and Humble), robot_state_publisher's /tf rate, a tag detector's latency, and F1TENTH's
joy_teleop, ackermann_mux, VESC and vesc_to_odom. Each rule is the upstream node's (named in
the modules' docstrings), so a rehearsal on a twin fails where the robot would."""

from __future__ import annotations

import math

import numpy as np
import pytest

from refine_ros.robots.arm.servo_stack import (
    TWIST,
    Detections,
    RobotStatePublisher,
    Servo,
    ServoConfig,
)
from refine_ros.robots.rc_car.f1tenth_stack import (
    DRIVE,
    TELEOP,
    AckermannMux,
    Drive,
    F1tenthStack,
    JoyTeleop,
    Vesc,
    VescConfig,
    VescToOdom,
)


# ---- MoveIt Servo ------------------------------------------------------------------------------------
def jazzy(**kw) -> Servo:
    servo = Servo(ServoConfig(release="jazzy", **kw))
    servo.switch_command_type(TWIST)
    return servo


def test_servo_judges_staleness_by_the_twists_stamp_not_its_arrival():
    servo = jazzy(command_in_type="speed_units")
    assert servo.twist([0.1, 0, 0], stamp=10.0) is None
    assert np.allclose(servo.velocity(10.05), [0.1, 0, 0])
    assert np.allclose(servo.velocity(10.1001), 0), "0.1 s after the stamp: halted"
    servo.twist([0.1, 0, 0], stamp=9.0)  # arrives now, stamped by a clock one second behind
    assert np.allclose(servo.velocity(10.11), 0), "a late stamp is stale on arrival"
    servo.twist([0.1, 0, 0], stamp=11.12)  # arrives at 10.12, stamped by a clock one second ahead
    assert np.allclose(servo.velocity(11.0), [0.1, 0, 0]), "a twist from the future is executed for 1.1 s"
    assert np.allclose(servo.velocity(11.2201), 0)


def test_jazzy_servo_takes_twists_only_switched_to_twist_and_unpaused_and_is_silent_while_paused():
    servo = Servo(ServoConfig(release="jazzy", command_in_type="speed_units"))
    assert servo.twist([0.1, 0, 0], 1.0) == "command type not TWIST" and np.allclose(servo.velocity(1.01), 0)
    assert servo.switch_command_type(TWIST) and not servo.switch_command_type(7)
    servo.set_paused(True)
    assert servo.twist([0.1, 0, 0], 2.0) == "paused" and servo.status() is None
    servo.set_paused(False)
    assert servo.twist([0.1, 0, 0], 3.0) is None and servo.status() == 0


def test_humble_servo_runs_after_start_and_reports_status_while_paused():
    servo = Servo(ServoConfig(release="humble", command_in_type="speed_units"))
    assert servo.status() is None and servo.twist([0.1, 0, 0], 1.0) == "not started"
    servo.start()
    servo.set_paused(True)
    assert servo.status() == 0, "Humble publishes its status before its paused check"
    assert servo.twist([0.1, 0, 0], 2.0) == "paused"


def test_unitless_twists_are_scaled_by_scale_linear_and_humble_skips_components_above_one():
    assert np.allclose(jazzy().velocity(0.0), 0)
    servo = jazzy()  # unitless, scale.linear 0.4: the releases' default
    servo.twist([0.1, 0, 0], 5.0)
    assert np.allclose(servo.velocity(5.01), [0.04, 0, 0]), "0.1 m/s sent unitless moves at 0.04 m/s"
    humble = Servo(ServoConfig(release="humble"))
    humble.start()
    assert humble.twist([1.5, 0, 0], 5.0) == "component > 1 or NaN" and np.allclose(humble.velocity(5.01), 0)
    capped = jazzy(command_in_type="speed_units", scale_linear=0.4)
    capped.twist([0.6, 0.8, 0], 1.0)
    assert math.isclose(float(np.linalg.norm(capped.velocity(1.01))), 0.4)
    assert capped.parameters()["moveit_servo.command_in_type"] == "speed_units"


def test_robot_state_publisher_publishes_at_most_every_50_ms_stamped_with_the_joint_state():
    rsp = RobotStatePublisher(20.0)
    stamps_30hz = [i / 30 for i in range(10)]
    assert [round(s, 4) for s in stamps_30hz if rsp.due(s)] == [round(i / 30, 4) for i in range(0, 10, 2)]
    rsp = RobotStatePublisher(20.0)
    assert sum(rsp.due(i / 500) for i in range(500)) == 20, "UR's 500 Hz joint states: /tf at 20 Hz"


def test_a_tag_pose_arrives_one_detection_later_stamped_with_its_camera_frame():
    det = Detections(latency=0.05)
    det.push(1.0, "tag@1.0")
    assert det.due(1.04) == [] and det.due(1.05) == [(1.0, "tag@1.0")]


# ---- F1TENTH ----------------------------------------------------------------------------------------
def test_joy_teleop_sends_zero_teleop_while_no_button_is_held_and_nothing_while_rb_is():
    joy = JoyTeleop()
    assert joy.teleop([0] * 12, [0.0] * 6) == Drive(0.0, 0.0)
    assert joy.teleop([0, 0, 0, 0, 0, 1] + [0] * 6, [0.5] * 6) is None
    assert joy.teleop([0, 0, 0, 0, 1] + [0] * 7, [0.0, 0.2, -0.5, 0, 0, 0]) == Drive(1.0, -0.17)


def test_the_mux_passes_drive_only_while_teleop_is_expired_and_never_sends_a_stop():
    mux = AckermannMux()
    assert mux.forward(DRIVE, Drive(1.0), 0.0) == Drive(1.0)
    assert mux.forward(TELEOP, Drive(0.0), 0.05) == Drive(0.0)
    assert mux.forward(DRIVE, Drive(1.0), 0.1) is None, "teleop (priority 100) is live"
    assert mux.forward(DRIVE, Drive(1.0), 0.26) == Drive(1.0), "teleop expired 0.2 s after its last message"


def test_the_vesc_keeps_the_last_speed_until_its_firmware_timeout_then_releases_the_motor():
    vesc = Vesc(VescConfig(timeout_s=1.0, timeout_brake_current=0.0))
    vesc.command(Drive(0.8, 0.1), 2.0)
    assert vesc.in_effect(2.99).speed == 0.8 and not vesc.in_effect(2.99).timed_out
    after = vesc.in_effect(3.01)
    assert after.timed_out and after.speed == 0.0 and after.brake_current == 0.0, "released: the car coasts"


def test_vesc_to_odom_is_silent_until_the_first_servo_command_and_negates_the_erpm():
    stack = F1tenthStack(VescConfig(), wheelbase=0.25)
    assert stack.odometry(1.0, 0.0) is None
    for t in (0.0, 0.02, 0.04, 0.06):  # the stock pad idles: its zero teleop wakes vesc_to_odom
        stack.joy([0] * 12, [0.0] * 6, t)
    assert stack.odometry(0.0, 0.08).speed == 0.0
    assert not stack.drive(Drive(1.0, 0.2), 0.1), "the idle pad's zero teleop blocks /drive"
    for t in (0.1, 0.2, 0.3, 0.4):  # RB held: teleop stops, /drive passes 0.2 s later
        stack.joy([0, 0, 0, 0, 0, 1] + [0] * 6, [0.0] * 6, t)
    assert not stack.drive(Drive(1.0, 0.2), 0.2) and stack.drive(Drive(1.0, 0.2), 0.3)
    odom = stack.odometry(1.0, 0.32)
    assert odom.speed == pytest.approx(-1.0), "(-ERPM - offset) / gain: forward reads negative"
    assert odom.yaw_rate == pytest.approx(-1.0 * math.tan(0.2) / 0.25), "and a left turn turns right"


def test_vesc_to_odom_integrates_its_own_dead_reckoning():
    odo = VescToOdom(gain=4614.0, wheelbase=0.25)
    odo.state(-4614.0, 0.0, 0.0)  # motor ERPM negative: vesc_to_odom reads +1 m/s
    state = odo.state(-4614.0, 0.0, 1.0)
    assert (state.x, state.y, state.yaw) == pytest.approx((1.0, 0.0, 0.0))
    assert odo.state(-100.0, 0.0, 1.02).speed == 0.0, "below 0.05 m/s reads zero"
