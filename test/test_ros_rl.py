"""Post-refinement RL as the learner's goal (`learner/run_rl`): the real learner_node and
sim_node, each its own process from its console script, a client sending the goal over DDS.
Feedback names the phase and every update's record; the result holds the kept weights and the
RL report; a cancel ends the running episode and the run before its next update. Through the
whole graph (`refine up door_sim --processes`), RL after refinement is a committed round whose
episodes the learner drove and the logger stored. The rule for a robot that publishes no
reward is tested without DDS."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from refine_ros.bench import ros_env, stop_process, wait_for  # noqa: E402

MAX_STEPS = 20
TINY = {"group_size": 2, "window": 5, "select_every": 1, "selection_episodes": 2, "max_steps": MAX_STEPS}
EPISODE_TIMEOUT_S = 15.0
"""The learner's own limit on one episode (its `episode_timeout`, set to this): a 20-step door
episode in lockstep takes well under a second, and one that takes longer ends as a recorded
error, never as a hang. Every wait for RL below is that many episodes times this limit, plus
one more for the updates' arithmetic."""
FIT_TIMEOUT_S = 120.0
"""The learner's limits on one sandboxed fit and on its validation phase (its `fit_timeout` and
`fit_validation_timeout`, set to this; the validation's default, 20 s, was missed on a machine
with a load of 20 on two cores)."""
STARTUP_S = 120.0
"""A node process's start (torch and MuJoCo imports) on a loaded machine."""


def _episodes_s(episodes: int) -> float:
    return (episodes + 1) * EPISODE_TIMEOUT_S


def _start(executable: str, *params: str) -> tuple[subprocess.Popen, list[str]]:
    script = Path(sys.executable).parent / executable
    args = [str(script), "--ros-args", *(a for p in params for a in ("-p", p))]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ros_env())
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True).start()
    return proc, lines


@pytest.fixture
def sim_and_learner(tmp_path):
    """sim_node and learner_node (door, lockstep) on a run directory holding a door
    demonstration; yields (run id, fitted bundle, learner's log lines)."""
    from refine_core.backends import LocalFitter
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.demo import record_demonstration
    from refine_core.store.db import RunDatabase
    from refine_core.tasks.registry import get_task

    task = get_task("door_open")
    demo = record_demonstration(task, max_steps=60)
    run_dir = tmp_path / "run"
    with RunDatabase(run_dir) as db:
        run_id = db.create_run("door_open")
        demo.save(db, run_id)
    fit = LocalFitter(task, timeout_s=FIT_TIMEOUT_S, validation_s=FIT_TIMEOUT_S).fit(starter_program("door_open"), demo)
    assert not fit.failed, fit.error
    sim, _ = _start("sim_node", "task:=door_open")
    learner, lines = _start("learner_node", "task:=door_open", f"run_dir:={run_dir}",
                            f"episode_timeout:={EPISODE_TIMEOUT_S}", "listeners:=['']")  # no logger here
    try:
        deadline = time.monotonic() + STARTUP_S
        while not any("goals" in line and "ready" in line for line in lines):
            assert learner.poll() is None and time.monotonic() < deadline, "".join(lines)[-2000:]
            time.sleep(0.1)
        yield run_id, fit.bundle, lines
    finally:
        stop_process(learner)
        stop_process(sim)


@pytest.fixture
def client(context):
    import rclpy

    from refine_ros.bringup.spin import NodeSpinner

    node = rclpy.create_node("rl_test_client", context=context)
    spinner = NodeSpinner([node], context, kind="multi").start()
    yield node
    spinner.stop()
    node.destroy_node()


def _wait(future, timeout: float):
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(timeout), "no answer in time"
    return future.result()


def _send(node, goal, feedback: list):
    from refine_ros.bringup.spin import action_client
    from refine_ros.wire import protocol
    from refine_ros_interfaces.action import RunRl

    client = action_client(node, RunRl, protocol.RL_ACTION)
    assert client.wait_for_server(timeout_sec=STARTUP_S), "no learner/run_rl action server"
    handle = _wait(client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback)),
                   EPISODE_TIMEOUT_S)
    assert handle.accepted
    return handle


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rl_goal_drives_its_episodes_on_the_sim_node_with_feedback_per_update(client, sim_and_learner):
    from action_msgs.msg import GoalStatus

    from refine_ros.wire import protocol

    run_id, bundle, lines = sim_and_learner
    feedback: list = []
    # the analysis node's own client, which follows the goal by its id on the status topic when
    # the middleware drops the learner's answer (a loaded machine: the CI lost one here)
    from types import SimpleNamespace

    from refine_ros.loop.graph import LearnerLink

    link = LearnerLink(client, threading.Event())
    status, result = link.ask(link.rl_client, protocol.rl_goal(run_id, 3, bundle, {**TINY, "reset_budget": 4}),
                              "run RL", feedback.append)
    outcome = SimpleNamespace(status=status, result=result)
    assert outcome.status == GoalStatus.STATUS_SUCCEEDED, outcome.result.error + "".join(lines[-30:])
    kept, report, error = protocol.read_rl_result(outcome.result)
    assert error is None and kept is not None and kept.source == bundle.source
    assert report["updates"] == 2 and report["resets"] == 4 and outcome.result.training_resets == 4
    # selection before the first update and after each (select_every 1), two episodes each
    assert [s["update"] for s in report["selection"]] == [0, 1, 2] and outcome.result.selection_resets == 6
    assert report["selection_mode"] == "mean" and report["checkpoint"] == "accepted"
    assert all(len(s["per_seed"]) == 2 for s in report["selection"])
    assert all(c["steps_mean"] == MAX_STEPS and c["kl"] >= 0 for c in report["curve"]), "20-step episodes"
    # feedback is a topic, the result a service: the last update's feedback may come after it
    assert wait_for(lambda: any(f.update == 2 and f.record_json for f in feedback), EPISODE_TIMEOUT_S)
    phases = {protocol.RL_PHASES[f.phase] for f in feedback}
    assert {"sampling", "updating", "selecting"} <= phases
    records = [json.loads(f.record_json) for f in feedback if f.record_json]
    assert [r["update"] for r in records][-1] == 2 and {"return_mean", "kl", "clip_frac"} <= set(records[-1])
    assert max(f.resets_done for f in feedback) <= feedback[-1].resets_planned == 4 + 6
    assert any("RL done" in line for line in lines)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_cancelled_rl_goal_stops_before_its_next_update(client, sim_and_learner):
    from action_msgs.msg import GoalStatus

    from refine_ros.wire import protocol

    run_id, bundle, lines = sim_and_learner
    feedback: list = []
    handle = _send(client, protocol.rl_goal(run_id, 3, bundle, {**TINY, "reset_budget": 40}), feedback)
    result = handle.get_result_async()
    # the first update follows two selection and two training episodes
    wait_for(lambda: result.done() or any(f.update >= 1 for f in feedback), _episodes_s(4))
    assert any(f.update >= 1 for f in feedback), "no update finished" + "".join(lines[-20:])
    _wait(handle.cancel_goal_async(), EPISODE_TIMEOUT_S)
    outcome = _wait(result, _episodes_s(1))  # the running episode ends, then the run
    assert outcome.status == GoalStatus.STATUS_CANCELED
    kept, report, error = protocol.read_rl_result(outcome.result)
    assert error is None and kept is not None, "the weights kept so far come back"
    assert report["stopped"] and report["updates"] < 20


def test_a_robot_without_rewards_learns_from_the_metric_it_measures_or_says_it_cannot():
    """No refine/reward on a robot: the door's metric (min handle-target distance, from its
    observations) becomes the episode's one, final reward, signed so that higher is better;
    the car's metric is its return, which a robot does not measure, so RL refuses to run."""
    import torch

    from refine_core.tasks.registry import get_task
    from refine_ros.loop.rl_episodes import RlEpisodeError, trajectory

    class Silent:  # an ActiveEpisode that heard no reward
        rewards: list = []

    def steps(task, n):
        spec = task.spec
        a = len(spec.actions)
        return [({s.name: torch.zeros(1, *s.shape) for s in spec.inputs}, torch.zeros(a), torch.tensor(0.0),
                 torch.zeros(a), torch.eye(a)) for _ in range(n)]

    door = get_task("door_open")
    t = trajectory(door, steps(door, 3), Silent(), {"index": 0, "summary": {"metric": 0.3}})
    assert t.rewards.tolist() == pytest.approx([0.0, 0.0, -0.3])
    with pytest.raises(RlEpisodeError, match="not measured"):
        trajectory(door, steps(door, 3), Silent(), {"index": 0, "summary": {"metric": float("nan")}})
    car = get_task("car_racing")
    with pytest.raises(RlEpisodeError, match="not measured from its observations"):
        trajectory(car, steps(car, 3), Silent(), {"index": 0, "summary": {"metric": 0.0}})

    class Heard:
        rewards = [1.0, 2.0, 3.0]

    assert trajectory(car, steps(car, 3), Heard(), {"index": 0, "summary": {}}).rewards.tolist() == [1.0, 2.0, 3.0]


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_rl_after_refinement_runs_on_the_learner_through_the_graph(tmp_path, monkeypatch, capsys):
    from refine_core.store.db import RunDatabase
    from refine_ros.bringup.up import EXIT_STOPPED, UpOptions, run_profile

    for key, value in ros_env().items():
        monkeypatch.setenv(key, value)
    run_dir = tmp_path / "run"
    settings = json.dumps({k: v for k, v in TINY.items() if k != "max_steps"})
    sets = ["analysis_node.selection_episodes=1", "analysis_node.eval_episodes=1", "analysis_node.rl_resets=4",
            f"analysis_node.rl='{settings}'", f"learner_node.episode_timeout={EPISODE_TIMEOUT_S}",
            f"learner_node.fit_timeout={FIT_TIMEOUT_S}", f"learner_node.fit_validation_timeout={FIT_TIMEOUT_S}"]
    # one fit; round 0's three episodes, RL's ten, the RL round's two
    budget = STARTUP_S + FIT_TIMEOUT_S + _episodes_s(3 + 10 + 2)
    code = run_profile("door_sim", UpOptions(run_dir=run_dir, max_rounds=1, diagnostic_episodes=1,
                                             max_steps=MAX_STEPS, sets=sets, processes=True, timeout_s=budget))
    out = capsys.readouterr().out
    assert code == EXIT_STOPPED, out[-3000:]
    assert "RL update 2 of 2" in out and "Traceback" not in out, out[-3000:]
    with RunDatabase(run_dir, create=False) as db:
        run_id = db.latest_run()["id"]
        rounds = db.rounds(run_id)
        assert [r["decision"] for r in rounds][-1] == "rl" and rounds[-1]["status"] == "committed", rounds[-1]
        rl = rounds[-1]["fit_report"]["rl"]
        assert rl["resets"] == 4 and rl["selection_resets"] == 6
        assert list(db.rl_updates(run_id, rounds[-1]["round"])["update"]) == [1, 2], "records as they were made"
        episodes = db.episodes(run_id, rounds[-1]["round"])
        kinds = episodes.groupby("kind").size().to_dict()
        assert kinds["rl"] == 4 and kinds["rl_selection"] == 6, kinds
        assert kinds["selection"] == 1 and kinds["eval"] == 1, "the RL round's own evaluation"
        # RL's episodes and the evaluation after them are one round's: none may share a counter
        gaps = db.events(run_id, kind="gap")  # which stream's step never came, if one did
        assert (episodes["complete"] == 1).all() and episodes["error"].isna().all(), (episodes, gaps)
        assert (episodes["steps"] == MAX_STEPS).all()
