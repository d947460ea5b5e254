"""Fake hardware for the ROS tests: the only mocks in them stand in for physical devices.

`FakeArmDriver` runs the arm's drivers (`refine_ros.robots.fake_driver arm`: MoveIt Servo as of Jazzy,
a Robotiq gripper action, TF and joint states, the genuine message types) as a process of its
own, as a real arm's stack is, and watches it from the test's process: where TF puts the tool,
how many servo commands reached it, the knuckle it reports. `FakeGamepad` is the ROS joy
driver's `sensor_msgs/Joy` at 50 Hz with whatever axes and buttons a test holds. `call` is an
operator calling a service.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from geometry_msgs.msg import TwistStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState, Joy
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_ros.robots.arm.tf_buffer import TfBuffer
from refine_ros.wire import qos
from refine_ros.wire.messages import unpack_json


class FakeArmDriver(Node):
    """The arm's drivers in their own process, and this node watching them: `position()` is the
    tool in base_link from TF, `hardware_commands` the servo commands that reached the driver,
    `knuckle` the gripper joint it reports, `actions` the policy's commands; `confirm` is the
    operator's confirm button. `destroy_node` also ends the driver process."""

    def __init__(self, context, **parameters) -> None:
        super().__init__("fake_arm_watch", context=context)
        from tf2_msgs.msg import TFMessage

        self.lock = threading.Lock()
        self.tf = TfBuffer()
        self.hardware_commands = 0
        self.knuckle: float | None = None
        self.actions = 0
        self._log = tempfile.NamedTemporaryFile("w+", prefix="fake_arm_", suffix=".log", delete=False)
        args = [arg for k, v in parameters.items() for arg in ("-p", f"{k}:={v}")]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "refine_ros.robots.fake_driver", "arm", "--ros-args", *args],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.create_subscription(TFMessage, "/tf", self._on_tf, qos.TF)
        self.create_subscription(TwistStamped, "/servo_node/delta_twist_cmds", self._on_twist, qos.LOG)
        self.create_subscription(JointState, "/joint_states", self._on_joints, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_action, qos.CONTROL)
        self.confirm = self.create_client(Trigger, "safety/confirm_episode")
        self.safety: dict[str, str] = {}
        from diagnostic_msgs.msg import DiagnosticArray

        self.create_subscription(DiagnosticArray, "safety/status", self._on_safety, qos.STATE)

    def _on_safety(self, msg) -> None:
        for status in msg.status:
            self.safety = {kv.key: kv.value for kv in status.values}

    def confirmation_held(self) -> bool:
        """The safety node holds a confirmation (given, or in use by a running episode), by its
        latest status: pressing confirm again now would confirm the episode after."""
        return self.safety.get("confirmed_episode", "None") != "None" or self.safety.get("confirm_pending") == "True"

    def _on_tf(self, msg) -> None:
        with self.lock:
            for t in msg.transforms:
                tr, q = t.transform.translation, t.transform.rotation
                self.tf.set_transform(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z),
                                      (q.x, q.y, q.z, q.w), None)

    def _on_twist(self, _msg) -> None:
        with self.lock:
            self.hardware_commands += 1

    def _on_joints(self, msg: JointState) -> None:
        if "robotiq_85_left_knuckle_joint" in msg.name:
            self.knuckle = msg.position[msg.name.index("robotiq_85_left_knuckle_joint")]

    def _on_action(self, _msg) -> None:
        self.actions += 1

    def position(self, timeout: float = 30.0) -> tuple[float, float, float]:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = self.tf.lookup("base_link", "tool0")
            if found is not None:
                return tuple(float(v) for v in found.transform.translation)
            time.sleep(0.05)
        raise AssertionError("the fake arm never published its tool frame: " + self.log_tail(2000))

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the driver process's log (its overrun warnings say when it was held up)."""
        return Path(self._log.name).read_text(errors="replace")[-chars:]

    def destroy_node(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        os.unlink(self._log.name)
        super().destroy_node()


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
    """The operator's view of the demo recorder: its status and its services."""

    def __init__(self, context) -> None:
        super().__init__("operator", context=context)
        self.states: list[dict] = []
        self.changed = threading.Condition()
        self.create_subscription(String, "demo/status", self._on_status, qos.LATCHED)
        self.start = self.create_client(Trigger, "demo/start")
        self.stop = self.create_client(Trigger, "demo/stop")
        self.keep = self.create_client(Trigger, "demo/keep")
        self.discard = self.create_client(Trigger, "demo/discard")
        self.rerecord = self.create_client(Trigger, "demo/rerecord")
        self.finish = self.create_client(Trigger, "demo/finish")
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

    def wait_for_steps(self, steps: int, timeout: float = 60.0, *, paused: int = 0) -> dict:
        """Until the recording take holds `steps` (and `paused` paused steps; the recorder reports
        its counts each second): how an operator knows a take is long enough, whatever the
        machine's load. Fails, with the newest statuses, when the take stops recording first
        or does not get there within `timeout`."""
        def there() -> bool:
            last = self.states[-1] if self.states else {}
            return last.get("state") != "recording" or (last["steps"] >= steps and last["paused_steps"] >= paused)

        with self.changed:
            self.changed.wait_for(there, timeout)
            last = self.states[-1]
            assert last["state"] == "recording" and last["steps"] >= steps and last["paused_steps"] >= paused, \
                f"the take never held {steps} steps ({paused} paused) within {timeout:g} s: {self.states[-3:]}"
            return last


def call(client, request, timeout: float = 20.0):
    """Call a service from a test thread (the client's node spins elsewhere)."""
    from refine_ros.bringup.spin import call_service

    return call_service(client, request, timeout)


def _take_failure(message: str, operator: DemoStatus, proc) -> str:
    """A refused take with what says why: the recorder's last statuses (steps and paused steps
    as the take grew) and the end of the `refine up` process's log (its nodes' warnings: a
    stale gamepad, a silent driver, the watchdog). Seen once in a full run: a 2-s take with
    one step."""
    proc.kill()
    out, _ = proc.communicate(timeout=30)
    with operator.changed:
        states = [{k: s.get(k) for k in ("state", "steps", "paused_steps", "message")} for s in operator.states[-6:]]
    return f"{message}\nrecorder statuses: {states}\nrefine up's log (end):\n{out[-6000:]}"


def record_arm_demonstration(context, run_dir, *, seconds: float = 2.0, forward: float = 0.6,
                             steps: int = 20) -> str:
    """The real-robot checklist's first step, as an operator does it: `refine up
    arm_real_record_demo --live` in a process of its own, a gamepad held forward with the
    dead-man button down, then demo/start, demo/stop (after `seconds` and once the take holds
    `steps`), demo/label true and demo/keep. The caller spins a `FakeArmDriver` in `context`.
    Returns the process's output (it ends once the take is stored)."""
    import os
    import subprocess
    import sys
    import time

    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.teleop.maps import BUTTON_LEFT_SHOULDER, LEFT_Y

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
        # an operator watches the count, not the clock: under load the driver's sensors or the
        # graph's executors can be held up, and a 2-s take then holds too few steps to keep
        operator.wait_for_steps(steps)
        stopped = call(operator.stop, Trigger.Request())
        assert stopped.success, _take_failure(stopped.message, operator, proc)
        assert call(operator.label, SetBool.Request(data=True)).success
        kept = call(operator.keep, Trigger.Request())
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
