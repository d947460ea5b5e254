"""refine_ros_interfaces and the test copies of external interface packages, as built by
`make install`: every type imports, crosses DDS between two processes unchanged, and the
services and actions work across processes (feedback, cancel). The other process is
`test/interface_peer.py`, or for the fit action the real `learner_node` from its console script;
the ros2 command-line tools are used where they are installed.

Copies of external packages (test/interfaces/) must be the upstream types exactly: their type
hashes are compared with the ones computed from the upstream definitions, and the constants
(which the hash does not cover) with the upstream values.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from refine_ros.bench import ros_env, stop_process

pytestmark = pytest.mark.ros

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER = HERE / "interface_peer.py"
OURS = ROOT / "refine_ros_interfaces"

OUR_MESSAGES = [f"refine_ros_interfaces/msg/{p.stem}" for p in sorted((OURS / "msg").glob("*.msg"))]
EXTERNAL_MESSAGES = [
    "ackermann_msgs/msg/AckermannDrive", "ackermann_msgs/msg/AckermannDriveStamped",
    "control_msgs/msg/GripperCommand", "tf2_msgs/msg/TFMessage", "moveit_msgs/msg/ServoStatus",
    "vesc_msgs/msg/VescState", "vesc_msgs/msg/VescStateStamped",
]

UPSTREAM_HASHES = {
    # RIHS01 type hashes of the upstream definitions (ackermann_msgs ros2 branch, control_msgs
    # and geometry2 jazzy branches, moveit_msgs ros2 branch as released for Jazzy, f1tenth/vesc
    # ros2 branch), computed by building those files with the same rosidl generators.
    # ParallelGripperCommand is the same file on control_msgs' humble and jazzy branches (what
    # ros2_controllers' parallel gripper action controller serves, e.g. ros2_robotiq_gripper on
    # Jazzy and later).
    "ackermann_msgs/msg/AckermannDrive": "acf287a224a947dd1b0b87d6d76cdb73f497b0237b8fc73be2173b2ebbb82c99",
    "ackermann_msgs/msg/AckermannDriveStamped": "48ca7612a08d3bb72744fd98b71b7cf2ea24c6ad50fa4e1aa0bbad963c90d8cf",
    "control_msgs/msg/GripperCommand": "57eb8f326c9889ca8bb34ead82cc94cc09bf6bc5c3b6c09546dca3a00b589890",
    "control_msgs/action/GripperCommand": "e17c0e644eccf14bea84a0a93e0977182872c2eb7873ca6694900059b46dbc84",
    "control_msgs/action/ParallelGripperCommand":
        "adfd3c1ebe8abc38ebcc0e454b6423d291d4010dd5697d14eca5b9be4726ae18",
    "tf2_msgs/msg/TFMessage": "e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
    "moveit_msgs/msg/ServoStatus": "882a75f7648d6f8a9bf528e4787f51c58f2d5d88b702e450443d99f270e6936b",
    "moveit_msgs/srv/ServoCommandType": "2065f4daf271249330596d344ecd48f5c2d2a52e3b21b1fc56d99c52b8eeae22",
    "vesc_msgs/msg/VescState": "a327638b635aeda64096cca0c64c8d49702151a5ddf85fb1787de014488f54b3",
    "vesc_msgs/msg/VescStateStamped": "9a9543e67217b2e85a8fbe0d6b140eafa020d9f4ac08e11bb54cc4ba6d4d444c",
}

UPSTREAM_CONSTANTS = {
    "moveit_msgs/msg/ServoStatus": {
        "INVALID": -1, "NO_WARNING": 0, "DECELERATE_FOR_APPROACHING_SINGULARITY": 1, "HALT_FOR_SINGULARITY": 2,
        "DECELERATE_FOR_LEAVING_SINGULARITY": 3, "DECELERATE_FOR_COLLISION": 4, "HALT_FOR_COLLISION": 5,
        "JOINT_BOUND": 6},
    "moveit_msgs/srv/ServoCommandType.Request": {"JOINT_JOG": 0, "TWIST": 1, "POSE": 2},
    "vesc_msgs/msg/VescState": {
        "FAULT_CODE_NONE": 0, "FAULT_CODE_OVER_VOLTAGE": 1, "FAULT_CODE_UNDER_VOLTAGE": 2, "FAULT_CODE_DRV8302": 3,
        "FAULT_CODE_ABS_OVER_CURRENT": 4, "FAULT_CODE_OVER_TEMP_FET": 5, "FAULT_CODE_OVER_TEMP_MOTOR": 6},
}


def load(type_name: str):
    from interface_peer import load as load_type

    name, _, inner = type_name.partition(".")
    cls = load_type(name)
    return getattr(cls, inner) if inner else cls


def start_peer(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(PEER), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env or ros_env())


def wait_ready(proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Blocks until a server peer printed "ready" (it serves from then on)."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == "ready":
            return
        if line == "" and proc.poll() is not None:
            break
        lines.append(line)
    raise AssertionError(f"peer {proc.args[2:]} did not get ready: {''.join(lines)[-2000:]}")


def share_of(package: str) -> Path:
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory(package))


@pytest.fixture
def ament_path(monkeypatch):
    """The venv's ament index on AMENT_PREFIX_PATH (make exports it; a bare pytest may not)."""
    paths = [sys.prefix, *[p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]]
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join(dict.fromkeys(paths)))


# -- what was built -------------------------------------------------------------------------------------
def test_every_interface_file_of_the_package_is_built_and_indexed(ament_path):
    """A file added to msg/ or action/ but not to CMakeLists.txt would silently not exist."""
    from ament_index_python import get_resource

    on_disk = sorted(str(p.relative_to(OURS)) for kind in ("msg", "srv", "action") for p in (OURS / kind).glob("*.*"))
    indexed, _ = get_resource("rosidl_interfaces", "refine_ros_interfaces")
    built = sorted(line for line in indexed.splitlines() if not line.endswith(".idl"))
    assert on_disk and built == on_disk


@pytest.mark.parametrize("type_name", sorted(UPSTREAM_HASHES))
def test_external_copies_have_the_upstream_type_hash(type_name, ament_path):
    package, kind, name = type_name.split("/")
    description = share_of(package) / kind / f"{name}.json"
    if not description.is_file():
        pytest.skip(f"{package} here is a real install without type descriptions ({description})")
    hashes = {h["type_name"]: h["hash_string"] for h in json.loads(description.read_text())["type_hashes"]}
    assert hashes[type_name] == "RIHS01_" + UPSTREAM_HASHES[type_name]


@pytest.mark.parametrize("type_name", sorted(UPSTREAM_CONSTANTS))
def test_external_copies_have_the_upstream_constants(type_name):
    cls = load(type_name)
    assert {name: getattr(cls, name) for name in UPSTREAM_CONSTANTS[type_name]} == UPSTREAM_CONSTANTS[type_name]


def test_the_generated_classes_import_with_nothing_sourced():
    """A fresh venv Python with no ROS environment at all (no AMENT_PREFIX_PATH, no
    LD_LIBRARY_PATH) loads the generated type support: what a node executable started by a
    launch or a test gets."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("AMENT_PREFIX_PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "_ROS_WHEELS_BOOTSTRAP_COMPLETE")}
    code = ("from rclpy.serialization import serialize_message, deserialize_message\n"
            "from refine_ros_interfaces.msg import Step\n"
            "from refine_ros_interfaces.action import FitProgram\n"
            "from ackermann_msgs.msg import AckermannDriveStamped\n"
            "m = Step(episode=2, step=5, names=['speed'], values=[1.5])\n"
            "print(deserialize_message(serialize_message(m), Step).names, FitProgram.Feedback().epoch,\n"
            "      AckermannDriveStamped().drive.speed)\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['speed']", "0", "0.0"]


# -- between processes ----------------------------------------------------------------------------------
def test_every_message_crosses_dds_between_two_processes_unchanged():
    from interface_peer import plain, sample

    types = OUR_MESSAGES + EXTERNAL_MESSAGES
    env = ros_env()
    subscriber = start_peer("subscribe", *types, env=env)
    publisher = start_peer("publish", *types, env=env)
    try:
        out, _ = subscriber.communicate(timeout=60)
    finally:
        stop_process(publisher)
        stop_process(subscriber)
    received = {}
    for line in out.splitlines():
        if line.startswith("{"):
            item = json.loads(line)
            received[item["type"]] = item["message"]
    assert sorted(received) == sorted(types), out[-2000:]
    for type_name in types:
        expected = json.loads(json.dumps(plain(sample(load(type_name)))))
        assert received[type_name] == expected, type_name


@pytest.fixture
def client_node(context):
    """A node of the test process, spun on its own thread."""
    import rclpy

    from refine_ros.bringup.spin import NodeSpinner

    node = rclpy.create_node("interfaces_test_client", context=context)
    spinner = NodeSpinner([node], context, kind="multi").start()
    yield node
    spinner.stop()
    node.destroy_node()


def wait_future(future, timeout: float = 30.0):
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no answer in time"
    return future.result()


def wait_for_count(items: list, count: int, timeout: float = 10.0) -> None:
    """Feedback and result travel on different channels (a topic and a service), so the result
    may be in before the last feedback message has been taken: wait for the feedback too."""
    deadline = time.monotonic() + timeout
    while len(items) < count and time.monotonic() < deadline:
        time.sleep(0.01)


def send_goal(node, action_type, name: str, goal, feedback: list):
    from refine_ros.bringup.spin import action_client

    client = action_client(node, action_type, name)
    assert client.wait_for_server(timeout_sec=30.0), f"no {name} action server"
    handle = wait_future(client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback)))
    assert handle.accepted
    return handle


def test_servo_command_type_service_between_processes(client_node):
    from interface_peer import SERVO_SERVICE
    from moveit_msgs.srv import ServoCommandType

    server = start_peer("servo-service")
    try:
        wait_ready(server)
        client = client_node.create_client(ServoCommandType, SERVO_SERVICE)
        assert client.wait_for_service(timeout_sec=30.0)
        twist = wait_future(client.call_async(ServoCommandType.Request(command_type=ServoCommandType.Request.TWIST)))
        unknown = wait_future(client.call_async(ServoCommandType.Request(command_type=7)))
    finally:
        stop_process(server)
    assert twist.success is True and unknown.success is False


@pytest.fixture
def learner(tmp_path):
    """The real learner_node, from its console script, on a run directory holding a door
    demonstration; yields its process once its action servers are up."""
    from refine_core.rollout.demo import record_demonstration
    from refine_core.store.db import RunDatabase
    from refine_core.tasks.registry import get_task

    run_dir = tmp_path / "run"
    with RunDatabase(run_dir) as db:
        run_id = db.create_run("door_open")
        record_demonstration(get_task("door_open"), max_steps=60).save(db, run_id)
    script = Path(sys.executable).parent / "learner_node"
    proc = subprocess.Popen([str(script), "--ros-args", "-p", "task:=door_open", "-p", f"run_dir:={run_dir}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 90.0
    while not any("goals" in line and "ready" in line for line in lines):
        assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)[-2000:]
        time.sleep(0.1)
    proc.run_id, proc.lines = run_id, lines
    yield proc
    stop_process(proc)


def test_the_learner_reports_fit_epochs_and_stops_a_cancelled_fit_at_once(client_node, learner):
    """The real learner process: a FitProgram goal gets an epoch count as feedback; a cancel
    sent through the standard `_action/cancel_goal` service with an empty request (what
    `ros2 service call ... {}` and `ros2 action` send) kills the sandboxed fit within seconds
    and the goal ends CANCELED."""
    from action_msgs.msg import GoalStatus
    from action_msgs.srv import CancelGoal
    from programs.slow import slow_door_program

    from refine_core.policy.programs import starter_program
    from refine_ros.wire import protocol
    from refine_ros_interfaces.action import FitProgram

    feedback: list = []
    handle = send_goal(client_node, FitProgram, protocol.FIT_ACTION,
                       protocol.fit_goal(learner.run_id, slow_door_program()), feedback)
    result = handle.get_result_async()
    deadline = time.monotonic() + 60.0
    while len(feedback) < 3 and time.monotonic() < deadline and not result.done():
        time.sleep(0.02)
    assert len(feedback) >= 3, ("no epoch feedback from the learner: "
                                f"{result.result().result.error if result.done() else 'no result either'}\n"
                                + "".join(learner.lines[-20:]))
    cancel_all = client_node.create_client(CancelGoal, f"/{protocol.FIT_ACTION}/_action/cancel_goal")
    assert cancel_all.wait_for_service(timeout_sec=10.0)
    started = time.monotonic()
    cancel = wait_future(cancel_all.call_async(CancelGoal.Request()))
    outcome = wait_future(result)
    cancel_took = time.monotonic() - started
    assert len(cancel.goals_canceling) == 1
    assert outcome.status == GoalStatus.STATUS_CANCELED, outcome.result.error
    assert outcome.result.error.startswith("cancelled by the caller after "), outcome.result.error
    epochs = [f.epoch for f in feedback]
    assert epochs == sorted(epochs) and 3 <= epochs[-1] < feedback[-1].max_epochs
    assert cancel_took < 10.0
    # and it serves the next goal
    handle = send_goal(client_node, FitProgram, protocol.FIT_ACTION,
                       protocol.fit_goal(learner.run_id, starter_program("door_open")), [])
    outcome = wait_future(handle.get_result_async(), timeout=120.0)
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED and outcome.result.error == ""
    assert json.loads(outcome.result.report_json)["epochs"] > 0 and outcome.result.bundle_npz


def test_fit_action_returns_a_policy_bundle_as_npz_bytes(client_node):
    import numpy as np
    from interface_peer import FIT_ACTION

    from refine_core.policy.bundle import PolicyBundle
    from refine_ros_interfaces.action import FitProgram

    server = start_peer("fit-server", "--epochs", "3")
    feedback: list = []
    try:
        wait_ready(server)
        handle = send_goal(client_node, FitProgram, FIT_ACTION, FitProgram.Goal(run_id=2, program="source text"),
                           feedback)
        outcome = wait_future(handle.get_result_async())
    finally:
        stop_process(server)
    wait_for_count(feedback, 3)
    assert [f.epoch for f in feedback] == [1, 2, 3]
    bundle = PolicyBundle.from_npz_bytes(bytes(outcome.result.bundle_npz))
    assert bundle.source == "source text"
    np.testing.assert_array_equal(bundle.weights["gain"], [0.0, 2.0, 4.0])
    assert json.loads(outcome.result.report_json) == {"epochs": 3}


def test_rollout_action_reports_each_episode(client_node):
    from interface_peer import ROLLOUT_ACTION

    from refine_ros_interfaces.action import RunRollout
    from refine_ros_interfaces.msg import PlannedEpisode

    plan = [PlannedEpisode(kind="diagnostic", index=0, seed=7), PlannedEpisode(kind="selection", index=0, seed=100),
            PlannedEpisode(kind="eval", index=0, seed=1000)]
    server = start_peer("rollout-server")
    feedback: list = []
    try:
        wait_ready(server)
        handle = send_goal(client_node, RunRollout, ROLLOUT_ACTION,
                           RunRollout.Goal(run_id=1, round=2, mode="mean", max_steps=40, plan=plan), feedback)
        result = wait_future(handle.get_result_async()).result
    finally:
        stop_process(server)
    wait_for_count(feedback, 3)
    assert [(f.episodes_done, f.episodes_planned, f.current.kind) for f in feedback] == [
        (0, 3, "diagnostic"), (1, 3, "selection"), (2, 3, "eval")]
    assert [(e.planned.kind, e.planned.seed, e.counter, e.steps) for e in result.episodes] == [
        ("diagnostic", 7, 2001, 40), ("selection", 100, 2002, 40), ("eval", 1000, 2003, 40)]
    assert dict(zip(result.episodes[1].summary_names, result.episodes[1].summary_values, strict=True)) == {
        "return": 100.0, "steps": 40.0}
    assert result.control_steps == 120


def test_gripper_command_action_between_processes(client_node):
    from control_msgs.action import GripperCommand
    from control_msgs.msg import GripperCommand as Command
    from interface_peer import GRIPPER_ACTION

    server = start_peer("gripper-server")
    feedback: list = []
    try:
        wait_ready(server)
        handle = send_goal(client_node, GripperCommand, GRIPPER_ACTION,
                           GripperCommand.Goal(command=Command(position=0.04, max_effort=20.0)), feedback)
        result = wait_future(handle.get_result_async()).result
    finally:
        stop_process(server)
    wait_for_count(feedback, 1)
    assert [f.position for f in feedback] == [0.02]
    assert (result.position, result.effort, result.stalled, result.reached_goal) == (0.04, 10.0, True, True)


def test_parallel_gripper_command_action_between_processes(client_node):
    """The Jazzy-and-later gripper action: one joint's target in a JointState; a goal with two
    positions is rejected, as ros2_controllers' parallel gripper controller rejects it."""
    from control_msgs.action import ParallelGripperCommand
    from interface_peer import PARALLEL_GRIPPER_ACTION
    from sensor_msgs.msg import JointState

    from refine_ros.bringup.spin import action_client

    server = start_peer("parallel-gripper-server")
    feedback: list = []
    try:
        wait_ready(server)
        goal = ParallelGripperCommand.Goal(command=JointState(name=["robotiq_85_left_knuckle_joint"], position=[0.8]))
        handle = send_goal(client_node, ParallelGripperCommand, PARALLEL_GRIPPER_ACTION, goal, feedback)
        result = wait_future(handle.get_result_async()).result
        client = action_client(client_node, ParallelGripperCommand, PARALLEL_GRIPPER_ACTION)
        assert client.wait_for_server(timeout_sec=30.0)
        two = ParallelGripperCommand.Goal(command=JointState(name=["a", "b"], position=[0.1, 0.2]))
        rejected = wait_future(client.send_goal_async(two))
    finally:
        stop_process(server)
    wait_for_count(feedback, 1)
    assert [list(f.state.position) for f in feedback] == [[0.4]]
    assert list(result.state.position) == [0.8] and result.reached_goal and not result.stalled
    assert list(result.state.name) == ["robotiq_85_left_knuckle_joint"]
    assert not rejected.accepted


# -- the ros2 command-line tools, where installed ------------------------------------------------------------
def ros2_command() -> str:
    """The `ros2` of this venv, else one on PATH; the test skips when there is none (ros2cli
    is not on PyPI: it comes with a ROS install)."""
    beside = Path(sys.executable).parent / "ros2"
    found = str(beside) if beside.is_file() else shutil.which("ros2")
    if found is None:
        pytest.skip("ros2cli is not installed here (it comes with a ROS 2 install, not from PyPI)")
    return found


def ros2(*args: str, timeout: float = 60.0, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([ros2_command(), *args], capture_output=True, text=True, timeout=timeout,
                          env=env or ros_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_ros2_interface_show_and_list_name_our_interfaces(ament_path):
    shown = ros2("interface", "show", "refine_ros_interfaces/action/FitProgram")
    for field in ("string program", "uint8[] bundle_npz", "uint32 epoch", "uint32 max_epochs"):
        assert field in shown, shown
    listed = ros2("interface", "list").split()
    assert {"refine_ros_interfaces/msg/Step", "refine_ros_interfaces/action/FitProgram",
            "refine_ros_interfaces/action/RunRollout"} <= set(listed)


def test_ros2_topic_echo_shows_a_step_with_its_column_names(ament_path):
    from interface_peer import topic_of

    env = ros_env()
    publisher = start_peer("publish", "refine_ros_interfaces/msg/Step", env=env)
    try:
        echoed = ros2("topic", "echo", "--once", "--qos-durability", "transient_local", "--qos-reliability",
                      "reliable", "/" + topic_of("refine_ros_interfaces/msg/Step"), "refine_ros_interfaces/msg/Step",
                      env=env)
    finally:
        stop_process(publisher)
    assert "names:" in echoed and ".names[0]" in echoed and "values:" in echoed, echoed


def test_a_fit_is_cancelled_from_the_command_line(client_node, learner, ament_path):
    """`ros2 service call <action>/_action/cancel_goal` with an empty request cancels every goal
    of the learner's fit action (the standard action cancel service)."""
    from action_msgs.msg import GoalStatus
    from programs.slow import slow_door_program

    from refine_ros.wire import protocol
    from refine_ros_interfaces.action import FitProgram

    ros2_command()
    feedback: list = []
    handle = send_goal(client_node, FitProgram, protocol.FIT_ACTION,
                       protocol.fit_goal(learner.run_id, slow_door_program()), feedback)
    out = ros2("service", "call", f"/{protocol.FIT_ACTION}/_action/cancel_goal", "action_msgs/srv/CancelGoal", "{}")
    outcome = wait_future(handle.get_result_async())
    assert "goals_canceling=[action_msgs.msg.GoalInfo(" in out, out
    assert outcome.status == GoalStatus.STATUS_CANCELED and "cancelled" in outcome.result.error


def test_ros2_action_send_goal_fits_and_shows_feedback(learner, ament_path):
    from refine_ros.wire import protocol

    out = ros2("action", "send_goal", "--feedback", "/" + protocol.FIT_ACTION,
               "refine_ros_interfaces/action/FitProgram", f"{{run_id: {learner.run_id}, program: 'class P: pass'}}")
    assert "SUCCEEDED" in out and "error:" in out, out

