"""The learner's first action reaches the logger: `wait_for_listeners` before a round.

A reliable, volatile publisher drops what it sends before a subscription has matched it. The
live arm graph lost an episode's first five actions and policy steps to the logger so (CI: a
`gap` event, steps 0-4, in the run database), because the learner answered the first
observation while discovery between it and the logger, two processes started together, was
still under way. Here the publisher and the listener are two DDS participants, as two
processes are.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.node import Node  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from refine_ros.bringup.spin import NodeSpinner, wait_for_listeners  # noqa: E402
from refine_ros.wire import qos  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(90)]

TOPIC = f"listener_check_{id(object())}"  # a topic of its own: other tests' nodes may still be in the graph


def _participant(name: str) -> tuple[Context, Node, NodeSpinner]:
    context = Context()
    rclpy.init(context=context)
    node = Node(name, context=context)
    return context, node, NodeSpinner([node], context).start()


def _close(context: Context, node: Node, spinner: NodeSpinner) -> None:
    spinner.stop()
    node.destroy_node()
    rclpy.try_shutdown(context=context)


def test_the_first_message_after_the_wait_reaches_a_listener_that_started_later():
    learner = _participant("listener_check_learner")
    publisher = learner[1].create_publisher(Float64MultiArray, TOPIC, qos.CONTROL)
    never = threading.Event()
    logger: list = []
    try:
        missing = wait_for_listeners(learner[1], [publisher], ["rollout_logger"], 0.5, never)
        assert missing is not None and "rollout_logger" in missing, "no listener yet: the wait says who is missing"

        heard: list[float] = []

        def start_the_logger_late() -> None:
            time.sleep(1.0)
            logger.extend(_participant("rollout_logger"))
            logger[1].create_subscription(Float64MultiArray, TOPIC, lambda m: heard.append(m.data[0]), qos.CONTROL)

        threading.Thread(target=start_the_logger_late, daemon=True).start()
        t0 = time.monotonic()
        assert wait_for_listeners(learner[1], [publisher], ["rollout_logger"], 30.0, never) is None
        assert time.monotonic() - t0 >= 0.9, "it waited for the listener to come up"
        publisher.publish(Float64MultiArray(data=[1.0]))  # at once: the first action of a round
        deadline = time.monotonic() + 10.0
        while not heard and time.monotonic() < deadline:
            time.sleep(0.02)
        assert heard == [1.0], "the first message after the wait was delivered"
    finally:
        if len(logger) == 3:
            _close(*logger)
        _close(*learner)


def test_a_stop_ends_the_wait_at_once():
    learner = _participant("listener_check_stopped")
    publisher = learner[1].create_publisher(Float64MultiArray, TOPIC + "_stop", qos.CONTROL)
    stop = threading.Event()
    stop.set()
    try:
        t0 = time.monotonic()
        assert wait_for_listeners(learner[1], [publisher], ["rollout_logger"], 60.0, stop) is not None
        assert time.monotonic() - t0 < 5.0, "a learner shutting down does not wait out the timeout"
    finally:
        _close(*learner)
