"""Gamepad and keyboard -> teleop command, and a take -> a demonstration, without DDS: the rules
the teleop nodes and the demo recorder apply (refine_ros.teleop.maps, refine_ros.teleop.recording)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from refine_core.rollout.demo import Demonstration, DemonstrationError, parse_takes, teleop_source
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task, task_names
from refine_ros.teleop.maps import (
    CONTROL_KEYS,
    DEMO_BUTTONS,
    DEMO_CONTROLS,
    TRIGGER_LEFT,
    TRIGGER_RIGHT,
    Edges,
    JoyMap,
    Key,
    KeyboardState,
    joy_map_for,
    keymap_for,
    label_service,
    standard_joy_map,
)
from refine_ros.teleop.recording import (
    Take,
    build_demonstration,
    find_gaps,
    save_take,
    take_problem,
)

DOOR = get_task("door_open").spec
CAR = get_task("car_racing").spec


# ---- gamepad -------------------------------------------------------------------------------------
@pytest.mark.parametrize("task", task_names())
def test_every_bundled_task_has_a_standard_gamepad_map_and_keys(task):
    spec = get_task(task).spec
    joy = joy_map_for(spec)
    assert joy == standard_joy_map(spec) and len(joy.axes) == len(spec.actions)
    released = [0.0] * 6  # sticks centred, triggers released (game_controller_node: 0)
    rest = joy.command(spec, released)
    assert np.all(rest >= spec.action_low) and np.all(rest <= spec.action_high)
    KeyboardState(spec, keymap_for(spec))  # fits the task's actions


def test_the_standard_maps_come_from_the_task_folders_as_they_were_written_here():
    """The maps moved to each task's folder (`teleop.py`, plain data); these are the values
    this module held before, in its own index form."""
    pendulum = get_task("pendulum").spec
    assert standard_joy_map(DOOR) == JoyMap((0, 1, 3, 5), (-1.0, 1.0, 1.0, 1.0), (0.0, 0.0, 0.0, 1.0))
    assert standard_joy_map(CAR) == JoyMap((0, 5, 4), (-1.0, -1.0, -1.0), (0.0, 0.0, 0.0))
    assert standard_joy_map(pendulum) == JoyMap((0,), (-2.0,), (0.0,))
    door = keymap_for(DOOR)
    assert door.keys == {"d": Key(0, 1.0), "a": Key(0, -1.0), "w": Key(1, 1.0), "s": Key(1, -1.0),
                         "r": Key(2, 1.0), "f": Key(2, -1.0), "o": Key(3, 1.0, latch=True),
                         "c": Key(3, 0.0, latch=True)}
    assert door.rest == (0.0, 0.0, 0.0, 1.0) and door.help.startswith("a/d: -x/+x")
    car = keymap_for(CAR)
    assert car.keys == {"a": Key(0, -1.0), "d": Key(0, 1.0), "w": Key(1, 1.0), "s": Key(2, 1.0)}
    assert car.rest == (0.0, 0.0, 0.0)
    assert keymap_for(pendulum).keys == {"a": Key(0, -2.0), "d": Key(0, 2.0)}


def test_the_door_map_moves_with_the_sticks_and_grips_with_the_trigger():
    joy = joy_map_for(DOOR)
    axes = [0.0] * 6
    assert joy.command(DOOR, axes).tolist() == [0.0, 0.0, 0.0, 1.0], "at rest: no motion, gripper open"
    axes[0], axes[1] = -0.5, 1.0  # left stick right and forward
    axes[TRIGGER_RIGHT] = -1.0  # trigger pressed: close
    assert joy.command(DOOR, axes).tolist() == [0.5, 1.0, 0.0, 0.0]
    axes[0] = 0.03  # inside the dead zone
    assert joy.command(DOOR, axes, deadzone=0.05)[0] == 0.0


def test_the_car_map_steers_left_with_the_stick_left_and_uses_the_triggers():
    joy = joy_map_for(CAR)
    axes = [0.0] * 6
    axes[0] = 1.0  # stick fully left: the task's negative steer is left
    axes[TRIGGER_RIGHT], axes[TRIGGER_LEFT] = -0.5, -1.0
    assert joy.command(CAR, axes).tolist() == [-1.0, 0.5, 1.0]


def test_a_custom_map_is_checked_against_the_task():
    joy = joy_map_for(CAR, axes=[2, -1, 4], scales=[3.0, 0.0, -1.0], offsets=[0.0, 0.2, 0.0])
    assert joy.command(CAR, [0.0, 0.0, 1.0, 0.0, -0.5]).tolist() == [1.0, 0.2, 0.5], "clipped to the bounds"
    with pytest.raises(ValueError, match="3 actions"):
        joy_map_for(CAR, axes=[0, 1], scales=[1.0, 1.0], offsets=[0.0, 0.0])
    with pytest.raises(ValueError, match="one entry per action"):
        JoyMap((0, 1), (1.0,), (0.0, 0.0))
    with pytest.raises(ValueError, match="reads axis 4"):
        joy.command(CAR, [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="not finite"):
        joy.command(CAR, [0.0, 0.0, math.nan, 0.0, 0.0])


def test_buttons_act_once_per_press():
    edges = Edges()
    wanted = {"start": 6, "stop": 4, "keep": -1}
    assert edges.pressed([0] * 10, wanted) == []
    pressed = [0] * 10
    pressed[6] = 1
    assert edges.pressed(pressed, wanted) == ["start"]
    assert edges.pressed(pressed, wanted) == [], "held, not pressed again"
    assert edges.pressed([0] * 10, wanted) == []
    assert edges.pressed(pressed, wanted) == ["start"]


# ---- keyboard ------------------------------------------------------------------------------------
def test_a_held_key_drives_and_letting_go_stops_within_the_hold_time():
    keys = KeyboardState(DOOR, keymap_for(DOOR), hold_s=0.6, scale=0.5)
    assert keys.command(0.0) is None, "no key: nothing to publish"
    keys.press("w", 0.0)
    assert keys.command(0.1).tolist() == [0.0, 0.5, 0.0, 1.0]
    keys.press("w", 0.55)  # auto-repeat of the held key
    assert keys.command(1.0).tolist() == [0.0, 0.5, 0.0, 1.0]
    assert keys.command(1.2) is None, "let go: nothing is published, the watchdog stops the arm"
    keys.press("d", 2.0)
    keys.press(" ", 2.1)  # space stops at once
    assert keys.command(2.2) is None


def test_the_gripper_key_latches_and_control_keys_are_named():
    keys = KeyboardState(DOOR, keymap_for(DOOR), hold_s=0.6)
    keys.press("c", 0.0)
    assert keys.command(0.1).tolist() == [0.0, 0.0, 0.0, 0.0], "the closing is sent"
    keys.press("r", 5.0)
    assert keys.command(5.1).tolist() == [0.0, 0.0, 1.0, 0.0], "moving up keeps the grip"
    assert [keys.press(k, 6.0) for k in "x12kjb+-0uq"] == ["estop", "start", "stop", "keep", "discard", "rerecord",
                                                          "success", "failure", "finish", "rearm", "quit"]
    assert keys.press("Z", 6.0) is None


def test_keep_discard_and_rerecord_are_their_own_controls_apart_from_the_success_label():
    """Every recording control reaches its own demo recorder service; only the success label
    is a SetBool, and no task's motion key is a recording key."""
    services = {name: service for name, (service, _) in DEMO_CONTROLS.items()}
    assert len({services[n] for n in ("keep", "discard", "rerecord", "start", "stop", "finish")}) == 6
    assert DEMO_CONTROLS["success"] == ("demo/label", True) and DEMO_CONTROLS["failure"] == ("demo/label", False)
    assert "demo/label" not in {services[n] for n in ("keep", "discard", "rerecord")}
    assert set(DEMO_BUTTONS) == set(DEMO_CONTROLS) and len(set(DEMO_BUTTONS.values())) == len(DEMO_BUTTONS)
    assert set(CONTROL_KEYS.values()) >= set(DEMO_CONTROLS)
    for spec in (DOOR, CAR):
        KeyboardState(spec, keymap_for(spec))  # refuses a motion key that is a control key
    assert label_service("demo/label", recorder_ready=False) == "logger/label_episode", "a live episode's verdict"
    assert label_service("demo/label", recorder_ready=True) == "demo/label"
    assert label_service("demo/keep", recorder_ready=False) == "demo/keep"


# ---- a take -> a demonstration -----------------------------------------------------------------
def _drive(take: Take, steps: int, width: int, *, actions_from: int = 0, t0: float = 0.0, dt: float = 0.02) -> None:
    """Observation k carries value k everywhere; the action sent after it is k + 0.5."""
    for k in range(steps):
        take.on_observation([float(k)] * width, k, t0 + k * dt)
        if k >= actions_from:
            take.on_action([k + 0.5] * take.axes)


def test_each_observation_pairs_with_the_action_executed_until_the_next():
    take = Take(axes=4)
    _drive(take, 20, 39, actions_from=3)
    take.finish()
    obs, actions, rewards = take.arrays()
    assert rewards is None, "a robot measures no reward"
    assert obs[:, 0].tolist() == list(range(3, 20)), "no action before observation 3: dropped"
    assert actions[:, 0].tolist() == [k + 0.5 for k in range(3, 20)]
    assert take_problem(take, min_steps=10, max_gap_s=0.5) is None


def test_a_simulators_rewards_decide_which_steps_happened():
    take = Take(axes=4, episode=7)
    _drive(take, 6, 39)
    for k in range(5):  # the simulator took steps 0-4; observation 5 is the state after the last
        take.on_reward(k, 1.0 * k, k == 4, 1.0 if k == 4 else 0.0)
    take.finish()
    obs, actions, rewards = take.arrays()
    assert rewards.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0] and take.done
    assert obs[:, 0].tolist() == [0, 1, 2, 3, 4, 5] and len(actions) == 5


def test_dead_man_releases_are_pauses_left_out_of_the_take():
    """The operator drives steps 0-9, lets go for 0.4 s (the watchdog's stop commands keep
    arriving as actions), then drives again: the released stretch is not in the take."""
    take = Take(axes=4, pause_after=0.1)
    for k in range(40):
        now = k * 0.02
        if not 10 <= k < 30:
            take.on_teleop(now)
        take.on_observation([float(k)] * 39, k, now)
        take.on_action([0.0] * 4 if 10 <= k < 30 else [k + 0.5] * 4)
    take.finish()
    obs, actions, _ = take.arrays()
    steps = obs[:, 0].astype(int).tolist()
    assert 20 not in steps and take.paused_steps >= 14, (steps, take.paused_steps)
    assert steps[:10] == list(range(10)) and steps[-10:] == list(range(30, 40))
    assert not (actions == 0.0).all(axis=1).any(), "no stop command of the watchdog is a recorded action"
    assert Take(axes=4).paused(5.0, None) is False, "pause detection off: nothing is a pause"
    labelled = Take(axes=4, pause_after=0.1)
    for k in range(6):
        labelled.on_teleop(k * 0.02)
        labelled.on_observation([float(k)] * 39, k, k * 0.02)
        labelled.on_action([0.0] * 4 if k == 2 else [1.0] * 4, stop=k == 2)
    labelled.finish()
    assert labelled.arrays()[0][:, 0].tolist() == [0, 1, 3, 4, 5] and labelled.paused_steps == 1, \
        "a step the safety node stopped is not the operator's"


def test_a_brief_sensor_dropout_is_kept_and_marked():
    take = Take(axes=4)
    _drive(take, 20, 39)
    _drive(take, 20, 39, t0=20 * 0.02 + 0.3)  # observations stop for about 0.3 s after step 19
    take.finish()
    assert take_problem(take, min_steps=10, max_gap_s=1.0) is None, "a brief dropout does not refuse the take"
    ((index, seconds),) = take.gaps()
    assert index == 20 and seconds == pytest.approx(0.32)
    demo = build_demonstration(get_task("door_open"), take, source="teleop (x)", columns=DOOR.observation_columns,
                               seed=-1, label=None)
    assert demo.summary["gaps"] == [[20, pytest.approx(0.32)]] and demo.summary["gap_count"] == 1
    assert math.isnan(demo.summary["success"]), "no label given: success unknown"
    assert find_gaps([0.02, 0.021, 0.06, 0.019]) == [], "jitter under GAP_MIN_S is no gap"


@pytest.mark.parametrize(("kind", "message"), [
    ("no_actions", "no action reached the robot"), ("short", "fewer than min_steps"), ("gap", "paused for 1.00 s"),
])
def test_takes_that_cannot_be_kept_say_why(kind, message):
    take = Take(axes=4)
    if kind == "no_actions":  # a dry run: the safety node sends nothing
        for k in range(30):
            take.on_observation([0.0] * 39, k, k * 0.02)
    elif kind == "short":
        _drive(take, 5, 39)
    else:
        _drive(take, 10, 39)
        _drive(take, 10, 39, t0=1.18)
    take.finish()
    assert message in take_problem(take, min_steps=8, max_gap_s=0.5)


def _door_take(steps: int = 30) -> Take:
    take = Take(axes=4)
    rng = np.random.default_rng(0)
    for k in range(steps):
        take.on_observation(rng.uniform(0.0, 0.5, 39), k, k * 0.02)
        take.on_action(rng.uniform(-0.5, 0.5, 4))
    take.finish()
    return take


def test_a_take_becomes_a_demonstration_stored_in_one_transaction(tmp_path):
    task = get_task("door_open")
    take = _door_take()
    take.success = 1.0
    demo = build_demonstration(task, take, source=teleop_source("arm_real"),
                               columns=DOOR.observation_columns, seed=-1, label="left hinge")
    assert demo.source == "teleop (arm_real)" and demo.steps == 30 and demo.summary["success"] == 1.0
    assert math.isnan(demo.summary["return"]) and np.isnan(demo.rewards).all()
    assert demo.inputs["features"].shape == (30, 39)
    with RunDatabase(tmp_path) as db:
        run_id, take_number = save_take(db, demo)
        assert take_number == 0 and db.run(run_id)["status"] == "recorded"
        row = db.load_demonstration(run_id)
        assert (row["source"], row["label"], row["steps"]) == ("teleop (arm_real)", "left hinge", 30)
        assert row["columns"] == list(DOOR.observation_columns)
        np.testing.assert_allclose(row["actions"], demo.actions)
        assert len(db.load_steps(run_id, kind="demo")) == 30
        assert [e["kind"] for e in db.events(run_id)] == ["demonstration"]
        assert save_take(db, demo) == (run_id, 1), "the next kept take is added as take 1"
        assert db.demonstration_takes(run_id) == [0, 1]


def test_several_takes_are_fitted_concatenated_with_their_boundaries(tmp_path):
    """All kept takes, or a chosen list, become one dataset take after take; each take stays
    its own `demo` episode in the step table."""
    task = get_task("door_open")
    with RunDatabase(tmp_path) as db:
        for steps in (30, 20, 25):
            run_id, _ = save_take(db, build_demonstration(task, _door_take(steps), source="teleop (arm_real)",
                                                          columns=DOOR.observation_columns, seed=-1, label=None))
        every = Demonstration.load(db, run_id)
        assert every.takes == (0, 1, 2) and every.take_starts == (0, 30, 50) and every.steps == 75
        assert every.inputs["features"].shape == (75, 39) and every.summary["takes"] == 3
        assert every.table["episode"].tolist() == [0] * 30 + [1] * 20 + [2] * 25
        np.testing.assert_allclose(every.actions[30:50], db.load_demonstration(run_id, 1)["actions"])
        chosen = Demonstration.load(db, run_id, parse_takes("2,0"))
        assert chosen.takes == (2, 0) and chosen.take_starts == (0, 25) and chosen.steps == 55
        with pytest.raises(DemonstrationError, match="no take 7"):
            Demonstration.load(db, run_id, (7,))
    for bad in ("x", "1,1", "-1"):
        with pytest.raises(ValueError):
            parse_takes(bad)
    assert parse_takes("all") is None and parse_takes(" 0, 2 ") == (0, 2)


def test_a_take_is_refused_for_a_run_of_another_task_or_with_fitted_rounds(tmp_path):
    demo = build_demonstration(get_task("door_open"), _door_take(), source="teleop (door_sim)",
                               columns=DOOR.observation_columns, seed=0, label=None)
    with RunDatabase(tmp_path / "car") as db:
        db.create_run("car_racing")
        with pytest.raises(DemonstrationError, match="car_racing run"):
            save_take(db, demo)
    with RunDatabase(tmp_path / "fitted") as db:
        run_id, _ = save_take(db, demo)
        db.save_round(run_id, 0, program="x")
        with pytest.raises(DemonstrationError, match="already has rounds"):
            save_take(db, demo)
        assert len(db.events(run_id, kind="demonstration")) == 1, "nothing of the refused take was written"
    with pytest.raises(DemonstrationError, match="column 0"):
        build_demonstration(get_task("door_open"), _door_take(), source="teleop (x)",
                            columns=list(reversed(DOOR.observation_columns)), seed=0, label=None)


def test_a_takes_driver_topics_round_trip_through_mcap(tmp_path):
    """The serialized messages a take collected come back decoded from its MCAP file."""
    from mcap_ros2.reader import read_ros2_messages
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import JointState

    from refine_ros.teleop.take_bag import TakeBag, message_class, parse_topics

    topics = parse_topics(["/joint_states:sensor_msgs/msg/JointState", " "])
    assert topics == [("/joint_states", "sensor_msgs/msg/JointState")] and message_class(topics[0][1]) is JointState
    for bad in ("/joint_states", "/x:sensor_msgs/JointState", ":std_msgs/msg/String"):
        with pytest.raises(ValueError, match="TOPIC:PACKAGE/msg/TYPE"):
            parse_topics([bad])
    bag = TakeBag(topics)
    for k in range(3):
        bag.add("/joint_states", 1_000 + k, serialize_message(JointState(name=["j"], position=[0.1 * k])))
    path = bag.write(tmp_path / "takes" / "take_0.mcap", {"take": "0"})
    read = [m.ros_msg for m in read_ros2_messages(str(path))]
    assert [list(m.position) for m in read] == [[0.0], [0.1], [0.2]] and read[0].name == ["j"]
