"""The QoS of every endpoint of the recorded step streams, as the profile's real nodes create
them: every writer of a stream the rollout logger records keeps enough history for it (a
depth-1 writer overwrites what the logger has not acknowledged: the issue's 18 missing action
steps), every reader is compatible with every writer, and the logger reads deep. Discovery
does not carry history depth, so the endpoints are read from the nodes themselves; that they
match over DDS is checked with the graph."""

from __future__ import annotations

import time

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import ReliabilityPolicy  # noqa: E402

from refine_ros.nodes.rollout_logger import SAFE_TOPIC, TOPICS  # noqa: E402
from refine_ros.wire import qos  # noqa: E402

RECORDED = ("/" + t for t in (*TOPICS.values(), SAFE_TOPIC))


def _params(**values) -> dict:
    return {"parameter_overrides": [Parameter(k, value=v) for k, v in values.items()]}


def _limits(node: str) -> dict:
    """The arm profile's own values for a robot node (its limits have no code default)."""
    from refine_ros.bringup import resolve_profile

    return dict(resolve_profile("arm_real", check_modules=False).node(node).parameters)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The car_sim nodes and the arm_real robot side, in one context (what runs where does
    not change an endpoint's QoS)."""
    from refine_ros.nodes.learner_node import LearnerNode
    from refine_ros.nodes.rollout_logger import RolloutLogger
    from refine_ros.nodes.safety_node import SafetyNode
    from refine_ros.nodes.sim_node import SimNode
    from refine_ros.robots.arm.arm_bridge import ArmBridge

    run_dir = str(tmp_path_factory.mktemp("qos"))
    context = rclpy.Context()
    rclpy.init(context=context)
    nodes = []
    try:
        nodes = [
            SimNode(context=context, **_params(task="car_racing", publish_markers=False)),
            LearnerNode(context=context, **_params(task="car_racing", run_dir=run_dir)),
            RolloutLogger(context=context, **_params(task="door_open", run_dir=run_dir, log_safe_action=True)),
            SafetyNode(context=context, **_params(**_limits("safety_node"))),
            ArmBridge(context=context, **_params(**_limits("arm_bridge"))),
        ]
        time.sleep(1.0)  # discovery within the process
        yield nodes
    finally:
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def _endpoints(nodes, topic: str, kind: str) -> dict[str, object]:
    """node name -> QoS profile of its publisher ('pub') or subscription ('sub') on topic."""
    found = {}
    for node in nodes:
        for endpoint in (node.publishers if kind == "pub" else node.subscriptions):
            if endpoint.topic_name == topic:
                found[node.get_name()] = endpoint.qos_profile
    return found


@pytest.mark.ros
@pytest.mark.parametrize("topic", list(RECORDED))
def test_every_writer_of_a_recorded_stream_keeps_history_for_the_logger(graph, topic):
    writers, readers = _endpoints(graph, topic, "pub"), _endpoints(graph, topic, "sub")
    assert writers, f"nobody publishes {topic}"
    assert readers.get("rollout_logger") == qos.LOG, f"the logger does not record {topic} with LOG"
    for name, profile in writers.items():
        assert profile.reliability == ReliabilityPolicy.RELIABLE, f"{name} writes {topic} best effort"
        assert profile.depth >= qos.CONTROL.depth, \
            f"{name} writes {topic} with depth {profile.depth}: samples the logger has not acknowledged " \
            "are overwritten"
    # and over DDS every reader matched every writer (an incompatible QoS never matches)
    node = graph[0]
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        matched = {info.node_name for info in node.get_subscriptions_info_by_topic(topic)}
        if set(readers) <= matched:
            break
        time.sleep(0.1)
    for publisher in (p for n in graph for p in n.publishers if p.topic_name == topic):
        assert publisher.get_subscription_count() == len(readers), f"a reader of {topic} does not match"


@pytest.mark.ros
def test_command_readers_keep_only_the_newest_command(graph):
    """Where only the newest command matters the reader stays depth 1, even though the
    writer keeps history for the logger."""
    for topic, name in (("/refine/action", "sim_node"), ("/refine/action", "safety_node"),
                        ("/refine/safe_action", "arm_bridge")):
        assert _endpoints(graph, topic, "sub")[name] == qos.COMMAND, (topic, name)


@pytest.mark.ros
def test_the_learner_answers_every_observation_in_order(graph):
    """The learner reads observations with the deep CONTROL history: under a momentary stall it
    answers the backlog step by step instead of skipping steps (which the logger would record
    as missing actions)."""
    assert _endpoints(graph, "/refine/observation", "sub")["learner_node"] == qos.CONTROL
    assert _endpoints(graph, "/refine/reward", "sub")["learner_node"] == qos.CONTROL
