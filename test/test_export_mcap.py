"""`refine export`: a round's logged steps become ROS 2 messages in an MCAP file that the mcap
reader (with the ROS 2 decoder) opens, with one message per step per topic."""

from __future__ import annotations

import json

import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.programs import starter_program
from refine_core.rollout.runner import run_episode
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task
from refine_ros.viewers.export import ExportError, export_mcap, message_definition

STEPS = 12


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    """Two committed rounds of real door rollouts (starter program in MuJoCo); round 1 has the
    better (lower) selection metric, and one of its episodes carries an operator label."""
    path = tmp_path_factory.mktemp("export") / "run.db"
    task = get_task("door_open")
    policy = PolicyBundle(starter_program("door_open"), {}).build(task.spec)
    with RunDatabase(path) as db:
        run_id = db.create_run("door_open", analyst="offline")
        for rnd, metric in ((0, 0.5), (1, 0.2)):
            db.save_round(run_id, rnd, status="committed", program="# program", selection_metric=metric)
            for kind, seed in (("diagnostic", 200), ("eval", 1000)):
                result = run_episode(task, policy, seed, mode="mean", max_steps=STEPS,
                                     ids={"run_id": run_id, "round": rnd, "kind": kind, "episode": 0})
                db.save_episode(run_id, rnd, kind, 0, seed=seed, summary=result.summary, table=result.table)
        db.set_episode_label(run_id, 1, "diagnostic", 0, "success")
    return path


def read(path):
    counts, first = {}, {}
    with open(path, "rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _schema, channel, message, decoded in reader.iter_decoded_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            first.setdefault(channel.topic, []).append((message.log_time, decoded))
    return counts, first


def test_best_round_exports_every_step_as_typed_messages(logged_run, tmp_path):
    out = tmp_path / "best.mcap"
    counts = export_mcap(logged_run, out)
    seen, messages = read(out)
    assert seen == counts
    steps = 2 * STEPS  # diagnostic + eval episode of the best round
    for topic in ("refine/observation", "refine/action", "refine/policy_step", "refine/reward",
                  "refine/gripper_pose", "refine/handle_pose", "refine/target_pose"):
        assert counts[topic] == steps, topic
    assert counts["refine/episode_events"] == 4  # start + end per episode
    assert counts["refine/observation_columns"] == counts["refine/policy_step_columns"] == 1

    events = [json.loads(m.data) for _t, m in messages["refine/episode_events"]]
    assert {e["round"] for e in events} == {1}, "'best' is the round with the lower door metric"
    ends = [e for e in events if e["event"] == "end"]
    assert any(e.get("label") == "success" for e in ends), "operator labels travel with the episode"

    columns = json.loads(messages["refine/observation_columns"][0][1].data)
    assert columns[:3] == ["gripper_x", "gripper_y", "gripper_z"]
    obs_time, obs = messages["refine/observation"][1]
    assert obs.step == 1 and list(obs.names) == columns  # a named Step, as live
    assert obs.header.stamp.sec * 10**9 + obs.header.stamp.nanosec == obs_time
    _pose_time, pose = messages["refine/gripper_pose"][1]
    assert pose.pose.position.x == pytest.approx(obs.values[0]) and pose.header.frame_id == "world"
    _t, action = messages["refine/action"][1]
    assert action.layout.data_offset == 2 and action.data[1] == 1.0  # the command path's counted vector
    _t, reward = messages["refine/reward"][1]
    assert list(reward.names) == ["reward", "done"] and reward.values[1] == 0.0
    step_time = messages["refine/observation"][1][0] - messages["refine/observation"][0][0]
    assert step_time == pytest.approx(12_500_000)  # Meta-World's control period, in ns
    times = [t for t, _m in messages["refine/observation"]]
    assert times == sorted(times)


def test_round_and_kind_select_what_is_written(logged_run, tmp_path):
    counts = export_mcap(logged_run, tmp_path / "r0.mcap", round_="0", kind="eval")
    assert counts["refine/observation"] == STEPS
    _seen, messages = read(tmp_path / "r0.mcap")
    events = [json.loads(m.data) for _t, m in messages["refine/episode_events"]]
    assert {(e["round"], e["kind"]) for e in events} == {(0, "eval")}


@pytest.mark.parametrize(("round_", "kind", "match"), [
    ("seven", None, "number or 'best'"),
    (5, None, "no logged steps"),
    (0, "selection", "no logged steps of selection"),
])
def test_bad_requests_are_export_errors(logged_run, tmp_path, round_, kind, match):
    with pytest.raises(ExportError, match=match):
        export_mcap(logged_run, tmp_path / "x.mcap", round_=round_, kind=kind)


def test_missing_or_broken_database_is_an_export_error(tmp_path):
    with pytest.raises(ExportError, match="no run database"):
        export_mcap(tmp_path / "absent.db", tmp_path / "x.mcap")
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ExportError):
        export_mcap(broken, tmp_path / "x.mcap")


def test_message_definitions_include_their_dependencies():
    text = message_definition("geometry_msgs/msg/PoseStamped")
    assert "MSG: std_msgs/Header" in text and "MSG: geometry_msgs/Pose" in text
    assert "MSG: builtin_interfaces/Time" in text and "MSG: geometry_msgs/Quaternion" in text
    with pytest.raises(ExportError, match="not found"):
        message_definition("std_msgs/msg/NoSuchType")


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory):
    """One committed round of real pendulum rollouts (the task's own starter program)."""
    path = tmp_path_factory.mktemp("export_pendulum") / "run.db"
    task = get_task("pendulum")
    policy = PolicyBundle(starter_program("pendulum"), {}).build(task.spec)
    with RunDatabase(path) as db:
        run_id = db.create_run("pendulum", analyst="offline")
        db.save_round(run_id, 0, status="committed", program="# program", selection_metric=-100.0)
        result = run_episode(task, policy, 200, mode="mean", max_steps=STEPS,
                             ids={"run_id": run_id, "round": 0, "kind": "diagnostic", "episode": 0})
        db.save_episode(run_id, 0, "diagnostic", 0, seed=200, summary=result.summary, table=result.table)
    return path


def test_a_task_exports_what_its_logged_rows_show(pendulum_run, tmp_path):
    """Nothing in the export knows the pendulum: its joint and its shapes come from the task's
    `scene_from_observation`, on the topics and types the live sim node uses."""
    out = tmp_path / "pendulum.mcap"
    counts = export_mcap(pendulum_run, out)
    _seen, messages = read(out)
    assert counts["joint_states"] == counts["refine/markers"] == counts["refine/observation"] == STEPS
    assert not {"refine/gripper_pose", "refine/odom"} & set(counts)
    for (_t, obs), (_t2, joints), (_t3, markers) in zip(
        messages["refine/observation"], messages["joint_states"], messages["refine/markers"], strict=True
    ):
        assert list(joints.name) == ["pendulum_joint"]
        assert joints.position[0] == pytest.approx(obs.values[0]) and joints.velocity[0] == pytest.approx(obs.values[1])
        assert {m.ns for m in markers.markers} == {"pivot", "rod", "bob"}
    times = [t for t, _m in messages["joint_states"]]
    assert times[1] - times[0] == pytest.approx(50_000_000)  # Pendulum-v1's 0.05 s step, in ns
