"""The twins' real-time machinery on a clock the test drives: fixed-rate ticks, command
latency, dropout windows, sensor streams. No simulator, no ROS."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import refine_ros.robots._twin
from refine_ros.robots._twin.realtime import (
    DropoutPlan,
    Dropouts,
    FixedRate,
    Latency,
    Noise,
    Sensor,
    Window,
)


def test_fixed_rate_hands_out_each_tick_once_and_drops_lag_beyond_the_catch_up_limit():
    rate = FixedRate(50.0, start=10.0, max_catch_up=3)
    assert rate.due(10.0) == 1  # tick 0 is due at the start
    assert rate.due(10.019) == 0
    assert rate.due(10.02) == 1
    assert rate.due(10.02) == 0, "a tick is never handed out twice"
    assert rate.due(10.1) == 3  # ticks 2..5 are due: three run, one is dropped
    assert rate.skipped == 1
    assert rate.due(10.12) == 1  # back on the grid: tick 6 at 10.12
    assert rate.ticks == 6
    with pytest.raises(ValueError):
        FixedRate(0.0, 0.0)


def test_latency_delays_every_command_by_exactly_the_configured_time():
    line = Latency(0.05, initial="stop")
    line.push("a", 1.00)
    line.push("b", 1.02)
    assert line.current(1.049) == "stop"
    assert line.current(1.05) == "a"
    assert line.current(1.069) == "a"
    assert line.current(1.07) == "b"
    assert line.issued_at(1.07) == pytest.approx(1.02)
    with pytest.raises(ValueError):
        line.push("late", 1.0)  # out of time order
    assert Latency(0.0, 0).current(0.0) == 0


def test_fixed_dropout_windows_silence_exactly_their_span():
    drops = Dropouts(DropoutPlan.of([(1.0, 1.5), (3.0, 3.2)]))
    assert not drops.silent(0.999)
    assert drops.silent(1.0) and drops.silent(1.499)
    assert not drops.silent(1.5)
    assert drops.silent(3.1) and not drops.silent(3.2)
    with pytest.raises(ValueError):
        Window(2.0, 1.0)


def test_random_dropouts_are_reproducible_and_as_frequent_as_configured():
    plan = DropoutPlan(rate_per_s=0.5, mean_duration_s=0.2)
    a, b = Dropouts(plan, seed=3), Dropouts(plan, seed=3)
    ts = np.arange(0.0, 2000.0, 0.01)
    silent_a = np.array([a.silent(t) for t in ts])
    # asked in another order, the same seed still gives the same windows
    silent_b = np.array([b.silent(t) for t in ts[::-1]])[::-1]
    np.testing.assert_array_equal(silent_a, silent_b)
    other = Dropouts(plan, seed=4)
    assert silent_a.tolist() != [other.silent(t) for t in ts]
    # silent a fraction rate * mean / (1 + rate * mean) of the time: 0.091 here
    assert silent_a.mean() == pytest.approx(0.1 / 1.1, abs=0.015)
    spans = a.spans(2000.0)
    assert all(s1[1] <= s2[0] for s1, s2 in zip(spans, spans[1:], strict=False)), "random windows never overlap"


def test_a_sensor_publishes_at_its_rate_except_in_its_dropouts():
    sensor = Sensor("odom", 10.0, start=5.0, dropouts=Dropouts(DropoutPlan.of([(0.95, 1.25)])))
    published = [t for t in np.round(np.arange(5.0, 8.0, 0.01), 6) if sensor.due(t)]
    assert published[:3] == [5.0, 5.1, 5.2]
    assert not [t for t in published if 5.95 <= t < 6.25]
    assert sensor.dropped == 3 and sensor.published == 27


def test_noise_is_seeded_and_zero_noise_is_exact():
    x = np.arange(5.0)
    np.testing.assert_array_equal(Noise(1)(x, 0.1), Noise(1)(x, 0.1))
    assert not np.array_equal(Noise(1)(x, 0.1), Noise(2)(x, 0.1))
    np.testing.assert_array_equal(Noise(1)(x, 0.0), x)
    per_axis = Noise(0)(np.zeros((20000, 2)), [0.0, 2.0])
    assert np.all(per_axis[:, 0] == 0) and per_axis[:, 1].std() == pytest.approx(2.0, rel=0.05)


def test_the_twin_package_imports_no_ros():
    """The twins' cores are plain Python: the ROS node wrappers import them, never the reverse."""
    root = Path(refine_ros.robots._twin.__file__).parent.parent
    ros = ("rclpy", "std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "tf2_msgs", "ackermann_msgs",
           "control_msgs", "refine_ros.nodes", "refine_ros.robots._twin.node",
           "refine_ros.robots._twin.scene")  # fmt: skip
    # node.py: what the twin nodes share; scene.py: the nodes' scene channel (the view a person at
    # the robot has, published for the teleoperating tools); both are node-side, the rest is core
    cores = [p for p in (root / "_twin").glob("*.py") if p.stem not in ("node", "scene")]
    cores += [root / "arm" / "twin.py", root / "arm" / "marker.py", root / "rc_car" / "twin.py",
              root / "rc_car" / "camera.py"]
    for path in sorted(cores):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                assert not name.startswith(ros), f"{path.name} imports {name}"
