"""The sim node over real DDS (loopback): parameters, reset service, lockstep and real-time
stepping, counted observations, typed topics, markers, camera, and a clean SIGINT exit."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path as FilePath

import numpy as np
import pytest
from urdf_kinematics import urdf_forward_kinematics

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from refine_core.tasks import get_task, task_names  # noqa: E402
from refine_core.tasks.view import TaskView  # noqa: E402
from refine_ros.bringup.spin import NodeSpinner  # noqa: E402
from refine_ros.nodes.sim_node import SimNode  # noqa: E402
from refine_ros.wire import qos  # noqa: E402
from refine_ros.wire.messages import pack_vector, unpack_vector  # noqa: E402
from refine_ros_interfaces.msg import Step  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = FilePath(__file__).resolve().parents[1]
ACTIONS = {"door_open": [0.3, 0.3, -0.2, 1.0], "car_racing": [0.1, 0.6, 0.0], "pendulum": [1.0]}


def scene_topic_types(name: str) -> dict[str, type]:
    """The typed topics a task's sim node publishes: read from a real scene of the task, as
    the node does, so a harness subscribes to exactly those."""
    from refine_ros.wire.adapters import topic_types

    task = get_task(name)
    env = task.make_env()
    try:
        env.reset(seed=0)
        return topic_types(TaskView(task).scene(env))
    finally:
        env.close()


@pytest.fixture
def ros():
    rclpy.init()
    yield
    rclpy.try_shutdown()


class Harness:
    """A sim node spinning in its own executor thread plus a client node the test spins."""

    def __init__(self, task: str, **params) -> None:
        overrides = [Parameter("task", value=task), *(Parameter(k, value=v) for k, v in params.items())]
        self.sim = SimNode(parameter_overrides=overrides)
        self.spinner = NodeSpinner([self.sim], rclpy.get_default_context()).start()
        self.client = rclpy.create_node("sim_test_client")
        self.got: dict[str, list] = {k: [] for k in (
            "obs", "reward", "expert", "markers", "camera", "events", "columns", "typed")}
        self.respond = True
        self.task = task
        c = self.client
        self.action_pub = c.create_publisher(Float64MultiArray, "refine/action", qos.COMMAND)
        c.create_subscription(Step, "refine/observation", self._on_obs, qos.STATE)
        c.create_subscription(Step, "refine/reward",
                              lambda m: self.got["reward"].append(unpack_vector(m)), qos.LOG)
        c.create_subscription(Step, "refine/expert_action",
                              lambda m: self.got["expert"].append(unpack_vector(m)), qos.STATE)
        c.create_subscription(MarkerArray, "refine/markers", self.got["markers"].append, qos.SENSOR)
        c.create_subscription(Image, "refine/camera", self.got["camera"].append, qos.SENSOR)
        c.create_subscription(String, "refine/episode_events",
                              lambda m: self.got["events"].append(json.loads(m.data)), qos.LATCHED)
        c.create_subscription(String, "refine/observation_columns",
                              lambda m: self.got["columns"].append(json.loads(m.data)), qos.LATCHED)
        self.typed_topics = scene_topic_types(task)
        for topic, kind in self.typed_topics.items():
            c.create_subscription(kind, topic, lambda m, t=topic: self.got["typed"].append((t, m)), qos.STATE)
        self.reset_client = c.create_client(Trigger, "sim/reset")
        assert self.reset_client.wait_for_service(timeout_sec=10.0)
        self.wait(lambda: self.got["columns"], 5.0)

    def _on_obs(self, msg) -> None:
        vec = unpack_vector(msg)
        self.got["obs"].append(vec)
        if self.respond:
            self.action_pub.publish(pack_vector(vec.episode, vec.step, ACTIONS[self.task]))

    def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            rclpy.spin_once(self.client, timeout_sec=0.02)
        return bool(predicate())

    def reset(self) -> Trigger.Response:
        future = self.reset_client.call_async(Trigger.Request())
        assert self.wait(future.done, 20.0), "sim/reset did not answer"
        return future.result()

    def episode_done(self) -> bool:
        return bool(self.got["reward"]) and self.got["reward"][-1].values[1] > 0.5

    def close(self) -> None:
        self.spinner.stop()  # the executor thread has ended before the node is destroyed
        self.sim.destroy_node()
        self.client.destroy_node()


@pytest.mark.parametrize("name", ["door_open", "car_racing"])
def test_observation_values_round_trip(name):
    from refine_ros.wire.adapters import (
        ObservationSizeError,
        observation_from_values,
        observation_values,
    )

    task = get_task(name)
    env = task.make_env()
    try:
        obs, _ = env.reset(seed=5)
        values = observation_values(task.spec, task.split_observation(obs))
        assert len(values) == len(task.spec.observation_columns)
        assert list(task.observation_row(obs).values()) == pytest.approx(values)
        back = task.split_observation(observation_from_values(task.spec, values))
        for key, array in task.split_observation(obs).items():
            assert back[key] == pytest.approx(array)
        with pytest.raises(ObservationSizeError, match="expected"):
            observation_from_values(task.spec, values[:-1])
    finally:
        env.close()


def test_door_urdf_kinematics_match_mujoco():
    """What RViz draws from /joint_states is where MuJoCo has the arm, claws and door."""
    from builtin_interfaces.msg import Time

    from refine_ros.wire.adapters import scene_messages

    task = get_task("door_open")
    env = task.make_env()
    try:
        obs, _ = env.reset(seed=3)
        expert = task.expert(env)
        for _ in range(160):  # reach, grasp and start pulling the door
            obs, *_ = env.step(expert(obs))
        joints = scene_messages(TaskView(task).scene(env), Time())["joint_states"]
        positions = dict(zip(joints.name, joints.position, strict=True))
        assert positions["door_hinge"] < -0.05  # the door is really open a little
        poses = urdf_forward_kinematics(ROOT / "urdf" / "door_scene.urdf", positions)
        data = env.unwrapped.raw.data
        for link, body in (("right_l6", "right_l6"), ("hand", "hand"), ("rightclaw", "rightclaw"),
                           ("leftclaw", "leftclaw"), ("door", "door_link")):
            assert poses[link][:3, 3] == pytest.approx(data.body(body).xpos, abs=2e-3), link
        assert poses["door_handle"][:3, 3] == pytest.approx(env.unwrapped.handle_position(), abs=2e-3)
        # the door marker sits on the panel RViz draws from the URDF
        from refine_ros.viewers.markers import Trail, scene_markers

        panel = [m for m in scene_markers(TaskView(task).scene(env), Trail(), Time()).markers
                 if m.ns == "door"][0].pose.position
        expected = poses["door"] @ np.array([0.185, 0.0, 0.0, 1.0])
        assert [panel.x, panel.y, panel.z] == pytest.approx(expected[:3], abs=2e-3)
    finally:
        env.close()


def test_parameters_are_declared_with_descriptions_and_ranges(ros):
    h = Harness("door_open", publish_markers=False)
    try:
        names = [n for n in h.sim._parameters if n != "use_sim_time"]
        for desc in h.sim.describe_parameters(names):
            assert desc.description, f"parameter {desc.name} has no description"
        seed = h.sim.describe_parameter("seed")
        assert seed.integer_range and seed.integer_range[0].from_value == 0
        rate = h.sim.describe_parameter("rate_hz")
        assert rate.floating_point_range[0].to_value == 1000.0
        result = h.sim.set_parameters([Parameter("seed", value=-5)])[0]
        assert not result.successful  # outside the declared range
        assert h.sim.set_parameters([Parameter("task", value="car_racing")])[0].successful is False
    finally:
        h.close()


def test_unknown_task_is_a_clear_error(ros):
    with pytest.raises(ValueError, match="unknown task 'chess'"):
        SimNode(parameter_overrides=[Parameter("task", value="chess")])


def test_door_lockstep_episode(ros):
    spec = get_task("door_open").spec
    h = Harness("door_open", max_steps=25, seed=7, episode=4, publish_expert=True)
    try:
        assert h.got["columns"][-1] == list(spec.observation_columns)
        response = h.reset()
        assert response.success and json.loads(response.message) == {"episode": 4, "seed": 7}
        assert h.wait(h.episode_done, 30.0), "episode did not finish"
        assert h.wait(lambda: any(e["event"] == "end" for e in h.got["events"]), 5.0)
        grips = lambda: [m for t, m in h.got["typed"] if t == "refine/gripper_pose"]  # noqa: E731
        h.wait(lambda: len(h.got["obs"]) >= 26 and len(grips()) >= 26, 3.0)

        steps = [v.step for v in h.got["obs"]]
        assert steps == list(range(26))  # first observation + one per step, in order
        assert {v.episode for v in h.got["obs"]} == {4}
        assert all(len(v.values) == 39 for v in h.got["obs"])
        assert [r.step for r in h.got["reward"]] == list(range(25))
        assert [r.values[1] for r in h.got["reward"]] == [0.0] * 24 + [1.0]
        # the gripper moved the way the actions pushed it (+x, +y, -z)
        first, last = h.got["obs"][0].values, h.got["obs"][-1].values
        assert last[0] > first[0] + 0.01 and last[1] > first[1] + 0.01 and last[2] < first[2]
        assert len(h.got["expert"]) == 25 and all(len(e.values) == 4 for e in h.got["expert"])
        # every step stream names its values (what `ros2 topic echo` shows)
        assert h.got["obs"][0].names == get_task("door_open").spec.observation_columns
        assert h.got["reward"][0].names == ("reward", "done", "success")
        assert h.got["expert"][0].names == ("expert_dx", "expert_dy", "expert_dz", "expert_gripper")

        end = [e for e in h.got["events"] if e["event"] == "end"][-1]
        assert end["episode"] == 4 and end["steps"] == 25.0 and end["metric"] > 0
        topics = {t for t, _ in h.got["typed"]}
        assert topics == {"refine/gripper_pose", "refine/handle_pose", "refine/target_pose", "joint_states"}
        grip = grips()[-1]
        assert grip.header.frame_id == "world"
        assert grip.pose.position.x == pytest.approx(h.sim.env.unwrapped.gripper_position()[0], abs=1e-6)
        joints = [m for t, m in h.got["typed"] if t == "joint_states"][-1]
        assert joints.name[:7] == [f"right_j{i}" for i in range(7)] and "door_hinge" in joints.name

        assert h.wait(lambda: h.got["markers"], 2.0)
        namespaces = {m.ns for array in h.got["markers"] for m in array.markers}
        assert {"door", "handle", "target", "gripper", "trail"} <= namespaces
        trail = [m for m in h.got["markers"][-1].markers if m.ns == "trail"][0]
        assert trail.type == Marker.LINE_STRIP and len(trail.points) >= 2

        # a stale action (wrong step) is ignored: nothing moves after the episode ended either
        before = h.sim.steps_taken
        h.action_pub.publish(pack_vector(4, 3, ACTIONS["door_open"]))
        h.wait(lambda: False, 0.3)
        assert h.sim.steps_taken == before and h.sim.ignored_actions >= 1
    finally:
        h.close()


@pytest.mark.parametrize("name", task_names())
def test_every_registered_task_runs_in_lockstep_with_its_scene(ros, name):
    """The node accepts any registered task and publishes what its scene holds: every typed
    topic once per observation, the scene's shapes and trail as markers, its static shapes."""
    task = get_task(name)
    h = Harness(name, max_steps=8, seed=3, marker_rate_hz=100.0)
    try:
        assert h.typed_topics, f"{name}'s scene feeds no typed topic"
        assert h.reset().success
        assert h.wait(h.episode_done, 30.0), "episode did not finish"
        count = lambda t: sum(1 for topic, _ in h.got["typed"] if topic == t)  # noqa: E731
        h.wait(lambda: all(count(t) >= 9 for t in h.typed_topics) and h.got["markers"] and len(h.got["obs"]) >= 9
               and any(e["event"] == "end" for e in h.got["events"]), 3.0)  # topics arrive in no set order
        assert [v.step for v in h.got["obs"]] == list(range(9))
        assert all(len(v.values) == len(task.spec.observation_columns) for v in h.got["obs"])
        for topic in h.typed_topics:
            assert count(topic) == 9, topic
        scene = TaskView(task).scene(h.sim.env)
        drawn = {m.ns for array in h.got["markers"] for m in array.markers}
        assert {s.ns for s in scene.shapes} <= drawn
        assert ("trail" in drawn) == (scene.trail is not None)
        assert {s.ns for s in TaskView(task).static_shapes(h.sim.env)} <= drawn
        assert h.wait(lambda: any(e["event"] == "end" for e in h.got["events"]), 5.0)  # its own topic
        end = [e for e in h.got["events"] if e["event"] == "end"][-1]
        assert end["task"] == name and end["steps"] == 8.0 and "metric" in end
    finally:
        h.close()


def test_pendulum_joint_state_is_the_observed_angle(ros):
    """The pendulum's joint_states carries the angle and velocity the observation reports, and
    a positive torque turns it counter-clockwise (the angle leaves -pi upwards)."""
    h = Harness("pendulum", max_steps=10, seed=1)
    try:
        assert h.reset().success
        assert h.wait(h.episode_done, 20.0)
        joints = lambda: [m for t, m in h.got["typed"] if t == "joint_states"]  # noqa: E731
        # the two topics arrive in no set order: the last observation may come after the last joint state
        assert h.wait(lambda: len(joints()) >= 11 and len(h.got["obs"]) >= 11, 5.0), (len(joints()), len(h.got["obs"]))
        for obs, js in zip(h.got["obs"], joints(), strict=True):
            assert list(js.name) == ["pendulum_joint"]
            assert js.position[0] == pytest.approx(obs.values[0], abs=1e-6)
            assert js.velocity[0] == pytest.approx(obs.values[1], abs=1e-6)
        velocities = [o.values[1] for o in h.got["obs"]]
        assert velocities[-1] > velocities[0]  # torque +1 keeps adding counter-clockwise speed
    finally:
        h.close()


def test_reset_uses_the_seed_parameter(ros):
    h = Harness("door_open", publish_markers=False, publish_expert=False, seed=11)
    try:
        h.respond = False
        h.reset()
        h.wait(lambda: h.got["obs"], 5.0)
        first = h.got["obs"][-1].values
        h.sim.set_parameters([Parameter("seed", value=12)])
        h.reset()
        h.wait(lambda: len(h.got["obs"]) >= 2, 5.0)
        other = h.got["obs"][-1].values
        h.sim.set_parameters([Parameter("seed", value=11)])
        h.reset()
        h.wait(lambda: len(h.got["obs"]) >= 3, 5.0)
        again = h.got["obs"][-1].values
        assert [o.episode for o in h.got["obs"]] == [0, 1, 2]  # counts up by itself
        assert first == again and first[4:7] != other[4:7]  # the door moves with the seed
    finally:
        h.close()


def test_car_episode_with_markers_and_camera(ros):
    h = Harness("car_racing", max_steps=40, publish_camera=True, camera_width=64, camera_height=48,
                camera_rate_hz=50.0, marker_rate_hz=50.0)
    try:
        assert h.reset().success
        assert h.wait(h.episode_done, 30.0)
        odoms = lambda: [m for t, m in h.got["typed"] if t == "refine/odom"]  # noqa: E731
        h.wait(lambda: len(h.got["obs"]) >= 41 and h.got["camera"] and len(odoms()) >= 41, 3.0)
        assert [v.step for v in h.got["obs"]] == list(range(41))
        speed = [v.values[48] for v in h.got["obs"]]
        assert speed[-1] > speed[0]  # gas 0.6 accelerates the car

        odom = odoms()[-1]
        state = h.sim.env.unwrapped.car_state()
        assert odom.pose.pose.position.x == pytest.approx(state["x"], abs=1e-6)
        assert odom.twist.twist.linear.x > 0  # forward in the body frame
        wheels = [m for t, m in h.got["typed"] if t == "refine/wheel_speeds"][-1]
        assert len(wheels.velocity) == 4
        path = [m for t, m in h.got["typed"] if t == "refine/track_ahead"][-1]
        assert len(path.poses) == 24

        arrays = h.got["markers"]
        track = [m for a in arrays for m in a.markers if m.ns == "track"]
        assert track and track[0].type == Marker.TRIANGLE_LIST
        assert len(track[0].points) % 3 == 0 and len(track[0].colors) == len(track[0].points)
        trail = [m for a in arrays for m in a.markers if m.ns == "trail" and m.action == Marker.ADD][-1]
        assert len(trail.colors) == len(trail.points) >= 2  # coloured by speed
        assert trail.colors[-1] != trail.colors[0]

        image = h.got["camera"][-1]
        assert (image.width, image.height, image.encoding) == (64, 48, "rgb8")
        assert len(image.data) == 64 * 48 * 3 and len(set(bytes(image.data))) > 1
    finally:
        h.close()


def test_door_camera_renders_offscreen(ros):
    h = Harness("door_open", max_steps=2, publish_camera=True, camera_width=80, camera_height=60)
    try:
        assert h.reset().success
        assert h.wait(lambda: h.got["camera"], 30.0), "no camera frame (MUJOCO_GL=osmesa?)"
        image = h.got["camera"][0]
        assert (image.width, image.height) == (80, 60) and len(set(bytes(image.data))) > 10
    finally:
        h.close()


def test_real_time_steps_without_actions(ros):
    h = Harness("car_racing", real_time=True, rate_hz=100.0, publish_markers=False, max_steps=1000)
    try:
        h.respond = False
        assert h.reset().success
        assert h.wait(lambda: len(h.got["obs"]) >= 20, 5.0)
        steps = [v.step for v in h.got["obs"]]
        assert steps == list(range(len(steps)))
        # zero action: the car stays put (no gas)
        assert abs(h.got["obs"][-1].values[48]) < 1e-3
    finally:
        h.close()


def test_executable_exits_cleanly_on_sigint(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "refine_ros.nodes.sim_node", "--ros-args", "-p", "task:=car_racing"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "simulator ready" not in line:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
        assert "simulator ready" in line, "sim node did not start"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "Traceback" not in out
