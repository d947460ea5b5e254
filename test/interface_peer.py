"""The other process of the interface tests: publishes, subscribes, serves or calls the
interfaces of refine_ros_interfaces and of the external interface packages over real DDS.

    python test/interface_peer.py publish   TYPE...   # every type on its own topic, then exit
    python test/interface_peer.py subscribe TYPE...   # one JSON line per type received
    python test/interface_peer.py servo-service       # moveit_msgs/srv/ServoCommandType server
    python test/interface_peer.py fit-server          # refine_ros_interfaces/action/FitProgram server
    python test/interface_peer.py rollout-server      # refine_ros_interfaces/action/RunRollout server
    python test/interface_peer.py gripper-server      # control_msgs/action/GripperCommand server
    python test/interface_peer.py parallel-gripper-server  # control_msgs/action/ParallelGripperCommand

A TYPE is written as ROS tools write it (`refine_ros_interfaces/msg/Step`). Every message is
`sample(type)`: each field filled with a value derived from its name and type, so both ends
(and the test) know what must arrive without a second copy of the message. Servers print
"ready" once they serve, and run until SIGINT.
"""

from __future__ import annotations

import argparse
import array
import importlib
import json
import sys
import time
import zlib
from typing import Any

from rosidl_parser import definition as idl

TOPIC_PREFIX = "interfaces_test/"
FIT_ACTION = "learner/fit_program"
ROLLOUT_ACTION = "learner/run_rollout"
GRIPPER_ACTION = "gripper_controller/gripper_cmd"
PARALLEL_GRIPPER_ACTION = "robotiq_gripper_controller/gripper_cmd"
SERVO_SERVICE = "servo_node/switch_command_type"
FIT_EPOCH_S = 0.1
"""How long the test fit server's "epoch" lasts."""
SETTLE_S = 0.3
"""How long a test server works after its last feedback before it answers (saving a bundle,
running an episode, moving the fingers). rclpy's action client drops feedback that arrives
after the result, and feedback (a topic) and the result (a service) travel separately."""


def load(type_name: str):
    """`pkg/msg/Name` -> the generated class."""
    package, kind, name = type_name.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


def topic_of(type_name: str) -> str:
    return TOPIC_PREFIX + type_name.replace("/", "_").lower()


# -- deterministic sample messages ---------------------------------------------------------------------
def _number(seed: str, low: int, high: int) -> int:
    return low + zlib.crc32(seed.encode()) % (high - low + 1)


def _basic(kind: str, seed: str) -> Any:
    if kind == "boolean":
        return True
    if kind in ("octet", "char"):
        return bytes([_number(seed, 1, 120)]) if kind == "octet" else chr(_number(seed, 65, 90))
    if kind in ("float", "double"):
        return _number(seed, 1, 999) + 0.25  # exact in float32 too
    ranges = {"int8": (1, 100), "uint8": (1, 250), "int16": (1, 30000), "uint16": (1, 60000),
              "int32": (1, 2**30), "uint32": (1, 2**31), "int64": (1, 2**40), "uint64": (1, 2**40)}
    return _number(seed, *ranges[kind])


def _value(slot: idl.AbstractType, seed: str) -> Any:
    if isinstance(slot, idl.BasicType):
        return _basic(slot.typename, seed)
    if isinstance(slot, idl.AbstractGenericString):
        return f"{seed} \u00e9"  # non-ASCII on purpose: strings are UTF-8 on the wire
    if isinstance(slot, idl.NamespacedType):
        return sample(load("/".join([*slot.namespaces, slot.name])), seed)
    if isinstance(slot, idl.AbstractNestedType):
        count = slot.size if isinstance(slot, idl.Array) else 3
        if isinstance(slot, idl.BoundedSequence):
            count = min(count, slot.maximum_size)
        return [_value(slot.value_type, f"{seed}[{i}]") for i in range(count)]
    raise TypeError(f"no sample for {slot!r}")


def sample(cls, seed: str = "") -> Any:
    """A message of `cls` with every field set (to values that are not the defaults)."""
    msg = cls()
    for (name, _), slot in zip(cls.get_fields_and_field_types().items(), cls.SLOT_TYPES, strict=True):
        setattr(msg, name, _value(slot, f"{seed}.{name}"))
    return msg


def plain(value: Any) -> Any:
    """A message as JSON-able data (arrays and numpy arrays as lists)."""
    if hasattr(value, "get_fields_and_field_types"):
        return {name: plain(getattr(value, name)) for name in value.get_fields_and_field_types()}
    if isinstance(value, (list, tuple, array.array)) or type(value).__name__ == "ndarray":
        return [plain(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


# -- processes ----------------------------------------------------------------------------------------
def _node(name: str):
    import rclpy

    rclpy.init()
    return rclpy.create_node(name)


def _latched():
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)


def publish(types: list[str], timeout: float) -> int:
    """Publishes each sample once on a latched topic and waits until a subscriber acknowledged
    it (a late subscriber still gets it)."""
    from rclpy.duration import Duration

    node = _node("interface_publisher")
    pubs = {t: node.create_publisher(load(t), topic_of(t), _latched()) for t in types}
    for type_name, pub in pubs.items():
        pub.publish(sample(load(type_name)))
    deadline = time.monotonic() + timeout
    while any(p.get_subscription_count() == 0 for p in pubs.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    acked = all(p.wait_for_all_acked(Duration(seconds=max(0.1, deadline - time.monotonic()))) for p in pubs.values())
    node.destroy_node()
    return 0 if acked else 1


def subscribe(types: list[str], timeout: float) -> int:
    import rclpy

    node = _node("interface_subscriber")
    pending = set(types)

    def received(type_name: str, msg: Any) -> None:
        if type_name in pending:
            pending.discard(type_name)
            print(json.dumps({"type": type_name, "message": plain(msg)}), flush=True)

    for type_name in types:
        node.create_subscription(load(type_name), topic_of(type_name), lambda m, t=type_name: received(t, m),
                                 _latched())
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_node()
    return 0 if not pending else 1


def _serve(node) -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor

    executor = MultiThreadedExecutor(num_threads=4)
    executor.add_node(node)
    print("ready", flush=True)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def wait_for_feedback_reader(node, action: str, timeout: float = 10.0) -> None:
    """Feedback is a topic: the server's writer may learn of the client's reader only after the
    goal arrived (discovery is not symmetric), and feedback sent before that is lost. A real
    server does not care (progress is progress); this one waits, so the tests can count."""
    deadline = time.monotonic() + timeout
    while node.count_subscribers(f"/{action}/_action/feedback") == 0 and time.monotonic() < deadline:
        time.sleep(0.02)


def servo_service() -> None:
    """Answers as MoveIt Servo does: success for a known command type."""
    from moveit_msgs.srv import ServoCommandType

    node = _node("servo_node_stand_in")
    known = {ServoCommandType.Request.JOINT_JOG, ServoCommandType.Request.TWIST, ServoCommandType.Request.POSE}

    def switch(request, response):
        response.success = request.command_type in known
        return response

    node.create_service(ServoCommandType, SERVO_SERVICE, switch)
    _serve(node)


def fit_server(epochs: int) -> None:
    """A fit that "trains" for `epochs` epochs of FIT_EPOCH_S, with feedback after each and a
    cancel honoured between epochs; the result is a real policy bundle of the program."""
    import numpy as np
    from rclpy.action import ActionServer, CancelResponse

    from refine_core.policy.bundle import PolicyBundle
    from refine_ros_interfaces.action import FitProgram

    node = _node("fit_server")

    def execute(goal_handle):
        wait_for_feedback_reader(node, FIT_ACTION)
        start = time.monotonic()
        for epoch in range(1, epochs + 1):
            time.sleep(FIT_EPOCH_S)
            if goal_handle.is_cancel_requested:
                time.sleep(SETTLE_S)
                goal_handle.canceled()
                return FitProgram.Result(error=f"cancelled after epoch {epoch - 1}")
            goal_handle.publish_feedback(FitProgram.Feedback(epoch=epoch, max_epochs=epochs,
                                                             elapsed=time.monotonic() - start))
        time.sleep(SETTLE_S)
        bundle = PolicyBundle(goal_handle.request.program, {"gain": np.arange(3.0) * goal_handle.request.run_id})
        goal_handle.succeed()
        return FitProgram.Result(bundle_npz=bundle.to_npz_bytes(), weights=["weight_gain"],
                                 report_json=json.dumps({"epochs": epochs}))

    ActionServer(node, FitProgram, FIT_ACTION, execute_callback=execute,
                 cancel_callback=lambda _goal: CancelResponse.ACCEPT)
    _serve(node)


def rollout_server() -> None:
    """Runs the plan's episodes (each a short wait), with feedback as each starts."""
    from rclpy.action import ActionServer

    from refine_ros_interfaces.action import RunRollout
    from refine_ros_interfaces.msg import EpisodeOutcome

    node = _node("rollout_server")

    def execute(goal_handle):
        wait_for_feedback_reader(node, ROLLOUT_ACTION)
        goal = goal_handle.request
        outcomes = []
        for done, planned in enumerate(goal.plan):
            goal_handle.publish_feedback(RunRollout.Feedback(phase=RunRollout.Feedback.RUNNING, episodes_done=done,
                                                             episodes_planned=len(goal.plan), current=planned))
            time.sleep(SETTLE_S)  # the episode runs
            outcomes.append(EpisodeOutcome(planned=planned, counter=1 + 1000 * goal.round + done, steps=goal.max_steps,
                                           complete=True, summary_names=["return", "steps"],
                                           summary_values=[float(planned.seed), float(goal.max_steps)]))
        goal_handle.succeed()
        return RunRollout.Result(episodes=outcomes, control_steps=goal.max_steps * len(goal.plan))

    ActionServer(node, RunRollout, ROLLOUT_ACTION, execute_callback=execute)
    _serve(node)


def gripper_server() -> None:
    """A gripper that reaches any opening within SETTLE_S and stalls above 0.5 of max effort."""
    from control_msgs.action import GripperCommand
    from rclpy.action import ActionServer

    node = _node("gripper_stand_in")

    def execute(goal_handle):
        wait_for_feedback_reader(node, GRIPPER_ACTION)
        command = goal_handle.request.command
        goal_handle.publish_feedback(GripperCommand.Feedback(position=command.position / 2, effort=0.0))
        time.sleep(SETTLE_S)  # the fingers move
        goal_handle.succeed()
        return GripperCommand.Result(position=command.position, effort=command.max_effort / 2,
                                     stalled=command.max_effort > 0.5, reached_goal=True)

    ActionServer(node, GripperCommand, GRIPPER_ACTION, execute_callback=execute)
    _serve(node)


def parallel_gripper_server() -> None:
    """ros2_controllers' parallel gripper action controller as the goal sees it: a goal naming
    other than exactly one position is rejected; the one joint reaches its position."""
    from control_msgs.action import ParallelGripperCommand
    from rclpy.action import ActionServer, GoalResponse
    from sensor_msgs.msg import JointState

    node = _node("parallel_gripper_stand_in")

    def accept(goal):
        return GoalResponse.ACCEPT if len(goal.command.position) == 1 else GoalResponse.REJECT

    def execute(goal_handle):
        wait_for_feedback_reader(node, PARALLEL_GRIPPER_ACTION)
        command = goal_handle.request.command
        target = command.position[0]
        state = JointState(name=list(command.name), position=[target / 2])
        goal_handle.publish_feedback(ParallelGripperCommand.Feedback(state=state))
        time.sleep(SETTLE_S)  # the fingers move
        goal_handle.succeed()
        return ParallelGripperCommand.Result(state=JointState(name=list(command.name), position=[target]),
                                             stalled=False, reached_goal=True)

    ActionServer(node, ParallelGripperCommand, PARALLEL_GRIPPER_ACTION, execute_callback=execute,
                 goal_callback=accept)
    _serve(node)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("publish", "subscribe", "servo-service", "fit-server", "rollout-server",
                                         "gripper-server", "parallel-gripper-server"))
    parser.add_argument("types", nargs="*")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--epochs", type=int, default=50)
    args = parser.parse_args()
    if args.mode == "publish":
        return publish(args.types, args.timeout)
    if args.mode == "subscribe":
        return subscribe(args.types, args.timeout)
    {"servo-service": servo_service, "rollout-server": rollout_server, "gripper-server": gripper_server,
     "parallel-gripper-server": parallel_gripper_server,
     "fit-server": lambda: fit_server(args.epochs)}[args.mode]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
