"""The safety node over real DDS on loopback, driven by a fake policy/teleop/hardware node.

Each test gets its own rclpy context; the safety node and the fake run in separate
single-threaded executors on their own threads, as two processes would.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import rclpy
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger
from tqdm import tqdm

from refine_ros.bringup import resolve_profile
from refine_ros.bringup.spin import NodeSpinner
from refine_ros.nodes.safety_node import PARAMETERS, SafetyNode
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_step, pack_vector
from refine_ros_interfaces.msg import Step


def _limits(profile: str) -> dict:
    """A robot's safety limits, read from its profile: the one place they are written."""
    params = dict(resolve_profile(profile, check_modules=False).node("safety_node").parameters)
    params.pop("dry_run")
    return params


pytestmark = pytest.mark.timeout(120)

ARM = _limits("arm_real")
CAR = {**_limits("rc_car_real"), "deadman_button": -1}  # its limits; the F1TENTH dead-man has tests of its own
ZERO = tuple(ARM["zero"])
LOWER = np.array(ARM["lower"])
UPPER = np.array(ARM["upper"])
OBS_INSIDE = [0.45, 0.0, 0.25] + [0.0] * 36  # the tool inside the profile's box (m, base frame)


@dataclass
class Received:
    t: float
    offset: int
    data: tuple[float, ...]
    label: str = ""
    """The decision's reason (the dimension label): policy, teleop, or why it is a stop."""

    @property
    def values(self) -> tuple[float, ...]:
        return self.data[2:]


@dataclass
class Fake:
    """Stands in for the learner, the teleop device, the e-stop button and the bridge."""

    node: Node
    action: object
    teleop: object
    estop: object
    observation: object
    rearm: object
    confirm: object
    obs: list[float] = field(default_factory=lambda: list(OBS_INSIDE))
    received: list[Received] = field(default_factory=list)
    status: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    process: subprocess.Popen | None = None
    log_path: Path | None = None

    def log_tail(self, chars: int = 1500) -> str:
        return self.log_path.read_text()[-chars:] if self.log_path and self.log_path.exists() else ""

    def connected(self) -> bool:
        pubs = (self.action, self.observation, self.teleop, self.estop)
        return all(p.get_subscription_count() > 0 for p in pubs) and (
            self.node.count_publishers("refine/safe_action") > 0
        )

    def since(self, t: float) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.t >= t]

    def send(self, pub, values, episode=0, step=0) -> float:
        pub.publish(pack_vector(episode, step, values))
        return time.monotonic()

    def observe(self, values=None) -> float:
        values = self.obs if values is None else values
        self.observation.publish(pack_step(0, 0, [f"column_{i}" for i in range(len(values))], values))
        return time.monotonic()

    def call(self, client) -> Trigger.Response:
        assert client.wait_for_service(timeout_sec=5.0)
        future = client.call_async(Trigger.Request())
        deadline = time.monotonic() + 5.0
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.002)
        assert future.done(), "service call timed out"
        return future.result()

    def stream(self, seconds: float, values=(0.5, 0.0, 0.0, 1.0), period=0.01, episode=0, teleop=False):
        """Fresh observations and commands at 1/period Hz; returns the last send times."""
        end = time.monotonic() + seconds
        step = 0
        while time.monotonic() < end:
            t_obs = self.observe()
            t_cmd = self.send(self.teleop if teleop else self.action, values, episode, step)
            step += 1
            time.sleep(period)
        return t_obs, t_cmd


def wait_until(predicate, timeout=5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def make_fake(ctx: Context) -> Fake:
    fake_node = Node("fake_hardware", context=ctx)
    fake = Fake(
        node=fake_node,
        action=fake_node.create_publisher(Float64MultiArray, "refine/action", qos.COMMAND),
        teleop=fake_node.create_publisher(Float64MultiArray, "refine/teleop_action", qos.COMMAND),
        estop=fake_node.create_publisher(Bool, "refine/estop", qos.COMMAND),
        observation=fake_node.create_publisher(Step, "refine/observation", qos.STATE),
        rearm=fake_node.create_client(Trigger, "safety/rearm"),
        confirm=fake_node.create_client(Trigger, "safety/confirm_episode"),
    )

    def on_safe(msg: Float64MultiArray) -> None:
        with fake.lock:
            label = msg.layout.dim[0].label if msg.layout.dim else ""
            fake.received.append(Received(time.monotonic(), msg.layout.data_offset, tuple(msg.data), label))

    def on_status(msg: DiagnosticArray) -> None:
        with fake.lock:
            fake.status.append({kv.key: kv.value for kv in msg.status[0].values})

    # a deep queue here: the test must see every command the node sends, not just the newest
    fake_node.create_subscription(Float64MultiArray, "refine/safe_action", on_safe, qos.LOG)
    fake_node.create_subscription(DiagnosticArray, "safety/status", on_status, qos.STATE)
    return fake


def params(**overrides):
    """Safety-node parameter overrides for one test."""
    return pytest.mark.parametrize("ros_safety", [overrides], indirect=True, ids=["params"])


@pytest.fixture
def ros_safety(request):
    """(safety node, fake); the arm's limits from its profile, changed by `@params(...)`."""
    overrides = [Parameter(k, value=v) for k, v in {**ARM, **getattr(request, "param", {})}.items()]
    ctx = Context()
    rclpy.init(context=ctx)
    safety = SafetyNode(context=ctx, parameter_overrides=overrides)
    fake = make_fake(ctx)
    spinner = NodeSpinner([safety, fake.node], ctx).start()
    try:
        assert wait_until(fake.connected), "DDS discovery did not complete"
        yield safety, fake
    finally:
        spinner.stop()
        safety.destroy_node()
        fake.node.destroy_node()
        rclpy.shutdown(context=ctx)


def moving(r: Received) -> bool:
    return r.values != ZERO


def test_a_command_is_judged_after_the_observation_that_arrived_with_it():
    """A safety node held up (here: not spun) while an observation and a command queue up takes
    the observation first when it wakes, so the command is judged on fresh news: before, the
    command ran first and was stopped as stale (a stop that, after another cause, also revokes
    the episode's confirmation)."""
    ctx = Context()
    rclpy.init(context=ctx)
    safety = SafetyNode(context=ctx, parameter_overrides=[
        Parameter(k, value=v) for k, v in {**ARM, "require_confirmation": False}.items()])
    fake = make_fake(ctx)
    fake_spinner = NodeSpinner([fake.node], ctx).start()
    try:
        assert wait_until(fake.connected), "DDS discovery did not complete"
        fake.observe()
        fake.send(fake.action, (0.5, 0.0, 0.0, 1.0))
        time.sleep(0.3)  # both wait in the safety node's queues: one wake-up will find them together
        t = time.monotonic()
        safety_spinner = NodeSpinner([safety], ctx).start()
        try:
            # (the watchdog's first tick runs before any subscription and stops: nothing heard yet)
            passed = wait_until(lambda: any(r.label == "policy" and moving(r) for r in fake.since(t)), 2.0)
            assert passed, f"the queued command passed: {fake.since(t)[:3]}, {fake.status[-1:]}"
        finally:
            safety_spinner.stop()
    finally:
        fake_spinner.stop()
        safety.destroy_node()
        fake.node.destroy_node()
        rclpy.shutdown(context=ctx)


# ---- rules ----------------------------------------------------------------------------------
def test_unconfirmed_episode_commands_only_zero_until_confirmed(ros_safety):
    _, fake = ros_safety
    t0 = time.monotonic()
    fake.stream(0.2)
    got = fake.since(t0)
    assert got and all(r.values == ZERO for r in got)
    assert fake.call(fake.confirm).success
    t1 = time.monotonic()
    fake.stream(0.2)
    assert any(moving(r) for r in fake.since(t1))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_rejects_nan_and_inf_with_zero_and_counts_them(ros_safety, bad):
    safety, fake = ros_safety
    fake.call(fake.confirm)
    fake.stream(0.1)
    fake.observe()
    t = fake.send(fake.action, (0.5, bad, 0.0, 1.0), step=99)
    assert wait_until(lambda: any(r.values == ZERO for r in fake.since(t)), 1.0)
    assert safety.filter.counters.rejected == 1
    assert wait_until(lambda: fake.status and fake.status[-1]["rejected"] == "1", 1.0)


@params(max_rate=[0.0, 0.0, 0.0, 0.0])
def test_clamps_each_axis(ros_safety):
    _, fake = ros_safety
    fake.call(fake.confirm)
    t = time.monotonic()
    fake.stream(0.1, values=(5.0, -7.0, 0.25, 3.0))
    got = [r for r in fake.since(t) if moving(r)]
    assert got and all(r.values == (1.0, -1.0, 0.25, 1.0) for r in got)


@params(max_rate=[2.0, 2.0, 2.0, 0.0])
def test_rate_limits_the_ramp_up(ros_safety):
    safety, fake = ros_safety
    fake.call(fake.confirm)
    fake.stream(0.05, values=(0.0, 0.0, 0.0, 1.0))
    t = time.monotonic()
    fake.stream(0.3, values=(1.0, 0.0, 0.0, 1.0))
    xs = [r.values[0] for r in fake.since(t)]
    assert len(xs) > 5
    steps = np.diff(xs)
    assert np.all(steps >= -1e-12), "a constant target must ramp monotonically"
    # 2/s for at most 0.3 s plus a delivery slack: far below the commanded 1.0
    assert 0.0 < max(xs) <= 2.0 * 0.35
    assert safety.filter.counters.rate_limited > 0


@params(max_rate=[0.0, 0.0, 0.0, 0.0])
def test_workspace_allows_only_motion_back_toward_the_box(ros_safety):
    safety, fake = ros_safety
    fake.call(fake.confirm)
    outside = [0.9, 0.0, 0.25] + [0.0] * 36  # beyond workspace_upper x = 0.65 m
    for step, command, expected in [
        (77, (0.5, 0.2, 0.0, 1.0), (0.0, 0.2, 0.0, 1.0)),  # outward x is cut
        (78, (-0.5, 0.2, 0.0, 1.0), (-0.5, 0.2, 0.0, 1.0)),  # back toward the box passes
    ]:
        fake.observe(outside)
        # topics are not ordered with each other: let the observation land first
        assert wait_until(lambda: safety.filter.observation is not None and safety.filter.observation[0] == 0.9)
        t = fake.send(fake.action, command, step=step)

        def answer(t=t, step=step):
            return next((r for r in fake.since(t) if r.data[1] == step), None)

        assert wait_until(lambda answer=answer: answer() is not None, 1.0)
        assert answer().values == expected


def test_estop_latches_until_released_rearmed_and_confirmed(ros_safety):
    _, fake = ros_safety
    fake.call(fake.confirm)
    fake.stream(0.1)
    fake.estop.publish(Bool(data=True))
    t = time.monotonic()
    fake.stream(0.1)
    assert not any(moving(r) for r in fake.since(t + 0.02))
    refused = fake.call(fake.rearm)
    assert not refused.success
    fake.estop.publish(Bool(data=False))
    t = time.monotonic()
    fake.stream(0.2)
    assert not any(moving(r) for r in fake.since(t)), "releasing the button must not clear the latch"
    assert fake.call(fake.rearm).success
    t = time.monotonic()
    fake.stream(0.1)
    assert not any(moving(r) for r in fake.since(t)), "after re-arm the episode needs confirmation"
    assert fake.call(fake.confirm).success
    t = time.monotonic()
    fake.stream(0.1)
    assert any(moving(r) for r in fake.since(t))


@params(max_rate=[0.0, 0.0, 0.0, 0.0], teleop_hold=0.3)
def test_teleop_preempts_the_policy_within_one_cycle(ros_safety):
    _, fake = ros_safety
    fake.call(fake.confirm)
    cycle = 0.02  # 50 Hz control
    latencies = []
    for trial in range(10):
        fake.stream(0.06, values=(0.5, 0.0, 0.0, 1.0), period=cycle)
        fake.observe()
        t = fake.send(fake.teleop, (-0.3, 0.0, 0.0, 1.0), step=trial)
        # the policy keeps talking while the operator drives
        end = time.monotonic() + 0.2
        while time.monotonic() < end:
            fake.observe()
            fake.send(fake.action, (0.5, 0.0, 0.0, 1.0))
            fake.send(fake.teleop, (-0.3, 0.0, 0.0, 1.0))
            time.sleep(cycle)
        got = fake.since(t)
        first = next(r for r in got if r.values[0] == -0.3)
        latencies.append(first.t - t)
        after = [r for r in got if r.t > first.t]
        assert all(r.values[0] != 0.5 for r in after), "a policy command got through teleop"
        time.sleep(0.35)  # teleop_hold expires: the policy may drive again
    assert np.percentile(latencies, 90) < cycle, latencies
    # the pauses above let the inputs go stale, a stop that revokes the confirmation (issue 16)
    assert fake.call(fake.confirm).success
    t = time.monotonic()
    fake.stream(0.1)
    assert any(r.values[0] == 0.5 for r in fake.since(t))


@params(dry_run=True)
def test_dry_run_publishes_nothing(ros_safety):
    safety, fake = ros_safety
    fake.call(fake.confirm)
    t = time.monotonic()
    fake.stream(0.3)
    fake.estop.publish(Bool(data=True))
    fake.stream(0.1)
    time.sleep(0.2)  # watchdog ticks with stale inputs
    assert fake.since(t) == []
    assert safety.published == 0
    assert safety.filter.counters.passed > 0, "dry run still decides every command"
    assert wait_until(lambda: fake.status and fake.status[-1]["dry_run"] == "True", 1.0)


PROFILES = {
    # each robot's limits as its profile ships them: arm 100 ms budget, car 200 ms
    "arm": dict(params=ARM, obs=OBS_INSIDE, command=(0.5, 0.0, 0.0, 1.0), zero=ZERO),
    # the car: steer, gas, brake; stop = brake; speed (observation 48, here 0.1) under its cap
    "car": dict(params=CAR, obs=[0.0] * 48 + [0.1] + [0.0] * 6, command=(0.2, 0.6, 0.0), zero=tuple(CAR["zero"])),
}  # fmt: skip


@contextmanager
def heartbeat(fake: Fake):
    """Observations every 10 ms for as long as the block runs (a test's own pauses must not let
    the sensor look stale: a stale sensor after a confirmation revokes it)."""
    done = threading.Event()

    def beat() -> None:
        while not done.is_set():
            fake.observe()
            done.wait(0.01)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        time.sleep(0.03)
        yield
    finally:
        done.set()
        thread.join()


@pytest.fixture
def safety_process(request, tmp_path):
    """The safety node as its own process (as deployed), plus the fake in this process; the
    test may end the process itself (`fake.process`)."""
    profile = PROFILES[request.param]
    name = f"watchdog_{request.param}"
    params = tmp_path / "safety.yaml"
    params.write_text(yaml.safe_dump({name: {"ros__parameters": profile["params"]}}))
    log = open(tmp_path / "safety.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "refine_ros.nodes.safety_node", "--ros-args",
         "-r", f"__node:={name}", "--params-file", str(params)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    ctx = Context()
    rclpy.init(context=ctx)
    fake = make_fake(ctx)
    fake.obs = list(profile["obs"])
    fake.process, fake.log_path = proc, tmp_path / "safety.log"
    spinner = NodeSpinner([fake.node], ctx).start()
    try:
        assert wait_until(fake.connected, 30.0), "safety process did not come up"
        yield profile, fake
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
        spinner.stop()
        fake.node.destroy_node()
        rclpy.shutdown(context=ctx)
        log.seek(0)
        text = log.read()
        log.close()
        assert code == 0 and "Traceback" not in text, text


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.parametrize("safety_process", list(PROFILES), indirect=True)
def test_watchdog_zero_within_budget_over_100_trials(safety_process, record_property):
    """Half the trials silence the policy, half the observation heartbeat; the time from the
    last message sent to the first stop command received is the stop delay."""
    profile, fake = safety_process
    zero, command = profile["zero"], profile["command"]
    budget = float(profile["params"]["watchdog_timeout"])
    delays = []

    def watchdog_stop(r: Received) -> bool:
        return r.values == zero and r.label == "stale"

    for trial in tqdm(range(100), desc="watchdog trials", leave=False):
        # every watchdog stop revokes the confirmation (issue 16): the operator confirms again,
        # with the sensor back (a sensor going stale after the confirmation would revoke it)
        with heartbeat(fake):
            assert fake.call(fake.confirm).success
            t = time.monotonic()
            # the policy streams until the robot moves (for up to 1 s), as a real one does: on a
            # loaded machine the first commands of trial 0 were stopped as stale while the
            # confirmation stayed pending (observations fresh a moment later), so a test that
            # sent 40 ms of commands and then waited saw a robot that "never moved"
            while time.monotonic() - t < 1.0 and not any(r.values != zero for r in fake.since(t)):
                fake.stream(0.02, values=command)
            assert any(r.values != zero for r in fake.since(t)), \
                f"trial {trial}: never moved; got {fake.since(t)[-5:]}; status {fake.status[-1:]}; " \
                f"safety log: {fake.log_tail()}"
        t_obs, t_cmd = fake.stream(0.02, values=command)
        if trial % 2:  # policy goes silent, observations stay fresh
            t_stop = t_cmd
            end = time.monotonic() + 1.0
            while time.monotonic() < end and not any(watchdog_stop(r) for r in fake.since(t_stop)):
                fake.observe()
                time.sleep(0.01)
        else:  # the heartbeat goes silent too
            t_stop = max(t_obs, t_cmd)
            wait_until(lambda t_stop=t_stop: any(watchdog_stop(r) for r in fake.since(t_stop)), 1.0)
        zeros = [r for r in fake.since(t_stop) if watchdog_stop(r)]
        assert zeros, f"trial {trial}: the robot never stopped"
        delays.append(zeros[0].t - t_stop)
    d = np.array(delays) * 1000.0
    p50, p95, p99 = np.percentile(d, [50, 95, 99])
    print(f"\nwatchdog stop delay, {len(d)} trials: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
          f"p99 {p99:.1f} ms, max {d.max():.1f} ms (budget {budget * 1000:.0f} ms)")  # fmt: skip
    record_property("watchdog_p50_ms", round(float(p50), 2))  # plain floats: xdist sends them
    record_property("watchdog_p99_ms", round(float(p99), 2))
    # The design leaves 30 % of the budget for scheduling: on an idle machine every trial is
    # inside it. A shared 2-core CI box can deschedule a process for longer than that once in
    # a while, so the hard assertion is on the 99th percentile and every trial must stop.
    assert p99 <= budget * 1000.0


@pytest.mark.parametrize("safety_process", ["arm"], indirect=True)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_safety_node_sends_the_stop_when_it_shuts_down(safety_process, sig):
    """Issue 16: "No node sends a zero command on shutdown". Ctrl-C or SIGTERM while the arm
    moves: the last command the bridge gets is the stop, labelled shutdown."""
    profile, fake = safety_process
    assert fake.call(fake.confirm).success
    t = time.monotonic()
    fake.stream(0.2, values=profile["command"])
    assert any(r.values != profile["zero"] for r in fake.since(t)), "never moved"
    fake.process.send_signal(sig)
    end = time.monotonic() + 1.0
    while time.monotonic() < end and fake.process.poll() is None:  # the policy keeps talking
        fake.observe()
        fake.send(fake.action, profile["command"])
        time.sleep(0.01)
    assert fake.process.wait(timeout=10) == 0
    assert wait_until(lambda: fake.since(t)[-1].label == "shutdown", 2.0), fake.since(t)[-3:]
    assert fake.since(t)[-1].values == profile["zero"]


def test_fuzzer_never_crashes_and_never_exceeds_bounds(ros_safety):
    safety, fake = ros_safety
    fake.call(fake.confirm)
    rng = np.random.default_rng(1234)
    t = time.monotonic()
    for i in range(1500):
        fake.observe()
        msg = Float64MultiArray()
        n = int(rng.integers(0, 12))
        data = rng.normal(0.0, 10.0 ** rng.uniform(-2, 300), n)
        if n and rng.random() < 0.3:
            data[rng.integers(n)] = rng.choice([math.nan, math.inf, -math.inf])
        msg.layout.data_offset = int(rng.choice([2, 2, 2, 0, 1, 3, 1000]))
        msg.data = [float(v) for v in data]
        (fake.action if rng.random() < 0.8 else fake.teleop).publish(msg)
        if i % 50 == 0:
            fake.send(fake.action, (0.2, 0.1, -0.1, 0.5), step=i)
        time.sleep(0.001)
    # garbage with a valid shape may have been taken as teleop (it holds for teleop_hold) or
    # consumed the confirmation with a random episode number: wait it out and confirm again
    time.sleep(float(safety.get_parameter("teleop_hold").value))
    assert fake.call(fake.confirm).success
    fake.stream(0.3, values=(0.2, 0.1, -0.1, 0.5))
    got = fake.since(t)
    assert got
    for r in got:
        v = np.array(r.values)
        assert r.offset == 2 and v.shape == (4,)
        assert np.all(np.isfinite(v)) and np.all(v >= LOWER) and np.all(v <= UPPER)
    assert safety.filter.counters.rejected > 100
    assert any(r.values == (0.2, 0.1, -0.1, 0.5) for r in got[-5:]), "valid commands pass after the fuzz"


# ---- lifecycle -----------------------------------------------------------------------------
def test_declares_every_parameter_with_a_description_and_every_limit_is_read_only(ros_safety):
    """Issue 16: "`dry_run`, `require_confirmation` and every limit can be changed at run time
    with `ros2 param set`". Now every one is read-only, and the filter keeps its limits."""
    safety, _ = ros_safety
    names = set(safety.list_parameters([], 0).names)
    assert set(PARAMETERS) <= names
    for desc in safety.describe_parameters(list(PARAMETERS)):
        assert desc.description and desc.read_only, desc.name
    for name, value in [("lower", [-0.5, -1.0, -1.0, 0.0]), ("upper", [5.0, 5.0, 5.0, 1.0]),
                        ("workspace_upper", [2.0, 2.0, 2.0]), ("watchdog_timeout", 2.0), ("dry_run", True),
                        ("require_confirmation", False), ("max_rate", [0.0, 0.0, 0.0, 0.0])]:
        assert not safety.set_parameters([Parameter(name, value=value)])[0].successful, name
    assert safety.filter.config.lower == tuple(ARM["lower"]) and safety.filter.config.require_confirmation
    assert safety.filter.config.watchdog_timeout == ARM["watchdog_timeout"]


def test_main_shuts_down_cleanly_on_external_shutdown(tmp_path):
    """`main` spins the real node until the context shuts down, then destroys it."""
    from refine_ros.nodes import safety_node

    done = threading.Event()
    params = tmp_path / "safety.yaml"
    params.write_text(yaml.safe_dump({"safety_main_test": {"ros__parameters": ARM}}))

    def run():
        safety_node.main(args=["--ros-args", "-r", "__node:=safety_main_test", "--params-file", str(params)])
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    probe_ctx = Context()
    rclpy.init(context=probe_ctx)
    probe = Node("probe", context=probe_ctx)
    try:
        # the services are created last in the constructor: the node is fully up once they answer
        client = probe.create_client(Trigger, "safety/confirm_episode")
        assert client.wait_for_service(timeout_sec=10.0)
        # the graph's node list is discovered on its own schedule, a little after the service
        deadline = time.monotonic() + 10.0
        while "safety_main_test" not in probe.get_node_names() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "safety_main_test" in probe.get_node_names()
    finally:
        probe.destroy_node()
        rclpy.shutdown(context=probe_ctx)
        # the default context main() initialised: ExternalShutdownException path. Always shut
        # it down, or a failure here would leave it initialised for every later test.
        rclpy.try_shutdown()
    assert done.wait(5.0), "main did not return after shutdown"


def _safety_process(tmp_path, params: dict, name: str) -> subprocess.CompletedProcess:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({name: {"ros__parameters": params}}))
    return subprocess.run(
        [sys.executable, "-m", "refine_ros.nodes.safety_node", "--ros-args", "-r", f"__node:={name}",
         "--params-file", str(path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_main_refuses_to_start_with_inconsistent_limits(tmp_path):
    proc = _safety_process(tmp_path, {**ARM, "lower": [2.0, 0.0, 0.0, 0.0]}, "bad_limits")
    assert proc.returncode == 2, proc.stderr
    assert "invalid safety limits" in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr


def test_main_refuses_to_start_without_the_robots_limits(tmp_path):
    """No silent default for a robot's limits: the profile is the one place they are set, and
    a safety node started without them names every one that is missing. The workspace box is
    optional (the car has none), but a box without the arm's reach is refused."""
    required = sorted(name for name, p in PARAMETERS.items() if p.required)
    assert set(required) == {"lower", "upper", "zero", "max_rate", "hold_axes", "watchdog_timeout", "watchdog_period"}
    assert set(required) <= set(ARM) and set(required) <= set(CAR)
    proc = _safety_process(tmp_path, {k: v for k, v in ARM.items() if k not in ("zero", "max_rate")}, "no_zero")
    text = proc.stderr + proc.stdout
    assert proc.returncode == 2, text
    assert "zero, max_rate" in text
    assert "Traceback" not in text and "have no default" in text
    proc = _safety_process(tmp_path, {k: v for k, v in ARM.items() if k != "workspace_reach"}, "no_reach")
    text = proc.stderr + proc.stdout
    assert proc.returncode == 2 and "workspace_reach" in text and "Traceback" not in text, text
