"""The bridge's own command watchdog and its start-up grace, with each bridge as the process
`ros2 launch` starts (its console script and a parameters file) and this test standing where
the driver and the safety node would be, over real DDS.

- The last hop stops by itself: safe commands that stop (the safety node SIGKILLed, hung, cut
  off) make the bridge send the driver's exact stop within its command timeout, and on every
  control tick after, until safe commands are back.
- A driver that has not spoken yet is waited for, not reported lost: no "no driver feedback"
  error in the first seconds of a launch, when the drivers start beside the bridge.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]

BRIDGES = {
    # bridge: (its parameters, the driver's command type and topic, the driver's feedback)
    "arm_bridge": ({"command_interface": "twist", "servo_topic": "/watchdog_test/twist", "gripper_interface": "none",
                    "max_speed": 0.1, "ee_timeout": 0.15, "handle_timeout": 0.25}, "twist", "/watchdog_test/twist",
                   "joints"),
    "rc_car_bridge": ({"command_type": "ackermann", "command_topic": "/watchdog_test/drive", "wheel_source": "none",
                       "max_speed": 1.0, "max_steering_angle": 0.34, "speed_to_sim": 44.4},
                      "ackermann", "/watchdog_test/drive", "odom"),
}
MOVING = {"arm_bridge": (0.5, 0.0, 0.0, 1.0), "rc_car_bridge": (0.0, 0.6, 0.0)}
STOP = {"arm_bridge": (0.0, 0.0, 0.0, 1.0), "rc_car_bridge": (0.0, 0.0, 1.0)}


def start_bridge(name: str, parameters: dict, tmp_path: Path) -> subprocess.Popen:
    """The bridge's process; its output lines gather in `proc.lines` as they come."""
    from refine_ros.bench import ros_env

    params = tmp_path / f"{name}.yaml"
    params.write_text(yaml.safe_dump({f"/{name}": {"ros__parameters": parameters}}))
    proc = subprocess.Popen([str(Path(sys.executable).parent / name), "--ros-args", "-r", f"__node:={name}",
                             "--params-file", str(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    proc.lines = []
    threading.Thread(target=lambda: proc.lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    return proc


def finish(proc: subprocess.Popen) -> str:
    proc.send_signal(2)
    proc.wait(timeout=20)
    time.sleep(0.2)  # the reader thread takes the last lines
    return "".join(proc.lines)


class Rig:
    """The driver (feedback at 50 Hz, commands recorded) and the safety node (safe actions)."""

    def __init__(self, context, bridge: str) -> None:
        from geometry_msgs.msg import TwistStamped
        from nav_msgs.msg import Odometry
        from rclpy.node import Node
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String

        from refine_ros.bringup.spin import NodeSpinner
        from refine_ros.wire import qos

        _, kind, topic, feedback = BRIDGES[bridge]
        self.node = Node("watchdog_rig", context=context)
        self.lock = threading.Lock()
        self.commands: list[tuple[float, float]] = []  # time, speed (arm: |v|; car: speed)
        if kind == "twist":
            self.node.create_subscription(TwistStamped, topic, self._on_twist, qos.COMMAND)
        else:
            from ackermann_msgs.msg import AckermannDriveStamped

            self.node.create_subscription(AckermannDriveStamped, topic, self._on_drive, qos.COMMAND)
        self.feedback = feedback
        self.pub_joints = self.node.create_publisher(JointState, "/joint_states", qos.STATE)
        self.pub_odom = self.node.create_publisher(Odometry, "/odom", qos.STATE)
        self.pub_safe = self.node.create_publisher(Float64MultiArray, "refine/safe_action", qos.CONTROL)
        self.bridge_stops: list[float] = []  # when the bridge said it stopped the robot itself
        self.node.create_subscription(String, "refine/bridge_stop",
                                      lambda _msg: self.bridge_stops.append(time.monotonic()), qos.STATE)
        self.speak = True
        self.safe: tuple[float, ...] | None = None
        self.label = "policy"
        self.step = 0
        self.node.create_timer(0.02, self._tick)
        self.spinner = NodeSpinner([self.node], context).start()

    def _on_twist(self, msg) -> None:
        v = msg.twist.linear
        with self.lock:
            self.commands.append((time.monotonic(), abs(v.x) + abs(v.y) + abs(v.z)))

    def _on_drive(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), msg.drive.speed))

    def _tick(self) -> None:
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState

        from refine_ros.wire.messages import pack_vector

        if self.speak:
            if self.feedback == "joints":
                msg = JointState(name=["j"], position=[0.0])
                msg.header.stamp = self.node.get_clock().now().to_msg()
                self.pub_joints.publish(msg)
            else:
                msg = Odometry()
                msg.header.stamp = self.node.get_clock().now().to_msg()
                msg.pose.pose.orientation.w = 1.0
                self.pub_odom.publish(msg)
        if self.safe is not None:
            self.pub_safe.publish(pack_vector(1, self.step, self.safe, label=self.label))
            self.step += 1

    def move_until_the_driver_moves(self, proc: subprocess.Popen, safe: tuple[float, ...]) -> None:
        """Send `safe` as the safety node would until the bridge has moved the driver."""
        deadline = time.monotonic() + 60
        self.safe = safe
        while not any(v > 0 for _, v in self.since(0.0)):
            assert time.monotonic() < deadline and proc.poll() is None, "the bridge never moved the robot"
            time.sleep(0.05)

    def since(self, t: float) -> list[tuple[float, float]]:
        with self.lock:
            return [(s - t, v) for s, v in self.commands if s >= t]

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.parametrize("bridge", list(BRIDGES))
def test_the_bridge_stops_the_robot_itself_when_safe_commands_stop(context, tmp_path, bridge):
    parameters = BRIDGES[bridge][0]
    proc = start_bridge(bridge, parameters, tmp_path)
    rig = Rig(context, bridge)
    try:
        rig.move_until_the_driver_moves(proc, MOVING[bridge])
        time.sleep(0.5)
        rig.safe = None  # the safety node is gone: nothing more on refine/safe_action
        t_f = time.monotonic()
        time.sleep(1.0)
        after = rig.since(t_f)
        rig.safe = MOVING[bridge]  # a frozen safety node resumes with its episode still confirmed ...
        time.sleep(0.5)
        rig.safe, rig.label = STOP[bridge], "deadman"  # ... and a stop that is no answer (it keeps the
        time.sleep(0.2)                                 # confirmation) does not release the bridge ...
        rig.safe, rig.label = MOVING[bridge], "policy"
        time.sleep(0.5)
        held = rig.since(t_f + 1.0)
        said = list(rig.bridge_stops)
        rig.safe, rig.label = STOP[bridge], "bridge"  # ... until it has heard of the stop and answered
        time.sleep(0.3)
        rig.safe, rig.label = MOVING[bridge], "policy"  # then a confirmed episode moves the robot again
        time.sleep(0.5)
        back = rig.since(t_f + 2.5)
        repeated = [t for t in rig.bridge_stops if t > t_f + 2.5]
    finally:
        rig.close()
        out = finish(proc)
    stops = [(t, v) for t, v in after if v == 0.0]
    assert stops, f"no stop reached the driver after the safety node went silent\n{out[-2000:]}"
    # the last safe command left up to one period (20 ms) before t_f; the bridge ticks at 50 Hz;
    # the margin beyond is for a loaded machine (two cores shared by many processes)
    timeout = 0.1 if bridge == "arm_bridge" else 0.2  # the bridges' command_timeout
    assert timeout - 0.04 < stops[0][0] < timeout + 0.02 + 0.2, f"the first stop came {stops[0][0]:.3f} s after"
    assert all(v == 0.0 for t, v in after if t > stops[0][0]), "motion after the watchdog's stop"
    assert len(stops) >= 15, f"only {len(stops)} stops in 1 s: the stop is not repeated every control tick"
    assert held and all(v == 0.0 for _, v in held), "a moving command before the safety node answered the stop"
    assert any(v > 0 for _, v in back), "the safety node answered, then commands: the bridge passes them"
    assert f"no safe command for {timeout:.3f} s" in out and "safe commands are back" in out, out[-2000:]
    # said when it happened, and again every second while unanswered (1.0 s to 2.2 s after it: twice
    # more); not after the answer
    assert len(said) >= 2 and said[0] - t_f < timeout + 0.2, [round(t - t_f, 2) for t in said]
    assert 0.8 < said[1] - said[0] < 1.4, [round(t - t_f, 2) for t in said]
    assert not repeated, f"the bridge still said it stopped after the safety node's answer: {repeated}"


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.parametrize("bridge", list(BRIDGES))
def test_a_driver_that_has_not_spoken_yet_is_waited_for_not_reported_lost(context, tmp_path, bridge):
    """As in the first seconds of every real launch: the bridge is up before its driver."""
    proc = start_bridge(bridge, BRIDGES[bridge][0], tmp_path)
    rig = Rig(context, bridge)
    rig.speak = False
    try:
        deadline = time.monotonic() + 120  # the bridge's imports take seconds on a loaded machine
        while not any("waiting for the driver's first feedback" in line for line in proc.lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(proc.lines)[-2000:]
            time.sleep(0.1)
        time.sleep(3.0)  # the driver starts later than the bridge: well past driver_timeout (0.2 s)
        rig.speak = True
        time.sleep(1.0)
    finally:
        rig.close()
        out = finish(proc)
    assert proc.returncode == 0, out[-2000:]
    assert "waiting for the driver's first feedback" in out, out[-2000:]
    assert "[ERROR]" not in out and "no driver feedback" not in out, out[-2000:]


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.parametrize("bridge", list(BRIDGES))
def test_a_bridge_that_was_frozen_moves_nothing_until_the_safety_node_has_acknowledged(context, tmp_path, bridge):
    """SIGSTOP the bridge while the safety node goes on sending moving commands, then SIGCONT:
    the newest of them waited in the bridge's queue, and whichever the executor takes first,
    that command or the control tick, the robot stays stopped until the safety node has heard
    of the stop and sent its own (the command guard stops the robot meanwhile)."""
    import signal

    proc = start_bridge(bridge, BRIDGES[bridge][0], tmp_path)
    rig = Rig(context, bridge)
    try:
        rig.move_until_the_driver_moves(proc, MOVING[bridge])
        time.sleep(0.3)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.6)  # the safety node, still confirmed, keeps sending moving commands
        t_resume = time.monotonic()
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.8)
        held = rig.since(t_resume)
        rig.safe, rig.label = STOP[bridge], "bridge"  # the safety node heard of the stop
        time.sleep(0.3)
        rig.safe, rig.label = MOVING[bridge], "policy"
        time.sleep(0.5)
        back = rig.since(t_resume + 1.1)
    finally:
        proc.send_signal(signal.SIGCONT)
        rig.close()
        out = finish(proc)
    assert held and all(v == 0.0 for _, v in held), f"moving commands after the bridge resumed: {held[:5]}\n{out[-1500:]}"
    assert "the bridge stops the robot itself" in out, out[-2000:]
    assert any(v > 0 for _, v in back), "the safety node sent its stop, then commands: the bridge passes them"
