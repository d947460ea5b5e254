"""The analysis node's link to the learner when the middleware loses one of an action's answers.

On a loaded machine rmw_fastrtps drops a service answer whose writer has not matched the
client's reader yet ("client will not receive response"; rclpy only warns), and the analysis
node waited forever for a fit the learner had finished: the live arm graph's 0-episode stall.
Here a real action server and the real `LearnerLink` talk over DDS; the server loses exactly
the answer the middleware lost there (rclpy's send call does nothing, as after that warning),
and the link must still bring back the learner's result, or end with a clear error, never hang.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from rclpy.action import ActionServer  # noqa: E402
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy  # noqa: E402
from rclpy.node import Node  # noqa: E402

from refine_ros.bringup.spin import NodeSpinner  # noqa: E402
from refine_ros.loop import graph  # noqa: E402
from refine_ros.wire import protocol  # noqa: E402
from refine_ros_interfaces.action import FitProgram  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(90)]


def _lose(monkeypatch, method: str, times: int = 1) -> list[int]:
    """The next `times` calls of the action server's `method` send nothing (what a dropped
    answer looks like from the client); returns the list the dropped calls are counted in."""
    dropped: list[int] = []
    original = getattr(_rclpy.ActionServer, method)

    def lossy(self, *args):
        if len(dropped) >= times:
            return original(self, *args)
        dropped.append(1)
        if method.startswith("take_"):  # taken off the reader, then gone: as if it never arrived
            original(self, *args)
            return (None, None)
        return None

    monkeypatch.setattr(_rclpy.ActionServer, method, lossy)
    return dropped


@pytest.fixture
def link_and_learner(context, monkeypatch):
    """A learner stand-in with the real fit action (it answers 'fitted' after 0.5 s) and the
    analysis node's real link to it, each node spun on its own executor."""
    monkeypatch.setattr(graph, "ANSWER_S", 1.0)
    monkeypatch.setattr(graph, "GONE_AFTER_S", 3.0)
    learner = Node("learner_node", context=context)

    def execute(handle):
        time.sleep(0.5)
        handle.succeed()
        return FitProgram.Result(error="fitted")

    server = ActionServer(learner, FitProgram, protocol.FIT_ACTION, execute_callback=execute)
    client = Node("analysis_node", context=context)
    link = graph.LearnerLink(client, threading.Event())
    spinner = NodeSpinner([learner, client], context, kind="multi")
    spinner.start()
    yield link
    link.closing.set()
    spinner.stop()
    server.destroy()
    client.destroy_node()
    learner.destroy_node()


def _ask(link) -> tuple[int, str, float]:
    started = time.monotonic()
    status, result = link.ask(link.fit_client, protocol.fit_goal(1, "class P: pass"), "fit a program")
    return status, result.error, time.monotonic() - started


def test_a_goal_whose_acceptance_was_lost_is_followed_to_its_result(link_and_learner, monkeypatch, capfd):
    dropped = _lose(monkeypatch, "send_goal_response")
    status, error, seconds = _ask(link_and_learner)
    assert dropped == [1], "the learner's answer to the goal was lost"
    assert (status, error) == (4, "fitted"), "the learner's result arrived (status 4: succeeded)"
    assert seconds < 20, f"took {seconds:.1f} s"
    assert "following the goal by its status" in capfd.readouterr().err


def test_a_result_that_was_lost_is_asked_for_again(link_and_learner, monkeypatch, capfd):
    dropped = _lose(monkeypatch, "send_result_response")
    status, error, seconds = _ask(link_and_learner)
    assert dropped == [1] and (status, error) == (4, "fitted")
    assert seconds < 20, f"took {seconds:.1f} s"
    assert "asking for it again" in capfd.readouterr().err


def test_a_goal_the_learner_never_received_ends_the_wait_with_a_reason(link_and_learner, monkeypatch):
    """The request itself lost: the learner neither answers nor lists the goal, and the wait
    ends after GONE_AFTER_S with an error that says so (the run records it; no hang)."""
    _lose(monkeypatch, "take_goal_request")
    started = time.monotonic()
    with pytest.raises(graph.GraphError, match="neither answered the goal to fit a program nor lists it"):
        _ask(link_and_learner)
    assert time.monotonic() - started < 20
