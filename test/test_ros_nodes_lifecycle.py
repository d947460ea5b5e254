"""The learner and analysis nodes over real rclpy/DDS: they start, declare their parameters,
speak the round protocol and shut down cleanly. Each test owns an rclpy context."""

from __future__ import annotations

import json
import threading

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import String

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.programs import starter_program
from refine_core.store.db import RunDatabase
from refine_ros import qos
from refine_ros.messages import pack_json
from refine_ros.nodes.analysis_node import PARAMETERS as ANALYSIS_PARAMETERS
from refine_ros.nodes.analysis_node import AnalysisNode
from refine_ros.nodes.learner_node import PARAMETERS as LEARNER_PARAMETERS
from refine_ros.nodes.learner_node import LearnerNode
from refine_ros.round_protocol import program_payload

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


@pytest.fixture
def context():
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


class Spin:
    """Spins nodes on their own executor threads, as `refine up` does."""

    def __init__(self, context, *nodes: Node) -> None:
        self.executors = []
        for node in nodes:
            executor = SingleThreadedExecutor(context=context)
            executor.add_node(node)
            threading.Thread(target=executor.spin, daemon=True).start()
            self.executors.append(executor)

    def stop(self) -> None:
        for executor in self.executors:
            executor.shutdown(timeout_sec=5.0)


class Listener(Node):
    def __init__(self, context, topic: str) -> None:
        super().__init__("lifecycle_listener", context=context)
        self.messages: list[dict] = []
        self.arrived = threading.Event()
        self.create_subscription(String, topic, self._on, qos.LATCHED)
        self.pub_program = self.create_publisher(String, "refine/program", qos.LATCHED)

    def _on(self, msg: String) -> None:
        self.messages.append(json.loads(msg.data))
        self.arrived.set()


def _declared(node: Node, names) -> None:
    for name in names:
        assert node.has_parameter(name), name
        descriptor = node.describe_parameter(name)
        assert descriptor.description, f"{name} has no description"


def test_learner_declares_parameters_and_shuts_down(context, run_dir):
    node = LearnerNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("max_steps", value=25),
        Parameter("episodes", value=1), Parameter("selection_episodes", value=2),
        Parameter("eval_episodes", value=0),
    ])
    try:
        expected = {"task", "run_dir", "episodes", "selection_episodes", "eval_episodes", "action_mode",
                    "max_steps", "fit_timeout", "rounds"}
        assert expected <= set(LEARNER_PARAMETERS)
        _declared(node, LEARNER_PARAMETERS)
        assert node.describe_parameter("max_steps").integer_range[0].to_value >= 500
        assert node.describe_parameter("fit_timeout").floating_point_range
        assert node.limit == 25
        assert [(e.kind, e.seed) for e in node.plan] == [("diagnostic", 200), ("selection", 100), ("selection", 101)]
        assert [e.counter for e in node.plan] == [0, 1, 2]
    finally:
        node.destroy_node()
    assert not node._thread.is_alive()


def test_learner_refuses_a_bad_action_mode(context, run_dir):
    with pytest.raises(ValueError, match="action_mode"):
        LearnerNode(context=context, parameter_overrides=[Parameter("action_mode", value="greedy")])


def test_learner_reports_a_bad_program_and_survives_garbage(context, run_dir):
    """A program that breaks the contract comes back as a failed fit with the error text; a
    malformed message is ignored; a program with weights is built without a fit."""
    learner = LearnerNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("episodes", value=0),
        Parameter("selection_episodes", value=0), Parameter("eval_episodes", value=0),
    ])
    listener = Listener(context, "refine/fit_result")
    spin = Spin(context, learner, listener)
    try:
        listener.pub_program.publish(String(data="{not json"))
        bad = "import os\nclass OpenDoorPolicy:\n    pass\n"
        listener.pub_program.publish(pack_json(program_payload(0, "program", bad, bundle=PolicyBundle(bad, {}))))
        assert listener.arrived.wait(60), "no fit result for the bad program"
        first = listener.messages[0]
        assert first["ok"] is False and first["round"] == 0 and first["error"]
        listener.arrived.clear()
        source = starter_program("door_open")
        listener.pub_program.publish(pack_json(program_payload(1, "program", source, bundle=PolicyBundle(source, {}))))
        assert listener.arrived.wait(60), "no fit result for the starter program"
        second = [m for m in listener.messages if m["round"] == 1][0]
        assert second["ok"] is True and second["bundle_b64"]
        assert second["info_schema"]["latents"], "the starter program's latents are reported"
        assert learner.runner is not None and learner.runner.columns[0] == "mean_dx"
    finally:
        spin.stop()
        learner.destroy_node()
        listener.destroy_node()


def test_analysis_node_opens_the_run_and_publishes_the_zero_shot_program(context, run_dir):
    node = AnalysisNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("rounds", value=2),
    ])
    listener = Listener(context, "refine/program")
    spin = Spin(context, node, listener)
    try:
        expected = {"task", "run_dir", "analyst", "transcript", "rounds", "max_attempts", "max_test_requests"}
        assert expected <= set(ANALYSIS_PARAMETERS)
        _declared(node, ANALYSIS_PARAMETERS)
        assert listener.arrived.wait(120), "no program published"
        program = listener.messages[-1]
        assert program["kind"] == "program" and program["round"] == 0 and "OpenDoorPolicy" in program["source"]
        assert program["run_id"] == node.run_id
        with RunDatabase(run_dir) as db:
            assert db.latest_run()["id"] == node.run_id
            assert db.load_demonstration(node.run_id) is not None
    finally:
        spin.stop()
        node.destroy_node()
        listener.destroy_node()
    assert not node._thread.is_alive()


def test_analysis_node_refuses_an_unknown_analyst(context, run_dir):
    with pytest.raises(ValueError, match="analyst"):
        AnalysisNode(context=context, parameter_overrides=[
            Parameter("run_dir", value=str(run_dir)), Parameter("analyst", value="oracle")])
