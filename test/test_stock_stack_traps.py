"""The traps a first hour on a stock stack met, each caught: the bridges as the processes a
launch starts, against the twins' stock-stack rules or this test standing where the driver is,
over real DDS; and what the profiles and the checklist say.

- MoveIt Servo paused, or reading twists as unitless: steps rejected, twists scaled by what
  Servo's own parameters say.
- A gripper action server of another type (or none): an error naming it, steps rejected.
- F1TENTH: the autonomy dead-man, the pad's layout, vesc_to_odom silent before the first
  command and its yaw sign, vesc_msgs without a release.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from refine_ros.bringup import resolve_profile

ROOT = Path(__file__).resolve().parents[1]


def _lines_of(proc: subprocess.Popen) -> list[str]:
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    return lines


def _start(executable: str, parameters: dict, tmp_path: Path, node: str | None = None) -> subprocess.Popen:
    from refine_ros.bench import ros_env

    node = node or executable
    params = tmp_path / f"{node}.yaml"
    params.write_text(yaml.safe_dump({f"/{node}": {"ros__parameters": parameters}}))
    proc = subprocess.Popen([str(Path(sys.executable).parent / executable), "--ros-args", "-r", f"__node:={node}",
                             "--params-file", str(params)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    proc.lines = _lines_of(proc)
    return proc


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(2)
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    time.sleep(0.2)


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


class SafetyStandIn:
    """The safety node's side for a bridge: a confirmed episode's commands at 50 Hz (a label per
    command), the bridge's command results and what reached the driver."""

    def __init__(self, context, driver_topic: tuple[type, str] | None = None) -> None:
        from rclpy.node import Node
        from std_msgs.msg import Float64MultiArray

        from refine_ros.bringup.spin import NodeSpinner
        from refine_ros.wire import qos
        from refine_ros.wire.messages import pack_vector, unpack_vector

        self.node = Node("safety_stand_in", context=context)
        self.lock = threading.Lock()
        self.results: list[tuple[float, float]] = []  # halted, rejected
        self.commands: list = []
        self.values: tuple[float, ...] | None = None
        self.step = 0
        pub = self.node.create_publisher(Float64MultiArray, "refine/safe_action", qos.CONTROL)

        def tick() -> None:
            if self.values is not None:
                pub.publish(pack_vector(1, self.step, self.values, label="policy"))
                self.step += 1

        def on_result(msg) -> None:
            with self.lock:
                self.results.append(tuple(unpack_vector(msg, width=2).values))

        self.node.create_subscription(Float64MultiArray, "refine/command_result", on_result, qos.LOG)
        if driver_topic is not None:
            self.node.create_subscription(driver_topic[0], driver_topic[1], lambda m: self.commands.append(m),
                                          qos.LOG)
        self.node.create_timer(0.02, tick)
        self.spinner = NodeSpinner([self.node], context).start()

    def rejected_since(self, n: int) -> list[float]:
        with self.lock:
            return [r[1] for r in self.results[n:]]

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()


def _arm_bridge_settings(**overrides) -> dict:
    settings = dict(resolve_profile("arm_real", check_modules=False).node("arm_bridge").parameters)
    settings.update(target_mode="topic", **overrides)  # the twin publishes the door's target
    return settings


# ---- MoveIt Servo -------------------------------------------------------------------------------------
@pytest.mark.ros
@pytest.mark.timeout(300)
def test_a_unitless_servo_gets_scaled_twists_and_a_paused_one_rejected_steps(context, tmp_path):
    """The arm twin is MoveIt Servo with its defaults (unitless, scale.linear 0.4): the bridge
    reads them from /servo_node and divides each twist by 0.4; pausing Servo (Jazzy: no status,
    nothing executed) makes every step rejected, and the error names Servo."""
    from geometry_msgs.msg import TwistStamped
    from std_srvs.srv import SetBool

    twin = _start("arm_twin", {}, tmp_path)
    bridge = _start("arm_bridge", _arm_bridge_settings(), tmp_path)
    stand_in = SafetyStandIn(context, (TwistStamped, "/servo_node/delta_twist_cmds"))
    try:
        assert _wait(lambda: any("takes twist commands" in line for line in bridge.lines), 120.0), \
            "".join(bridge.lines)[-2000:]
        stand_in.values = (0.5, 0.0, 0.0, 1.0)  # 0.05 m/s forward (max_speed 0.1), gripper open
        # the bridge's own 0.1 s watchdog sends Servo a zero twist whenever this process's 50 Hz
        # commands come late on a loaded machine, so only the moving twists are judged here
        def moving() -> list[float]:
            return [c.twist.linear.x for c in list(stand_in.commands) if c.twist.linear.x != 0.0]

        assert _wait(lambda: len(moving()) > 20, 30.0), f"{len(stand_in.commands)} twists, none moving"
        twists = moving()  # one snapshot: the spinner thread keeps appending
        assert twists == pytest.approx([0.05 / 0.4] * len(twists)), \
            f"0.05 m/s as a unitless twist for scale.linear 0.4, got {sorted(set(twists))}"
        assert _wait(lambda: len(stand_in.results) > 20 and stand_in.rejected_since(-10) == [0.0] * 10, 20.0)
        pause = stand_in.node.create_client(SetBool, "/servo_node/pause_servo")
        assert pause.wait_for_service(timeout_sec=20.0)
        pause.call_async(SetBool.Request(data=True))
        time.sleep(1.5)  # longer than servo_status_timeout (0.5 s)
        n = len(stand_in.results)
        time.sleep(1.0)
        assert stand_in.rejected_since(n) and all(r == 1.0 for r in stand_in.rejected_since(n)), \
            "steps a paused Servo drops are logged as rejected, not executed"
    finally:
        stand_in.close()
        _stop(bridge, twin)
    out = "".join(bridge.lines)
    assert "reads twists as unitless with scale.linear 0.4" in out and "publishes no status" in out, out[-2000:]


@pytest.mark.ros
@pytest.mark.timeout(300)
def test_a_gripper_server_of_another_type_is_an_error_naming_it_and_its_steps_are_rejected(context, tmp_path):
    """ros2_robotiq_gripper on Jazzy serves ParallelGripperCommand: a bridge asking for
    GripperCommand there never connects. It says so, naming the action and the type, and the
    steps that needed a goal are rejected."""
    twin = _start("arm_twin", {"command_in_type": "speed_units"}, tmp_path)  # its gripper: ParallelGripperCommand
    bridge = _start("arm_bridge", _arm_bridge_settings(gripper_interface="action", server_timeout=3.0), tmp_path)
    stand_in = SafetyStandIn(context)
    try:
        assert _wait(lambda: any("takes twist commands" in line for line in bridge.lines), 120.0), \
            "".join(bridge.lines)[-2000:]
        time.sleep(3.0)  # past server_timeout
        stand_in.values = (0.0, 0.0, 0.0, 0.0)  # close the gripper: a goal is due at every step
        time.sleep(1.5)
        assert stand_in.rejected_since(0) and all(r == 1.0 for r in stand_in.rejected_since(0))
    finally:
        stand_in.close()
        _stop(bridge, twin)
    out = "".join(bridge.lines)
    assert ("no control_msgs/action/GripperCommand server at /robotiq_gripper_controller/gripper_cmd" in out
            and "ParallelGripperCommand" in out), out[-2000:]


# ---- F1TENTH --------------------------------------------------------------------------------------------
def test_rc_car_real_follows_f1tenth_systems_pad_and_dead_man():
    """The stock car passes /drive only while RB (5) is held; its joy_node already publishes /joy
    (F710 in D mode); LB (4) is F1TENTH's own manual drive."""
    live = resolve_profile("rc_car_real", check_modules=False)
    assert live.node("safety_node").parameters["deadman_button"] == 5
    record = resolve_profile("rc_car_real_record_demo", check_modules=False)
    names = [spec.name for spec in record.nodes]
    assert "joy_teleop" in names and not any("joy_node" in n or "game_controller" in n for n in names)
    teleop = record.node("joy_teleop").parameters
    assert teleop["enable_button"] == 5 and teleop["axes"] == [2, 1, 1]
    buttons = [v for k, v in teleop.items() if k.endswith("_button")]
    assert 4 not in buttons, "LB is F1TENTH's manual drive: no control of ours may use it"


@pytest.mark.ros
@pytest.mark.timeout(180)
def test_the_car_bridge_waits_for_vesc_to_odom_and_turns_its_yaw_back(context, tmp_path):
    """vesc_to_odom publishes nothing before its first servo command while the VESC's state
    flows from the start: the car bridge waits (no driver-lost error); then with the stock
    node's sign (a left turn reads a negative yaw rate) the observation's yaw rate is positive."""
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from vesc_msgs.msg import VescStateStamped

    from refine_ros.bringup.spin import NodeSpinner
    from refine_ros.wire import qos
    from refine_ros_interfaces.msg import Step

    settings = dict(resolve_profile("rc_car_real", check_modules=False).node("rc_car_bridge").parameters)
    bridge = _start("rc_car_bridge", settings, tmp_path)
    node = Node("vesc_stand_in", context=context)
    vesc = node.create_publisher(VescStateStamped, "sensors/core", qos.STATE)
    odom = node.create_publisher(Odometry, "/odom", qos.STATE)
    tiles = node.create_publisher(__import__("std_msgs.msg", fromlist=["Float64MultiArray"]).Float64MultiArray,
                                  "track/tiles", qos.SENSOR)
    observations: list = []
    node.create_subscription(Step, "refine/observation", lambda m: observations.append(list(m.values)), qos.LOG)
    state = {"odom": False}

    def tick() -> None:
        from std_msgs.msg import Float64MultiArray

        vesc.publish(VescStateStamped())
        tiles.publish(Float64MultiArray(data=[0.0] * 48))
        if state["odom"]:
            msg = Odometry()
            msg.twist.twist.linear.x, msg.twist.twist.angular.z = -0.5, -0.8  # forward, turning left, stock sign
            msg.pose.pose.orientation.z, msg.pose.pose.orientation.w = -0.0998, 0.995  # yaw -0.2 as it reads
            odom.publish(msg)

    node.create_timer(0.02, tick)
    spinner = NodeSpinner([node], context).start()
    try:
        assert _wait(lambda: any("no /odom yet" in line for line in bridge.lines), 60.0), "".join(bridge.lines)[-2000:]
        time.sleep(2.0)  # the VESC reports, /odom is silent: not a lost driver
        state["odom"] = True
        assert _wait(lambda: len(observations) > 5, 20.0)
    finally:
        spinner.stop()
        node.destroy_node()
        _stop(bridge)
    out = "".join(bridge.lines)
    assert "no driver feedback" not in out, out[-2000:]
    heading, yaw_rate = observations[-1][49], observations[-1][50]
    assert yaw_rate == pytest.approx(0.8) and heading == pytest.approx(0.2 / 3.14159265, abs=1e-3)


def test_without_vesc_msgs_the_car_bridge_says_how_to_build_it(monkeypatch):
    from refine_ros.params import StartRefused
    from refine_ros.robots.rc_car import rc_car_bridge

    real = rc_car_bridge.importlib.import_module

    def no_vesc(name, *args, **kwargs):
        if name.startswith("vesc_msgs"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(rc_car_bridge.importlib, "import_module", no_vesc)
    with pytest.raises(StartRefused) as info:
        rc_car_bridge._message("vesc_msgs", "VescStateStamped", "wheel_source erpm")
    text = str(info.value)
    assert "no Humble or Jazzy release" in text and "github.com/f1tenth/vesc" in text and "encoders" in text


# ---- the checklist ----------------------------------------------------------------------------------------
def test_the_robot_checklist_states_the_stock_stack_facts():
    text = (ROOT / "docs" / "ROBOT_CHECKLIST.md").read_text()
    for fact in ("speed_units", "fr3_link0", "forward_position_controller", "chrony", "estop_timeout",
                 "ParallelGripperCommand", "RB", "vesc_to_odom", "When our processes die", "command_guard",
                 "Timeout Brake Current"):
        assert fact in text, fact
