"""The rollout logger records what the robot was sent: the safety node's `refine/safe_action`
as `safe_<action>` columns (real profiles), NaN where nothing was sent (dry run), and the
rows never wait for that stream."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

import rclpy  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

from refine_core.store.db import RunDatabase  # noqa: E402
from refine_core.tasks import get_task  # noqa: E402
from refine_ros.bench import wait_for  # noqa: E402
from refine_ros.bringup import resolve_profile  # noqa: E402
from refine_ros.bringup.spin import NodeSpinner  # noqa: E402
from refine_ros.nodes.rollout_logger import LogWriter  # noqa: E402
from refine_ros.wire import qos  # noqa: E402
from refine_ros.wire.messages import pack_json, pack_step, pack_vector  # noqa: E402
from refine_ros_interfaces.msg import Step  # noqa: E402

DOOR = get_task("door_open").spec
LOWER, UPPER = np.array([-1.0, -1.0, -1.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0])


# -- the writer alone (no DDS) ----------------------------------------------------------------------
def test_safe_columns_take_the_first_command_per_step_and_never_hold_a_row(run_dir):
    w = LogWriter(run_dir, task="t", action_names=("a", "b"), observation_columns=("o1", "o2"),
                  flush_period=0.05, join_timeout=0.1, log_safe_action=True)
    w.start()
    w.put("events", pack_json({"event": "start", "episode": 3, "index": 0, "round": 0, "kind": "diagnostic"}))
    for t in range(4):
        w.put("observation", pack_vector(3, t, [t, t]))
        w.put("action", pack_vector(3, t, [2.0, -2.0]))
        if t in (0, 2):  # steps 1 and 3: the safety node sent nothing
            w.put("safe", pack_vector(3, t, [1.0, -1.0]))
            w.put("safe", pack_vector(3, t, [0.0, 0.0]))  # a watchdog stop repeating the step
    w.put("safe", pack_vector(3, 0, [1.0]))  # wrong width: counted as bad, not fatal
    w.put("observation", pack_vector(3, 4, [4, 4]))
    w.put("events", pack_json({"event": "end", "episode": 3, "steps": 4}))
    ok, message = w.flush(10.0)
    w.stop()
    assert ok, message
    assert w.bad_messages == 1
    with RunDatabase(run_dir) as db:
        steps = db.load_steps(1)
        episode = db.episodes(1).iloc[0]
    assert list(steps["step"]) == [0, 1, 2, 3] and episode["complete"] == 1 and episode["error"] is None
    assert list(steps["safe_a"].fillna(99)) == [1.0, 99, 1.0, 99]
    assert list(steps["safe_b"].fillna(99)) == [-1.0, 99, -1.0, 99]
    assert set(steps["act_a"]) == {2.0}, "the policy's command stays in act_*"


def test_halted_and_rejected_steps_are_never_logged_as_executed(run_dir):
    """Issue 16: "halted-arm steps are logged as executed". The safety node's label (a stop
    reason) and the bridge's command result ([halted, rejected]) mark what the robot did not do."""
    w = LogWriter(run_dir, task="t", action_names=("a",), observation_columns=("o",), flush_period=0.05,
                  join_timeout=0.1, log_safe_action=True)
    w.start()
    w.put("events", pack_json({"event": "start", "episode": 2, "index": 0, "round": 0, "kind": "diagnostic"}))
    outcomes = {0: ("policy", None), 1: ("stale", None), 2: ("policy", (0.0, 1.0)), 3: ("policy", (1.0, 0.0)),
                4: ("", None)}
    for t, (label, result) in outcomes.items():
        w.put("observation", pack_vector(2, t, [t]))
        w.put("action", pack_vector(2, t, [0.5]))
        w.put("safe", pack_vector(2, t, [0.0 if label == "stale" else 0.5], label=label))
        if result is not None:
            w.put("result", pack_vector(2, t, result))
    w.put("observation", pack_vector(2, 5, [5]))
    w.put("events", pack_json({"event": "end", "episode": 2, "steps": 5}))
    ok, message = w.flush(10.0)
    w.stop()
    assert ok, message
    with RunDatabase(run_dir) as db:
        steps = db.load_steps(1)
    # step 1: the safety node stopped it; 2: the driver (Servo) refused it; 3: the bridge's own
    # stop (e-stop or a lost driver) although the safety node passed it; 4: unlabelled: unknown
    assert list(steps["halted"].fillna(-1)) == [0.0, 1.0, 0.0, 1.0, -1]
    assert list(steps["rejected"].fillna(-1)) == [-1, -1, 1.0, 0.0, -1]


def test_without_the_parameter_there_are_no_safe_columns(run_dir):
    w = LogWriter(run_dir, task="t", action_names=("a",), observation_columns=("o",), flush_period=0.05,
                  join_timeout=0.1)
    w.start()
    w.put("observation", pack_vector(1, 0, [0.0]))
    w.put("safe", pack_vector(1, 0, [0.5]))
    w.put("observation", pack_vector(1, 1, [1.0]))
    w.put("events", pack_json({"event": "end", "episode": 1, "steps": 1}))
    ok, message = w.flush(10.0)
    w.stop()
    assert ok, message
    with RunDatabase(run_dir) as db:
        assert not [c for c in db.load_steps(1).columns if c.startswith("safe_")]


def test_the_real_profiles_log_safe_actions_and_the_sim_profiles_do_not():
    for name, expected in (("arm_real", True), ("rc_car_real", True), ("door_sim", False), ("car_sim", False)):
        profile = resolve_profile(name)
        logger = next(n for n in profile.nodes if n.name == "rollout_logger")
        assert bool(logger.parameters.get("log_safe_action", False)) is expected, name


# -- over DDS: policy -> safety node -> logger ---------------------------------------------------
class FakePolicyAndBridge(Node):
    """Publishes what the learner and the arm bridge would: observation columns, episode
    events, observations and (out-of-bounds) policy actions with their counters."""

    def __init__(self, context) -> None:
        super().__init__("fake_policy_and_bridge", context=context)
        self.pub_obs = self.create_publisher(Step, "refine/observation", qos.STATE)
        self.pub_columns = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self.pub_action = self.create_publisher(Float64MultiArray, "refine/action", qos.COMMAND)
        self.pub_events = self.create_publisher(String, "refine/episode_events", qos.LATCHED)

    @staticmethod
    def observation(step: int) -> list[float]:
        obs = np.zeros(len(DOOR.observation_columns))
        obs[0:3] = (0.45, 0.001 * step, 0.25)  # the tool inside the workspace box (m, base frame)
        return obs.tolist()


def policy_action(step: int) -> list[float]:
    return [3.0, -0.5 + 0.1 * step, -4.0, 1.5 if step % 2 else -0.5]


@pytest.mark.ros
@pytest.mark.timeout(120)
@pytest.mark.parametrize("dry_run", [False, True], ids=["live", "dry_run"])
def test_the_logger_records_what_the_safety_node_sent(run_dir, dry_run):
    from refine_ros.nodes.rollout_logger import RolloutLogger
    from refine_ros.nodes.safety_node import SafetyNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    steps = 12
    nodes, spinner = [], None
    try:
        limits = {**resolve_profile("arm_real", check_modules=False).node("safety_node").parameters,
                  "dry_run": dry_run, "require_confirmation": False,
                  "max_rate": [0.0, 0.0, 0.0, 0.0],  # unlimited: clamps only, whatever the timing
                  "watchdog_timeout": 2.0, "watchdog_period": 0.02}
        safety = SafetyNode(context=ctx, parameter_overrides=[Parameter(k, value=v) for k, v in limits.items()])
        logger = RolloutLogger(context=ctx, parameter_overrides=[
            Parameter("run_dir", value=str(run_dir)), Parameter("task", value="door_open"),
            Parameter("store_step_kinds", value=["all"]), Parameter("log_unannounced", value=False),
            Parameter("log_safe_action", value=True), Parameter("join_timeout", value=0.3)])
        fake = FakePolicyAndBridge(ctx)
        nodes = [safety, logger, fake]
        spinner = NodeSpinner(nodes, ctx).start()
        assert wait_for(lambda: fake.pub_action.get_subscription_count() >= 2
                        and fake.pub_obs.get_subscription_count() >= 2
                        and safety._safe_pub.get_subscription_count() >= 1
                        and fake.pub_events.get_subscription_count() >= 1, 20.0), "no DDS discovery"
        fake.pub_columns.publish(pack_json(list(DOOR.observation_columns)))
        for _ in range(5):  # the bridge's heartbeat before the episode (counter 0: not logged)
            fake.pub_obs.publish(pack_step(0, 0, DOOR.observation_columns, fake.observation(0)))
            time.sleep(0.02)
        assert wait_for(lambda: safety.filter.last_observation is not None, 10.0)
        start = {"event": "start", "episode": 5, "round": 0, "kind": "diagnostic", "seed": 0, "index": 0}
        fake.pub_events.publish(pack_json(start))
        time.sleep(0.5)  # the logger learns of the episode before its first step
        for t in range(steps):
            fake.pub_obs.publish(pack_step(5, t, DOOR.observation_columns, fake.observation(t)))
            time.sleep(0.005)
            fake.pub_action.publish(pack_vector(5, t, policy_action(t)))
            time.sleep(0.02)
        fake.pub_obs.publish(pack_step(5, steps, DOOR.observation_columns, fake.observation(steps)))
        fake.pub_events.publish(pack_json({**start, "event": "end", "steps": steps}))
        assert wait_for(lambda: logger.writer.last_finished is not None, 20.0), "the episode never closed"
        ok, message = logger.writer.flush(20.0)
        assert ok, message
        published = safety.published
    finally:
        if spinner is not None:
            spinner.stop()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    with RunDatabase(run_dir) as db:
        table = db.load_steps(db.latest_run()["id"], 0, kind="diagnostic")
    assert list(table["step"]) == list(range(steps)), "every step is a row, safe command or not"
    names = list(DOOR.action_names)
    safe = table[[f"safe_{n}" for n in names]].to_numpy(dtype=float)
    acted = table[[f"act_{n}" for n in names]].to_numpy(dtype=float)
    assert np.allclose(acted, [policy_action(t) for t in range(steps)]), "act_* is what the policy sent"
    if dry_run:
        assert published == 0
        assert np.isnan(safe).all(), "dry run: nothing was sent, so every safe_* is NaN"
        assert table["halted"].isna().all() and table["rejected"].isna().all()
    else:
        assert published >= steps
        assert not np.isnan(safe).any()
        assert np.allclose(safe, np.clip(acted, LOWER, UPPER)), "safe_* is the clamped command"
        assert not math.isclose(safe[0, 0], acted[0, 0]), "the clamp really changed the command"
        assert (table["halted"] == 0.0).all(), "every step passed the safety node (its label says so)"
        assert table["rejected"].isna().all(), "no bridge ran: whether a driver refused is unknown"
