"""Faults on the live robot graph, every node its own process over real DDS (the fake drivers
speak the robot stacks' own message types): after each fault the driver's command topic must
show the exact stop, nothing moving after the time the rules allow, and no motion again until
the operator confirms. The same runs make the fault matrix of `refine bench --json`."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from refine_ros.bench import ros_env  # noqa: E402
from refine_ros.bench.faults import FAULTS, ROBOTS, applies, run_fault  # noqa: E402

CELLS = [(robot, fault) for robot in ROBOTS for fault in FAULTS if applies(robot, fault)]
STOP = {"arm": (0.0,) * 6, "car": (0.0, 0.0)}
"""The exact stop on the driver topic: the arm's TwistStamped all zero, the car's
AckermannDriveStamped speed 0 and steering angle 0."""


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("robot, fault", CELLS, ids=[f"{r}-{f}" for r, f in CELLS])
def test_a_fault_leaves_the_robot_stopped_until_the_operator_confirms(tmp_path, robot, fault):
    """Issue 16, item 5 (and the bullets it proves end to end: stops that reverse or hold,
    no stop on shutdown or driver loss, motion resuming by itself, limits changed at run time,
    a volatile e-stop, Servo's refusals)."""
    result = run_fault(robot, fault, {**ros_env(), "PYTHONUNBUFFERED": "1"}, tmp_path)
    assert result.error is None, result.error
    assert result.unsafe == 0, result.reasons
    if fault == "param_change":
        assert result.commands > 0
        return
    if fault == "servo_rejects":
        assert result.rejected_steps > 0, "the steps Servo refused are logged as rejected"
        return
    assert result.last_command == STOP[robot], "the last command the driver got is the exact stop"
    assert result.stop_latency_s is not None
    assert not result.resumed_without_confirmation
