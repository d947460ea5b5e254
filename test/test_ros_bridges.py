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
from geometry_msgs.msg import PoseStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray, String

from refine_core.tasks.registry import get_task
from refine_ros import qos
from refine_ros.bringup import resolve_profile
from refine_ros.messages import pack_json, pack_vector, unpack_json, unpack_vector
from refine_ros.nodes import arm_bridge, rc_car_bridge, safety_node, track_detector
from refine_ros.spin import NodeSpinner

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
    stops every executor before any node is destroyed (refine_ros.spin)."""

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


def pose(x, y, z, w=1.0, qx=0.0, qy=0.0, qz=0.0) -> PoseStamped:
    msg = PoseStamped()
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, z
    o = msg.pose.orientation
    o.w, o.x, o.y, o.z = w, qx, qy, qz
    return msg


# ---- arm ---------------------------------------------------------------------------------------
def test_arm_bridge_commands_and_door_observation(graph):
    bridge = graph.add(arm_bridge.ArmBridge(context=graph.ctx, parameter_overrides=[
        Parameter("max_speed", value=0.2), Parameter("frame_id", value="arm_base"),
        Parameter("gripper_open", value=0.04), Parameter("gripper_closed", value=0.0),
        Parameter("gripper_joints", value=["f1", "f2"]), Parameter("gripper_max_width", value=0.08),
        Parameter("target_position", value=[0.1, 0.8, 0.15]),
    ]))  # fmt: skip
    fake = graph.add(Node("fake_arm", context=graph.ctx))
    twists, grips, obs, cols = Inbox(), Inbox(), Inbox(), Inbox()
    fake.create_subscription(TwistStamped, "/servo_node/delta_twist_cmds", twists, qos.COMMAND)
    fake.create_subscription(Float64, "/gripper_command", grips, qos.COMMAND)
    fake.create_subscription(Float64MultiArray, "refine/observation", obs, qos.LOG)
    fake.create_subscription(String, "refine/observation_columns", cols, qos.LATCHED)
    act = fake.create_publisher(Float64MultiArray, "refine/safe_action", qos.COMMAND)
    joints = fake.create_publisher(JointState, "/joint_states", qos.SENSOR)
    ee = fake.create_publisher(PoseStamped, "/ee_pose", qos.SENSOR)
    handle = fake.create_publisher(PoseStamped, "/handle_pose", qos.SENSOR)
    events = fake.create_publisher(String, "refine/episode_events", qos.LATCHED)
    assert wait_until(lambda: act.get_subscription_count() and ee.get_subscription_count()
                      and handle.get_subscription_count() and joints.get_subscription_count())  # fmt: skip

    # commands: scaled twist in the configured frame, gripper mapped onto the joint range
    act.publish(pack_vector(0, 0, [0.5, -1.0, 0.25, 0.5]))
    assert wait_until(lambda: len(twists) and len(grips))
    t = twists.last()
    assert t.header.frame_id == "arm_base"
    assert (t.twist.linear.x, t.twist.linear.y, t.twist.linear.z) == pytest.approx((0.1, -0.2, 0.05))
    assert grips.last().data == pytest.approx(0.02)
    bad = Float64MultiArray(data=[0.0, 0.0, float("nan"), 0.0, 0.0, 0.0])
    bad.layout.data_offset = 2
    act.publish(bad)
    assert wait_until(lambda: bridge.rejected == 1)  # COMMAND keeps only the newest: one at a time
    act.publish(pack_vector(0, 1, [0.1, 0.2]))
    assert wait_until(lambda: bridge.rejected == 2)
    assert len(twists) == 1, "a malformed command must not move the arm"

    # observations: the door schema, prev-step values, episode counter from the events
    events.publish(pack_json({"event": "start", "episode": 5}))
    assert wait_until(lambda: bridge.episode == 5)
    joint_msg = JointState(name=["arm_1", "f1", "f2"], position=[0.3, 0.02, 0.02])

    def publish_sensors(x):
        joints.publish(joint_msg)
        ee.publish(pose(x, 0.6, 0.2))
        handle.publish(pose(0.05, 0.7, 0.16, w=0.0, qz=1.0))

    for k in range(20):
        publish_sensors(0.01 * k)
        time.sleep(0.01)
    assert wait_until(lambda: len(obs) > 5)
    columns = unpack_json(cols.last())
    assert tuple(columns) == get_task("door_open").spec.observation_columns
    first, last = unpack_vector(obs.items[0]), unpack_vector(obs.last())
    assert first.episode == 5 and first.step == 0 and last.step > first.step
    v = np.array(last.values)
    assert v.shape == (39,)
    assert v[1:3] == pytest.approx([0.6, 0.2])
    assert v[3] == pytest.approx(0.5)  # 0.04 of 0.08 open
    assert v[4:7] == pytest.approx([0.05, 0.7, 0.16])
    assert v[7:11] == pytest.approx([0.0, 0.0, 1.0, 0.0])  # x, y, z, w as the simulator
    assert np.all(v[11:18] == 0)
    assert v[36:39] == pytest.approx([0.1, 0.8, 0.15])
    prev_msg = unpack_vector(obs.items[-2])
    assert v[18:36] == pytest.approx(np.array(prev_msg.values)[:18]), "18-35 are the previous step"
    assert np.array(first.values)[18:36] == pytest.approx(np.array(first.values)[:18])

    # a dead sensor silences the heartbeat (the safety watchdog then stops the arm)
    joints.publish(joint_msg)
    handle.publish(pose(0.05, 0.7, 0.16))
    time.sleep(0.2)
    n = len(obs)
    time.sleep(0.2)
    assert len(obs) == n, "observations kept flowing without an end-effector pose"


# ---- car ---------------------------------------------------------------------------------------
TWIST_CAR = dict(command_type="twist", wheelbase=0.33, wheel_source="encoders", wheel_radius=0.05)
"""A car driven by geometry_msgs/Twist with wheel encoders: the settings that need no message
package beyond the standard ones (the F1TENTH default is tested with its own messages)."""


def test_rc_car_bridge_twist_commands_and_semantic_observation(graph):
    bridge = make(rc_car_bridge.RcCarBridge, graph, **TWIST_CAR, max_speed=2.0, speed_to_sim=10.0)
    fake = graph.add(Node("fake_car", context=graph.ctx))
    cmds, obs, results = Inbox(), Inbox(), Inbox()
    fake.create_subscription(Twist, "/cmd_vel", cmds, qos.COMMAND)
    fake.create_subscription(Float64MultiArray, "refine/observation", obs, qos.LOG)
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
    v = np.array(unpack_vector(obs.last()).values)
    assert v.shape == (55,)
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
    values = node.get_parameters(sorted(NODE_PARAMETERS[cls]))
    assert all(p.value is not None for p in values)


def test_bridges_refuse_bad_settings(graph):
    from refine_ros.params import StartRefused

    car = make(rc_car_bridge.RcCarBridge, graph)
    assert not car.set_parameters([Parameter("wheel_joints", value=["a", "b"])])[0].successful
    assert not car.set_parameters([Parameter("command_topic", value="/other")])[0].successful  # read-only
    assert car.describe_parameter("command_topic").read_only and not car.describe_parameter("max_speed").read_only
    assert not car.set_parameters([Parameter("max_speed", value=-1.0)])[0].successful  # range
    assert car.set_parameters([Parameter("max_speed", value=0.5)])[0].successful
    arm = make(arm_bridge.ArmBridge, graph)
    assert not arm.set_parameters([Parameter("target_position", value=[1.0, 2.0])])[0].successful
    with pytest.raises(StartRefused, match="command_type"):
        rc_car_bridge.RcCarBridge(context=graph.ctx, parameter_overrides=[
            Parameter(k, value=v) for k, v in {**SETTINGS[rc_car_bridge.RcCarBridge], "command_type": "pwm"}.items()])
    with pytest.raises(StartRefused, match="max_speed, max_steer"):
        rc_car_bridge.RcCarBridge(context=graph.ctx)
    with pytest.raises(StartRefused, match="max_speed"):
        arm_bridge.ArmBridge(context=graph.ctx)


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
            [sys.executable, "-m", f"refine_ros.nodes.{m}", "--ros-args", "-r", f"__node:=life_{m}",
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
        finally:
            if proc.poll() is None:
                proc.kill()
        log.seek(0)
        text = log.read()
        log.close()
        assert code == 0, f"{m} exited {code}:\n{text}"
        assert "Traceback" not in text, text
