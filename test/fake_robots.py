"""Fake hardware for the ROS tests: the only mocks in them stand in for physical devices.

`FakeArmDriver` is an arm's driver topics: joint states, the end-effector and handle poses at
100 Hz; it integrates the servo controller's twist commands into the end-effector pose, so a
teleoperated arm moves and its observations show it. `FakeGamepad` is the ROS joy driver's
`sensor_msgs/Joy` at 50 Hz with whatever axes and buttons a test holds. `call` is an operator
calling a service.
"""

from __future__ import annotations

import threading

from geometry_msgs.msg import PoseStamped, TwistStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Float64, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_ros import qos
from refine_ros.messages import unpack_json


class FakeArmDriver(Node):
    """Driver topics of the arm profile (its bridge's default topic names)."""

    def __init__(self, context, start=(0.0, 0.6, 0.2), handle=(0.05, 0.7, 0.15)) -> None:
        super().__init__("fake_arm_driver", context=context)
        self.lock = threading.Lock()
        self.ee = list(start)
        self.handle_xyz = tuple(handle)
        self.velocity = (0.0, 0.0, 0.0)
        self.hardware_commands = 0
        self.gripper: list[float] = []
        self.actions = 0
        self.pub_joints = self.create_publisher(JointState, "/joint_states", qos.SENSOR)
        self.pub_ee = self.create_publisher(PoseStamped, "/ee_pose", qos.SENSOR)
        self.pub_handle = self.create_publisher(PoseStamped, "/handle_pose", qos.SENSOR)
        self.create_subscription(TwistStamped, "/servo_node/delta_twist_cmds", self._on_twist, qos.COMMAND)
        self.create_subscription(Float64, "/gripper_command", self._on_gripper, qos.COMMAND)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_action, qos.CONTROL)
        self.confirm = self.create_client(Trigger, "safety/confirm_episode")
        self.period = 0.01
        self.create_timer(self.period, self._tick)

    def _on_twist(self, msg: TwistStamped) -> None:
        with self.lock:
            self.hardware_commands += 1
            v = msg.twist.linear
            self.velocity = (v.x, v.y, v.z)

    def _on_gripper(self, msg: Float64) -> None:
        with self.lock:
            self.hardware_commands += 1
            self.gripper.append(msg.data)

    def _on_action(self, _msg) -> None:
        self.actions += 1

    def position(self) -> tuple[float, float, float]:
        with self.lock:
            return tuple(self.ee)

    def _tick(self) -> None:
        with self.lock:
            self.ee = [p + v * self.period for p, v in zip(self.ee, self.velocity, strict=True)]
            ee = tuple(self.ee)
        stamp = self.get_clock().now().to_msg()
        joints = JointState(name=["finger_joint_1", "finger_joint_2"], position=[0.04, 0.04])
        joints.header.stamp = stamp
        self.pub_joints.publish(joints)
        for pub, xyz in ((self.pub_ee, ee), (self.pub_handle, self.handle_xyz)):
            pose = PoseStamped()
            pose.header.stamp, pose.header.frame_id = stamp, "base_link"
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = xyz
            pose.pose.orientation.w = 1.0
            pub.publish(pose)


class FakeGamepad(Node):
    """A game controller as the ROS joy driver publishes it (6 axes, 15 buttons)."""

    def __init__(self, context, topic: str = "joy") -> None:
        super().__init__("fake_gamepad", context=context)
        self.lock = threading.Lock()
        self.axes = [0.0] * 6
        self.buttons = [0] * 15
        self.pub = self.create_publisher(Joy, topic, qos.SENSOR)
        self.create_timer(0.02, self._tick)

    def hold(self, axes: dict[int, float] | None = None, buttons: dict[int, int] | None = None) -> None:
        with self.lock:
            for i, v in (axes or {}).items():
                self.axes[i] = v
            for i, v in (buttons or {}).items():
                self.buttons[i] = v

    def _tick(self) -> None:
        with self.lock:
            msg = Joy(axes=list(self.axes), buttons=list(self.buttons))
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub.publish(msg)


class DemoStatus(Node):
    """The operator's view of the demo recorder: its status and its three services."""

    def __init__(self, context) -> None:
        super().__init__("operator", context=context)
        self.states: list[dict] = []
        self.changed = threading.Condition()
        self.create_subscription(String, "demo/status", self._on_status, qos.LATCHED)
        self.start = self.create_client(Trigger, "demo/start")
        self.stop = self.create_client(Trigger, "demo/stop")
        self.label = self.create_client(SetBool, "demo/label")

    def _on_status(self, msg: String) -> None:
        with self.changed:
            self.states.append(unpack_json(msg))
            self.changed.notify_all()

    def wait_for(self, state: str, timeout: float = 30.0) -> dict:
        with self.changed:
            ok = self.changed.wait_for(lambda: self.states and self.states[-1]["state"] == state, timeout)
            assert ok, f"demo recorder never reached {state!r}: {self.states[-3:]}"
            return self.states[-1]


def call(client, request, timeout: float = 20.0):
    """Call a service from a test thread (the client's node spins elsewhere)."""
    assert client.wait_for_service(timeout_sec=timeout), f"{client.srv_name} never came up"
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), f"no answer from {client.srv_name}"
    return future.result()


def record_arm_demonstration(context, run_dir, *, seconds: float = 2.0, forward: float = 0.6) -> str:
    """The real-robot checklist's first step, as an operator does it: `refine up
    arm_real_record_demo --live` in a process of its own, a gamepad held forward with the
    dead-man button down, then demo/start, demo/stop and demo/label true. The caller spins a
    `FakeArmDriver` in `context`. Returns the process's output (it ends once the take is
    stored)."""
    import os
    import subprocess
    import sys
    import time

    from refine_ros.spin import NodeSpinner
    from refine_ros.teleop import BUTTON_LEFT_SHOULDER, LEFT_Y

    proc = subprocess.Popen(
        [sys.executable, "-m", "refine_core.cli", "up", "arm_real_record_demo", "--run", str(run_dir), "--live",
         "--timeout", "180"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    pad, operator = FakeGamepad(context), DemoStatus(context)
    spinner = NodeSpinner([pad, operator], context).start()
    try:
        pad.hold(axes={LEFT_Y: forward}, buttons={BUTTON_LEFT_SHOULDER: 1})
        deadline = time.monotonic() + 90.0
        while True:  # the bridge's first observations (and their columns) take a moment
            started = call(operator.start, Trigger.Request(), timeout=90.0)
            if started.success or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert started.success, started.message
        time.sleep(seconds)
        stopped = call(operator.stop, Trigger.Request())
        assert stopped.success, stopped.message
        kept = call(operator.label, SetBool.Request(data=True))
        assert kept.success, kept.message
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        return out
    finally:
        spinner.stop()
        pad.destroy_node()
        operator.destroy_node()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
