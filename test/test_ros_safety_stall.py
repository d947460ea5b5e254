"""The watchdog after a stall of the safety node's own process: rclpy runs a ready timer before
ready subscriptions, so the first tick after the stall would judge inputs that are already
waiting in the queue as stale and stop a robot fed on time (issue 11: watchdog trips while
fresh inputs arrived). That tick defers to the next one, which still stops a robot whose
inputs really went stale."""

from __future__ import annotations

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from rclpy.parameter import Parameter  # noqa: E402

from refine_ros.wire.messages import pack_vector  # noqa: E402


@pytest.fixture
def safety():
    from refine_ros.bringup import resolve_profile
    from refine_ros.nodes.safety_node import SafetyNode

    limits = dict(resolve_profile("arm_real", check_modules=False).node("safety_node").parameters)
    limits.update(require_confirmation=False, dry_run=False)  # the arm's limits, no operator
    context = rclpy.Context()
    rclpy.init(context=context)
    node = SafetyNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in limits.items()])
    node.sent = []
    node._send = lambda decision: node.sent.append(decision)  # what would go on the wire
    try:
        yield node
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)


def _feed(node, now: float) -> None:
    node.filter.on_observation([0.0, 0.6, 0.2], now)
    node.filter.on_policy(2, pack_vector(1, 0, [0.1, 0.0, 0.0, 1.0]).data, now)


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
def test_a_late_tick_defers_and_the_next_one_judges(safety):
    period = safety.filter.config.watchdog_period
    clock = [100.0]
    safety._now = lambda: clock[0]
    _feed(safety, 100.0)
    safety._on_tick()  # on time, inputs fresh
    assert safety.filter.counters.watchdog_trips == 0

    clock[0] += 0.2  # this process was held up for 200 ms; fresh inputs wait in the queue
    safety._on_tick()
    assert safety.filter.counters.watchdog_trips == 0 and safety.late_ticks == 1
    _feed(safety, clock[0])  # the queued messages run after the late tick
    clock[0] += period
    safety._on_tick()
    assert safety.filter.counters.watchdog_trips == 0, "fresh inputs: no trip"

    clock[0] += 0.2  # held up again, and this time nothing arrived meanwhile
    safety._on_tick()
    clock[0] += period
    safety._on_tick()
    assert safety.filter.counters.watchdog_trips == 1, "stale inputs still stop the robot one period later"
    assert safety.sent[-1] is not None and safety.sent[-1].reason == "stale"


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
def test_late_ticks_in_a_row_defer_at_most_once(safety):
    """Issue 16: "A watchdog tick that runs late is skipped with no bound on consecutive skips".
    A process held up again and again still has every second tick judge."""
    period = safety.filter.config.watchdog_period
    clock = [100.0]
    safety._now = lambda: clock[0]
    _feed(safety, 100.0)
    safety._on_tick()
    for _ in range(2):  # two late ticks in a row, nothing arriving meanwhile
        clock[0] += 0.2
        safety._on_tick()
    assert safety.late_ticks == 1, "the second late tick in a row judged"
    assert safety.filter.counters.watchdog_trips == 1 and safety.sent[-1].reason == "stale"
    clock[0] += period  # on time again: a later late tick may defer once more
    safety._on_tick()
    clock[0] += 0.2
    safety._on_tick()
    assert safety.late_ticks == 2
