"""The command guard: the exact stop goes to the driver when the command stream stops after a
moving command, from a process of its own (the bridge killed or hung cannot send it). The rule
without DDS, then the `command_guard` executable between real processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from refine_ros.command_guard import Guard, moving


def test_motion_is_any_nonzero_velocity_and_a_car_moves_by_its_speed_alone():
    assert not moving("twist_stamped", [0.0] * 6) and moving("twist_stamped", [0, 0, 0, 0, 0, 1e-9])
    assert moving("joint_velocities", [0.0, float("nan")]) and not moving("joint_velocities", [0.0, 0.0])
    assert not moving("ackermann", [0.0, 0.3]), "straight or not, speed 0 is a stop"
    assert moving("ackermann", [0.4, 0.0]) and moving("ackermann", [-0.1, 0.0])


def test_the_stop_goes_out_after_the_timeout_repeated_then_held_while_silent():
    g = Guard(timeout=0.15, repeats=3, hold=0.1)
    assert not g.tick(0.0), "nothing heard: nothing to guard (a dry run stays silent)"
    g.heard(True, 0.0)
    assert not g.tick(0.1) and not g.tick(0.15)
    assert [g.tick(t) for t in (0.16, 0.17, 0.18, 0.19, 0.2)] == [True, True, True, False, False]
    assert g.trips == 1
    g.heard(False, 0.2)  # its own stop, heard back: still silent from the bridge
    assert [g.tick(t) for t in (0.25, 0.28, 0.3)] == [False, True, False], "then one stop per hold"
    g.heard(True, 0.31)  # a late command of the dead bridge ...
    assert not g.tick(0.4) and g.tick(0.47), "... is overridden one timeout later"


def test_a_stream_that_ends_with_a_stop_needs_no_guard_and_one_that_resumes_cancels_it():
    g = Guard(timeout=0.1, repeats=5)
    g.heard(True, 0.0)
    g.heard(False, 0.02)  # the bridge stopped the robot itself, then went quiet
    assert not any(g.tick(t) for t in (0.2, 0.5, 3.0))
    g.heard(True, 4.0)
    assert not g.tick(4.2), "a late tick (this process was not running) first reads what arrived"
    assert g.tick(4.205) and g.tick(4.21)
    g.heard(True, 4.22)  # the bridge is back (a restart): it is in charge
    assert not g.tick(4.23)


def test_a_guard_that_was_not_running_reads_the_queued_commands_before_it_judges_silence():
    g = Guard(timeout=0.15, repeats=3)
    for t in (0.0, 0.01, 0.02):
        g.heard(True, t)
        g.tick(t)
    # the process was descheduled for 0.3 s while the bridge kept sending: its timer runs first
    assert not g.tick(0.32), "no stop before the commands queued meanwhile are read"
    g.heard(True, 0.32)
    assert not g.tick(0.33) and g.trips == 0
    # a guard starved on every tick still stops, one tick later at most
    starved = [g.tick(t) for t in (0.6, 0.9, 1.2)]
    assert starved[:2] == [False, True] and g.trips == 1


@pytest.mark.parametrize("bad", [{"timeout": 0.0}, {"timeout": float("nan")}, {"timeout": 0.1, "repeats": 0}])
def test_a_guard_that_could_never_stop_is_refused(bad):
    with pytest.raises(ValueError):
        Guard(**bad)


# ---- the node, as its own process --------------------------------------------------------------------
@pytest.mark.ros
@pytest.mark.parametrize("command_type", ["twist_stamped", "joint_velocities", "ackermann"])
def test_the_guard_process_stops_the_driver_when_the_bridge_goes_silent(context, command_type):
    """A stand-in bridge (this process) streams a moving command at 50 Hz and goes silent; the
    `command_guard` executable sends the driver's exact stop, in the driver's type, about
    `timeout` later, `repeats` times; nothing before the silence, nothing after."""
    import rclpy
    from rclpy.node import Node
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    from refine_ros.bench import ros_env
    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.nodes.command_guard import _TYPES, motion_fields
    from refine_ros.wire import qos

    package, name = _TYPES[command_type]
    msg_type = getattr(__import__(package, fromlist=[name]), name)
    topic = f"/guard_test/{command_type}"
    node = Node("guard_test_bridge", context=context)
    pub = node.create_publisher(msg_type, topic, qos.COMMAND)
    heard: list[tuple[float, list[float], object]] = []
    published: list[float] = []
    lock = threading.Lock()

    def on_msg(msg):
        with lock:
            heard.append((time.monotonic(), motion_fields(command_type, msg), msg))

    # the observer keeps every message (a driver's depth-1 queue would keep the last stop only,
    # which is all a driver needs; counting the burst needs them all, however late this thread runs)
    observer_qos = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(msg_type, topic, on_msg, observer_qos)
    spinner = NodeSpinner([node], context).start()
    guard = subprocess.Popen([str(Path(sys.executable).parent / "command_guard"), "--ros-args",
                              "-p", f"command_type:={command_type}", "-p", f"command_topic:={topic}",
                              "-p", "timeout:=0.15", "-p", "repeats:=4", "-p", "hold:=0.5"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    try:
        deadline = time.monotonic() + 60
        while pub.get_subscription_count() < 2:  # ours and the guard's
            assert time.monotonic() < deadline and guard.poll() is None, "the guard never subscribed"
            time.sleep(0.05)
        time.sleep(0.5)
        for _ in range(50):
            msg = msg_type()
            if command_type == "twist_stamped":
                msg.header.frame_id = "base_link"
                msg.header.stamp = node.get_clock().now().to_msg()
                msg.twist.linear.x = 0.05
            elif command_type == "joint_velocities":
                msg.data = [0.1, -0.2, 0.0]
            else:
                msg.drive.speed, msg.drive.steering_angle = 0.6, 0.1
            pub.publish(msg)
            published.append(time.monotonic())
            time.sleep(0.02)
        silent_at = time.monotonic()
        time.sleep(1.5)
    finally:
        guard.send_signal(2)
        out = guard.communicate(timeout=20)[0]
        spinner.stop()
        node.destroy_node()
        rclpy.try_shutdown(context=context)
    with lock:
        ours = [values for _, values, _ in heard if moving(command_type, values)]
        stops = [(t, values, msg) for t, values, msg in heard if not moving(command_type, values)]
    assert len(ours) >= 40, "our commands reached the topic"
    # a loaded machine can pause this test's publishing loop past the guard's timeout, and then
    # the guard is right to stop: it may speak before the silence only after such a gap
    for t, _, _ in stops:
        if t <= silent_at:
            gap = t - max(p for p in published if p <= t)
            assert gap >= 0.1, f"the guard spoke {gap:.3f} s after a command, while commands flowed"
    after = [(t - silent_at, values, msg) for t, values, msg in stops if t > silent_at]
    burst = [x for x in after if x[0] < after[0][0] + 0.3]  # the hold's next stop comes 0.5 s later
    assert len(burst) == 4 and 2 <= len(after) - 4 <= 4, ([round(x[0], 3) for x in after], out)  # then one per 0.5 s
    assert all(not moving(command_type, v) and all(x == 0.0 for x in v) for _, v, _ in after), after
    assert 0.1 < after[0][0] < 0.15 + 0.25, f"the first stop came {after[0][0]:.3f} s after the silence"
    last = after[-1][2]
    if command_type == "twist_stamped":
        assert last.header.frame_id == "base_link" and last.header.stamp.sec > 0, "Servo judges the stamp"
    if command_type == "joint_velocities":
        assert list(last.data) == [0.0, 0.0, 0.0]
    assert "sending the stop" in out, out
    # it says when it is matched both ways (this test's node is the bridge and the driver)
    assert "hears 1 publisher(s)" in out and "its stop reaches 1 subscriber(s)" in out, out


def test_a_live_forward_velocity_arm_is_refused_in_one_process():
    """The guard must outlive the bridge where the stack holds the last command: `refine up`
    without --processes (every node one process) refuses such a live run, not a dry run and not
    MoveIt Servo (which stops by itself)."""
    from refine_ros.bringup.up import UpOptions, guard_needs_its_own_process, plan_profile

    velocity = ["arm_bridge.command_interface=forward_velocity", "arm_bridge.arm_joints=[j1, j2]"]
    live = plan_profile("arm_real", UpOptions(live=True, sets=velocity))
    why = guard_needs_its_own_process(live)
    assert why is not None and "--processes" in why and "holds its last command" in why
    assert guard_needs_its_own_process(plan_profile("arm_real", UpOptions(live=False, sets=velocity))) is None
    assert guard_needs_its_own_process(plan_profile("arm_real", UpOptions(live=True))) is None


@pytest.mark.ros
def test_the_guard_over_udp_matches_a_shared_memory_node_started_after_it_within_1_5_s():
    """The guard runs over UDP only; a node on shared memory (this process, with the packaged
    profile) that starts after it is matched only at the guard's next discovery announcement
    (the one that was up first announces the match). Fast DDS's default period is 3 s, and the
    guard matched the bridge or the driver up to 3.06 s late (8 of 14 car rigs over 1 s), a
    window where a dead bridge goes unguarded; the packaged profiles' 0.5 s bounds it (0.5 s in
    this process's profile alone: up to 2.98 s). Three new participants, one after another,
    each a bridge and a driver on the guarded topic."""
    import rclpy
    from rclpy.context import Context
    from rclpy.node import Node
    from std_msgs.msg import Float64MultiArray

    from refine_ros.bench import ros_env
    from refine_ros.wire import qos

    topic = "/guard_match_test/commands"
    guard = subprocess.Popen([str(Path(sys.executable).parent / "command_guard"), "--ros-args",
                              "-p", "command_type:=joint_velocities", "-p", f"command_topic:={topic}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    lines: list[tuple[float, str]] = []
    reader = threading.Thread(target=lambda: [lines.append((time.monotonic(), line)) for line in guard.stdout],
                              daemon=True)
    reader.start()

    def wait_line(text: str, since: float, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and guard.poll() is None:
            for t, line in list(lines):
                if t >= since and text in line:
                    return t
            time.sleep(0.01)
        return None

    delays = []
    try:
        assert wait_line("guarding", 0.0, 60.0) is not None, "".join(line for _, line in lines)
        time.sleep(1.0)  # past the guard's first announcements, as the graph's later nodes are
        for _ in range(3):
            started = time.monotonic()
            context = Context()
            rclpy.init(context=context)
            node = Node("late_bridge_and_driver", context=context)
            node.create_publisher(Float64MultiArray, topic, qos.COMMAND)
            node.create_subscription(Float64MultiArray, topic, lambda _msg: None, qos.COMMAND)
            matched = wait_line("hears 1 publisher(s) of " + topic + ", its stop reaches 1 subscriber(s)", started, 10.0)
            node.destroy_node()
            rclpy.try_shutdown(context=context)
            assert matched is not None, "".join(line for _, line in lines)
            delays.append(matched - started)
            assert wait_line("hears 0 publisher(s)", matched, 30.0) is not None, "the guard saw it go"
    finally:
        guard.send_signal(2)
        guard.wait(timeout=20)
    assert max(delays) < 1.5, f"matched {[round(d, 2) for d in delays]} s after the node started"
