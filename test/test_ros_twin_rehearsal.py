"""The whole real-robot workflow rehearsed on each robot's physics twin, as docs/ROBOT_CHECKLIST.md's twin
commands run it, with small step caps: a take teleoperated through the safety node (`refine
up arm_real_record_demo --twin`, a gamepad held with the dead-man down, demo/start, demo/stop,
demo/label true, demo/keep), then `refine up arm_real --twin` fits that take, runs a round and its live
episodes on the twin, then post-refinement RL (learner/run_rl), each episode after the
operator's confirmation, with the safety node in the path; the same for the car (`rc_car_real`, the track detector reading the twin's camera).
Every node is a process of its own (`refine up --processes`, as the checklist runs it); the
gamepad and the operator are this test. `tools/rehearse_twin.py` runs the full-size version
(two takes, two rounds, the task's episode length)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from fake_robots import DemoStatus, FakeGamepad, call  # noqa: E402
from std_srvs.srv import SetBool, Trigger  # noqa: E402

from refine_core.store.db import RunDatabase  # noqa: E402
from refine_core.tasks.registry import get_task  # noqa: E402
from refine_ros.bringup.spin import NodeSpinner  # noqa: E402
from refine_ros.teleop.maps import BUTTON_LEFT_SHOULDER, LEFT_Y  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
STEPS = 10
RL = {"group_size": 2, "window": 5, "select_every": 1, "selection_episodes": 1}
"""Post-refinement RL after the round, at its smallest: one update of two episodes, the policy
scored on one selection episode before and after it (four operator resets)."""
ROBOTS = {
    # profile, the stick held, (action index, its value through the safety node), the
    # observation feature that must grow while the robot moves and by how much, the teleop's
    # dead-man, the buttons held while the policy drives
    "arm": ("arm_real", {LEFT_Y: 0.6}, (1, 0.6), ("features", 1, 0.03), BUTTON_LEFT_SHOULDER, {}),  # the tool's y, m
    # F1TENTH's pad (joy_node, an F710 in D mode): left stick forward is gas, RB the dead-man of
    # both teleop and autonomy (without it /drive never reaches the VESC)
    "car": ("rc_car_real", {LEFT_Y: 0.3}, (1, 0.3), ("indicators", 0, 0.02), 5, {5: 1}),  # gas: the speed
}


def _up(profile: str, run_dir, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "refine_core.cli", "up", profile, "--twin", "--processes",
                             "--run", str(run_dir),
                             "--timeout", "300", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)  # fmt: skip


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("robot", list(ROBOTS))
def test_take_fit_round_and_live_episodes_on_the_twin(context, run_dir, robot):
    profile, stick, (axis, value), (inputs, feature, growth), deadman, autonomy = ROBOTS[robot]
    pad, operator = FakeGamepad(context), DemoStatus(context)
    confirm = operator.create_client(Trigger, "safety/confirm_episode")
    spinner = NodeSpinner([pad, operator], context).start()
    procs: list[subprocess.Popen] = []
    try:
        # 1. the take: the stick forward (the task's +dy), the dead-man held
        record = _up(f"{profile}_record_demo", run_dir)
        procs.append(record)
        # an operator picks up the gamepad once the teleop node hears it: a take started before
        # that would be mostly dead-man pauses
        deadline = time.monotonic() + 120.0
        while pad.pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        for _take in range(4):  # a take the recorder refuses (a sensor paused) is recorded again
            pad.hold(axes={i: 0.0 for i in stick}, buttons={deadman: 0})
            deadline = time.monotonic() + 120.0
            while True:  # the twin's first observations (and their columns) take a moment
                started = call(operator.start, Trigger.Request(), timeout=120.0)
                if started.success or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert started.success, started.message
            # the stick only now, so the take begins at rest: held while the graph came up, it
            # would have driven the robot before the take
            pad.hold(axes=stick, buttons={deadman: 1})
            time.sleep(2.0)
            stopped = call(operator.stop, Trigger.Request())
            if stopped.success:
                break
        assert stopped.success, stopped.message
        labelled = call(operator.label, SetBool.Request(data=True))
        assert labelled.success, labelled.message
        kept = call(operator.keep, Trigger.Request())  # the label is the verdict; keep stores the take
        assert kept.success, kept.message
        out, _ = record.communicate(timeout=90)
        assert record.returncode == 0, out[-3000:]
        with RunDatabase(run_dir) as db:
            demo = db.load_demonstration(db.latest_run()["id"])
        assert demo["source"] == f"teleop ({profile})" and demo["steps"] >= 30, demo["steps"]
        assert np.median(demo["actions"][:, axis]) == pytest.approx(value), "the stick, through the safety node"
        seen = np.asarray(demo["inputs"][inputs])[:, feature]
        # the graph's own log with it: seen once (ciL) with the safe actions recorded and the arm
        # still, where the nodes' lines are all there is to tell where the commands stopped
        assert seen.max() > seen[0] + growth, "the twin moved with the stick\n" + out[-6000:]

        # 2. a refinement round and its live episodes on the twin, each confirmed by the operator
        pad.hold(axes={i: 0.0 for i in stick}, buttons={deadman: 0, **autonomy})
        # the program's sandboxed validation before a fit gets 120 s, not the learner's 20 s default:
        # this test's machine also runs the twin, the graph and other tests on two cores
        refine = _up(profile, run_dir, "--max-rounds", "1", "--diagnostic-episodes", "1", "--max-steps", str(STEPS),
                     "--set", "analysis_node.rl_resets=2", "--set", f"analysis_node.rl='{json.dumps(RL)}'",
                     "--set", "learner_node.fit_validation_timeout=120")
        procs.append(refine)
        assert confirm.wait_for_service(timeout_sec=120.0), "the safety node never came up"
        deadline = time.monotonic() + 400.0
        while refine.poll() is None and time.monotonic() < deadline:
            # what an operator watching the arm does, again and again (an answer may be slow
            # while the learner fits, and none comes once the run is over)
            confirm.call_async(Trigger.Request())
            time.sleep(1.0)
        out, _ = refine.communicate(timeout=60)
        assert refine.returncode == 0, out[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        spinner.stop()
        pad.destroy_node()
        operator.destroy_node()
    with RunDatabase(run_dir) as db:
        run_id = db.latest_run()["id"]
        round0, rl = db.rounds(run_id)
        assert round0["status"] == "committed", round0
        assert round0["fit_report"]["n_train"] + round0["fit_report"]["n_val"] == demo["steps"]
        episodes = db.episodes(run_id, 0)
        assert sorted(zip(episodes["kind"], episodes["steps"], strict=True)) == [("diagnostic", STEPS),
                                                                                ("selection", STEPS)]
        steps = db.load_steps(run_id, 0)
        task = get_task("door_open" if robot == "arm" else "car_racing")
        safe = steps[[f"safe_{a}" for a in task.spec.action_names]]
        # live on the twin: the safety node sent commands (a few may reach the logger too late
        # to be paired with their step on a loaded machine, as in the lifecycle test)
        assert safe.notna().all(axis=1).mean() >= 0.8, safe

        # 3. RL after the round: a robot publishes no reward. The door's metric is measured from
        # the arm's observations, so RL learns from it, each of its episodes live on the twin
        # after the operator's confirmation; the car's is not, so RL is refused before any reset.
        assert rl["decision"] == "rl", rl
        driven = db.episodes(run_id, rl["round"])
        if task.metric_from_observations:
            assert rl["status"] == "committed", rl
            assert rl["fit_report"]["rl"]["resets"] == 2 and rl["fit_report"]["rl"]["selection_resets"] == 2
            # the graph's log with it: seen once (ciK), the RL round's closing selection episode
            # logged with 0 steps, and only the nodes' lines can say where its steps went
            assert sorted(zip(driven["kind"], driven["steps"], strict=True)) == [
                ("rl", STEPS), ("rl", STEPS), ("rl_selection", STEPS), ("rl_selection", STEPS), ("selection", STEPS)], \
                f"{driven.to_dict('records')}\nrefine up's output (end):\n{out[-8000:]}"
            assert (driven["complete"] == 1).all(), driven
        else:
            assert rl["status"] == "failed" and "not measured from its observations" in rl["error"], rl
            assert driven.empty, "RL spent operator resets before it was refused"
