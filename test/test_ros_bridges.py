"""Hardware bridges over real DDS against fake driver topics, and the lifecycle of every
real-robot node (declared parameters, clean shutdown as a real process)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import rclpy
import yaml
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from refine_ros.bringup import resolve_profile
from refine_ros.bringup.spin import NodeSpinner
from refine_ros.nodes import safety_node
from refine_ros.nodes.registry import NODES
from refine_ros.robots.arm import arm_bridge
from refine_ros.robots.rc_car import rc_car_bridge, track_detector
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_vector, unpack_vector
from refine_ros_interfaces.msg import Step

pytestmark = pytest.mark.timeout(120)


def wait_until(predicate, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return False


class Graph:
    """Nodes of one test in their own context, each spun by its own executor thread; `close`
    stops every executor before any node is destroyed (refine_ros.bringup.spin)."""

    def __init__(self) -> None:
        self.ctx = Context()
        rclpy.init(context=self.ctx)
        self.nodes: list[Node] = []
        self.spinners: list[NodeSpinner] = []

    def add(self, node: Node) -> Node:
        self.spinners.append(NodeSpinner([node], self.ctx).start())
        self.nodes.append(node)
        return node

    def close(self) -> None:
        for spinner in self.spinners:
            spinner.stop()
        for node in self.nodes:
            node.destroy_node()
        rclpy.shutdown(context=self.ctx)


def _profile_settings(profile: str, node: str) -> dict:
    """What a robot's profile sets on one of its nodes (dry_run aside): the robot-specific
    values the nodes have no default for."""
    params = dict(resolve_profile(profile, check_modules=False).node(node).parameters)
    params.pop("dry_run", None)
    return params


SETTINGS = {
    safety_node.SafetyNode: _profile_settings("arm_real", "safety_node"),
    arm_bridge.ArmBridge: _profile_settings("arm_real", "arm_bridge"),
    rc_car_bridge.RcCarBridge: _profile_settings("rc_car_real", "rc_car_bridge"),
    track_detector.TrackDetector: {},
}


def make(cls, graph: Graph, **overrides):
    params = {**SETTINGS[cls], **overrides}
    return graph.add(cls(context=graph.ctx, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))


@pytest.fixture
def graph():
    g = Graph()
    yield g
    g.close()


class Inbox:
    def __init__(self) -> None:
        self.items: list = []
        self.lock = threading.Lock()

    def __call__(self, msg) -> None:
        with self.lock:
            self.items.append(msg)

    def last(self):
        with self.lock:
            return self.items[-1] if self.items else None

    def __len__(self) -> int:
        with self.lock:
            return len(self.items)


# ---- car ---------------------------------------------------------------------------------------
TWIST_CAR = dict(command_type="twist", wheelbase=0.33, wheel_source="encoders", wheel_radius=0.05, odom_yaw_sign=1.0)
"""A car driven by geometry_msgs/Twist with wheel encoders and odometry that follows REP-103:
the settings that need no message package beyond the standard ones (the F1TENTH default, with
vesc_to_odom's sign, is tested with its own messages)."""


def test_rc_car_bridge_twist_commands_and_semantic_observation(graph):
    bridge = make(rc_car_bridge.RcCarBridge, graph, **TWIST_CAR, max_speed=2.0, speed_to_sim=10.0)
    fake = graph.add(Node("fake_car", context=graph.ctx))
    cmds, obs, results = Inbox(), Inbox(), Inbox()
    fake.create_subscription(Twist, "/cmd_vel", cmds, qos.COMMAND)
    fake.create_subscription(Step, "refine/observation", obs, qos.LOG)
    fake.create_subscription(Float64MultiArray, "refine/command_result", results, qos.LOG)
    act = fake.create_publisher(Float64MultiArray, "refine/safe_action", qos.COMMAND)
    odom = fake.create_publisher(Odometry, "/odom", qos.SENSOR)
    wheels = fake.create_publisher(JointState, "/wheel_states", qos.SENSOR)
    tiles = fake.create_publisher(Float64MultiArray, "track/tiles", qos.SENSOR)
    assert wait_until(lambda: act.get_subscription_count() and odom.get_subscription_count()
                      and tiles.get_subscription_count())  # fmt: skip

    grid = np.arange(48, dtype=float) / 100.0
    o = Odometry()
    o.twist.twist.linear.x, o.twist.twist.linear.y = 0.3, 0.4  # 0.5 m/s -> 5 world units -> 0.05
    o.twist.twist.angular.z = 0.3
    o.pose.pose.orientation.w, o.pose.pose.orientation.z = np.cos(np.pi / 8), np.sin(np.pi / 8)
    w = JointState(name=["wheel_rr", "wheel_fl", "wheel_fr", "wheel_rl"], velocity=[40.0, 10.0, 20.0, 30.0])
    for _ in range(20):
        odom.publish(o)
        wheels.publish(w)
        tiles.publish(Float64MultiArray(data=list(grid)))
        time.sleep(0.01)
    assert wait_until(lambda: len(obs) > 3)
    observed = unpack_vector(obs.last())
    v = np.array(observed.values)
    assert v.shape == (55,) and observed.names == rc_car_bridge.COLUMNS
    assert v[:48] == pytest.approx(grid)
    assert v[48] == pytest.approx(0.05)
    assert v[49] == pytest.approx(0.25)  # yaw pi/4 over pi
    assert v[50] == pytest.approx(0.3)
    # wheel surface speeds: rad/s x 0.05 m = 0.5 .. 2.0 m/s, on the speed scale (x 10 / 100)
    assert v[51:55] == pytest.approx([0.05, 0.1, 0.15, 0.2]), "fl, fr, rl, rr whatever the order"

    odom.publish(o)
    act.publish(pack_vector(0, 0, [0.5, 0.8, 0.2], label="policy"))  # steer right at 60 % gas
    assert wait_until(lambda: len(cmds))
    assert cmds.last().linear.x == pytest.approx(1.2)
    angle = -0.5 * 0.34  # the profile's max_steering_angle; negative: right in ROS
    assert cmds.last().angular.z == pytest.approx(1.2 * math.tan(angle) / 0.33)
    assert wait_until(lambda: len(results)) and list(unpack_vector(results.last()).values) == [0.0, 0.0]
    act.publish(pack_vector(0, 1, [0.5, 0.8]))
    assert wait_until(lambda: bridge.rejected == 1)
    assert wait_until(lambda: cmds.last().linear.x == 0.0), "a malformed command is a stop, not held"


def test_when_the_track_detector_goes_quiet_the_car_bridge_says_so_on_bridge_status(graph):
    """The car's camera loses the road, the detector publishes no tiles and the bridge withholds
    its observations (the safety node then stops the car): `bridge/status` names the tiles and
    their age, once, and says when observations flow again, so the learner's error can too."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    make(rc_car_bridge.RcCarBridge, graph, **TWIST_CAR)
    fake = graph.add(Node("fake_car", context=graph.ctx))
    obs, statuses = Inbox(), Inbox()
    fake.create_subscription(Step, "refine/observation", obs, qos.LOG)
    fake.create_subscription(DiagnosticArray, "bridge/status", statuses, qos.LATCHED)
    odom = fake.create_publisher(Odometry, "/odom", qos.SENSOR)
    wheels = fake.create_publisher(JointState, "/wheel_states", qos.SENSOR)
    tiles = fake.create_publisher(Float64MultiArray, "track/tiles", qos.SENSOR)
    assert wait_until(lambda: odom.get_subscription_count() and tiles.get_subscription_count())
    o = Odometry()
    o.pose.pose.orientation.w = 1.0
    w = JointState(name=["wheel_rr", "wheel_fl", "wheel_fr", "wheel_rl"], velocity=[0.0] * 4)

    def sensors(seconds: float, with_tiles: bool) -> None:
        for _ in range(int(seconds / 0.02)):
            odom.publish(o)
            wheels.publish(w)
            if with_tiles:
                tiles.publish(Float64MultiArray(data=[0.0] * 48))
            time.sleep(0.02)

    sensors(0.6, with_tiles=True)
    assert wait_until(lambda: len(obs) > 5), "observations while every input is fresh"
    sensors(1.0, with_tiles=False)  # the road is lost
    held = [m.status[0] for m in statuses.items if m.status[0].level == DiagnosticStatus.WARN]
    assert len(held) == 1, [m.status[0].message for m in statuses.items]
    assert "track/tiles (the track detector)" in held[0].message and "s old (sensor_timeout" in held[0].message
    assert {kv.key: kv.value for kv in held[0].values}["withheld"] == "tiles"
    sensors(0.4, with_tiles=True)
    assert wait_until(lambda: statuses.last().status[0].level == DiagnosticStatus.OK)
    assert "observations flow again" in statuses.last().status[0].message


def test_a_robots_learner_hears_what_the_bridge_withholds(graph, tmp_path):
    """What the learner's silent-episode error quotes (refine_ros.loop.round_driver): the
    latest bridge/status, from a bridge that published it before the learner started too."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from refine_ros.nodes.learner_node import LearnerNode

    fake = graph.add(Node("fake_bridge", context=graph.ctx))
    status = fake.create_publisher(DiagnosticArray, "bridge/status", qos.LATCHED)
    held = "observations withheld: track/tiles (the track detector) 0.31 s old (sensor_timeout 0.15 s)"
    status.publish(DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.WARN, message=held)]))
    learner = graph.add(LearnerNode(context=graph.ctx, parameter_overrides=[
        Parameter("task", value="car_racing"), Parameter("reset_service", value=""),
        Parameter("run_dir", value=str(tmp_path))]))
    assert wait_until(lambda: learner.why_silent() == held, 10.0), learner.why_silent()
    status.publish(DiagnosticArray(status=[DiagnosticStatus(level=DiagnosticStatus.OK, message="flow again")]))
    assert wait_until(lambda: learner.why_silent() is None, 10.0)


@pytest.mark.parametrize("mode", ["twist", "array"])
def test_the_cars_stop_never_reverses(graph, mode):
    """Issue 16: "A stopped car drives backwards": the safety node's stop [steer 0, gas 0,
    brake 1] became linear.x = -max_speed in twist mode. Now it is zero motion in every mode."""
    settings = TWIST_CAR if mode == "twist" else {**TWIST_CAR, "command_type": "array", "command_topic": "/car_cmd"}
    make(rc_car_bridge.RcCarBridge, graph, **settings)
    fake = graph.add(Node("fake_car", context=graph.ctx))
    cmds = Inbox()
    fake.create_subscription(Twist if mode == "twist" else Float64MultiArray,
                             "/cmd_vel" if mode == "twist" else "/car_cmd", cmds, qos.COMMAND)
    act = fake.create_publisher(Float64MultiArray, "refine/safe_action", qos.COMMAND)
    assert wait_until(lambda: act.get_subscription_count() and fake.count_publishers("/cmd_vel" if mode == "twist"
                                                                                      else "/car_cmd"))
    zero = resolve_profile("rc_car_real", check_modules=False).node("safety_node").parameters["zero"]
    for label in ("stale", ""):  # the safety node's stop, and the same values unlabelled
        n = len(cmds)
        act.publish(pack_vector(0, 0, zero, label=label))
        assert wait_until(lambda n=n: len(cmds) > n)
        if mode == "twist":
            assert (cmds.last().linear.x, cmds.last().angular.z) == (0.0, 0.0)
        else:
            assert tuple(cmds.last().data) == (0.0, 0.0, 1.0), "array: brake, never a throttle"


# ---- lifecycle ---------------------------------------------------------------------------------
NODE_PARAMETERS = {
    safety_node.SafetyNode: set(safety_node.PARAMETERS),
    arm_bridge.ArmBridge: set(arm_bridge.PARAMETERS),
    rc_car_bridge.RcCarBridge: set(rc_car_bridge.PARAMETERS),
    track_detector.TrackDetector: set(track_detector.PARAMETERS),
}


@pytest.mark.parametrize("cls", list(NODE_PARAMETERS), ids=lambda c: c.__name__)
def test_every_node_declares_described_parameters(graph, cls):
    node = make(cls, graph)
    names = set(node.list_parameters([], 0).names)
    assert NODE_PARAMETERS[cls] <= names
    for desc in node.describe_parameters(sorted(NODE_PARAMETERS[cls])):
        assert desc.description, desc.name
    module = {safety_node.SafetyNode: safety_node, arm_bridge.ArmBridge: arm_bridge,
              rc_car_bridge.RcCarBridge: rc_car_bridge, track_detector.TrackDetector: track_detector}[cls]
    valued = sorted(n for n, p in module.PARAMETERS.items() if not p.typed_only or n in SETTINGS[cls])
    assert all(p.value is not None for p in node.get_parameters(valued))


def test_bridges_refuse_bad_settings_and_keep_their_limits(graph):
    """Issue 16: limits are read-only while a node runs; settings a bridge cannot work with stop
    it from starting (exit status 2 as a process) with one line saying what to set."""
    from refine_ros.params import StartRefused

    car = make(rc_car_bridge.RcCarBridge, graph, **TWIST_CAR)
    for name, value in (("max_speed", 5.0), ("max_steering_angle", 1.0), ("command_topic", "/other"),
                        ("speed_to_sim", 1.0)):
        assert car.describe_parameter(name).read_only, name
        assert not car.set_parameters([Parameter(name, value=value)])[0].successful, name
    assert car.limits.max_speed == SETTINGS[rc_car_bridge.RcCarBridge]["max_speed"]
    arm = make(arm_bridge.ArmBridge, graph)
    assert not arm.set_parameters([Parameter("max_speed", value=0.5)])[0].successful
    assert arm.max_speed == SETTINGS[arm_bridge.ArmBridge]["max_speed"]

    def refused(cls, **settings):
        with pytest.raises(StartRefused) as info:
            cls(context=graph.ctx, parameter_overrides=[Parameter(k, value=v) for k, v in settings.items()])
        return str(info.value)

    car_settings = SETTINGS[rc_car_bridge.RcCarBridge]
    assert "command_type" in refused(rc_car_bridge.RcCarBridge, **{**car_settings, "command_type": "pwm"})
    assert "wheelbase" in refused(rc_car_bridge.RcCarBridge, **{**car_settings, "command_type": "twist"})
    assert "wheel_radius" in refused(rc_car_bridge.RcCarBridge, **{**car_settings, "wheel_source": "encoders"})
    assert "command_topic" in refused(rc_car_bridge.RcCarBridge, **{**car_settings, "command_type": "array"})
    assert "max_speed, max_steering_angle, speed_to_sim" in refused(rc_car_bridge.RcCarBridge)
    arm_settings = SETTINGS[arm_bridge.ArmBridge]
    assert "max_speed" in refused(arm_bridge.ArmBridge)
    assert "gripper_open_position" in refused(arm_bridge.ArmBridge, max_speed=0.1, ee_timeout=0.15,
                                              handle_timeout=0.25)
    assert "arm_joints" in refused(arm_bridge.ArmBridge, **{**arm_settings, "command_interface": "forward_velocity"})
    assert "target_position" in refused(arm_bridge.ArmBridge, **{**arm_settings, "target_position": [1.0, 2.0]})


@pytest.mark.timeout(90)
def test_every_node_runs_as_a_process_and_exits_cleanly_on_sigint(tmp_path):
    modules = ["safety_node", "arm_bridge", "rc_car_bridge", "track_detector"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = {}
    settings = {m.__name__.rsplit(".", 1)[-1]: SETTINGS[cls] for cls, m in (
        (safety_node.SafetyNode, safety_node), (arm_bridge.ArmBridge, arm_bridge),
        (rc_car_bridge.RcCarBridge, rc_car_bridge), (track_detector.TrackDetector, track_detector))}
    for m in modules:
        log = open(tmp_path / f"{m}.log", "w+")
        params = tmp_path / f"{m}.yaml"
        params.write_text(yaml.safe_dump({f"life_{m}": {"ros__parameters": settings[m] or {"road_width": 0.3}}}))
        procs[m] = (subprocess.Popen(
            [sys.executable, "-m", NODES[m].module, "--ros-args", "-r", f"__node:=life_{m}",
             "--params-file", str(params)],
            stdout=log, stderr=subprocess.STDOUT, env=env,
        ), log)  # fmt: skip
    ctx = Context()
    rclpy.init(context=ctx)
    probe = Node("lifecycle_probe", context=ctx)
    try:
        assert wait_until(lambda: {f"life_{m}" for m in modules} <= set(probe.get_node_names()), 60.0), (
            probe.get_node_names()
        )
        # a node appears in the graph when its constructor starts; let every constructor finish
        # (the track detector imports OpenCV) so SIGINT tests the spinning node's shutdown
        time.sleep(2.0)
    finally:
        probe.destroy_node()
        rclpy.shutdown(context=ctx)
    for proc, _ in procs.values():
        proc.send_signal(signal.SIGINT)
    for m, (proc, log) in procs.items():
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # its threads' stacks into its log: where it hangs
            time.sleep(1.0)
            code = "nothing within 30 s of SIGINT (killed; its stacks are in its log)"
        finally:
            if proc.poll() is None:
                proc.kill()
        log.seek(0)
        text = log.read()
        log.close()
        assert code == 0, f"{m} exited {code}:\n{text}"
        assert "Traceback" not in text, text
