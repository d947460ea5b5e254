"""A third task proves a task is one folder: the pendulum (one folder, one registry line) runs
through `refine run --analyst offline` and through `refine up pendulum_sim` with the ROS sim
node, and the offline analyst, which has no catalogue for it, starts from the task's own
starter program, runs the generic diagnostic battery with the task's features, and stops."""

from __future__ import annotations

import pytest

from refine_core.cli import main
from refine_core.policy.programs import starter_program
from refine_core.rollout.schema import RolloutSchema
from refine_core.store.db import RunDatabase
from refine_core.tasks import get_task

MAX_STEPS = 40


def _check_the_single_diagnosed_round(run_dir, steps: int, *, analyst_rounds_allowed: int) -> None:
    task = get_task("pendulum")
    with RunDatabase(run_dir, create=False) as db:
        run = db.latest_run()
        assert run["task"] == "pendulum" and run["status"] == "finished"
        rounds = db.rounds(run["id"])
        assert len(rounds) == 1 < analyst_rounds_allowed, "the analyst stopped, not the budget"
        first = rounds[0]
        assert first["status"] == "committed" and first["decision"] == "stop"
        assert first["program"] == starter_program("pendulum")
        assert "no catalogue" in run["stop_reason"] and "not an LLM" in run["stop_reason"]

        analyses = db.analyses(run["id"], 0)
        assert analyses and analyses[0]["status"] == "ok"
        out = analyses[0]["stdout"]
        for check in ("metric.generic", "sign.weight_k_angle", "sign.weight_k_velocity", "shift.angle"):
            assert f"CHECK {check} " in out, check
        assert "CHECK hotspot." not in out, "no expert relabels by default: no expert hot spots"

        table = db.load_steps(run["id"], 0, kind="diagnostic")
        assert list(table[table["episode"] == 0]["step"]) == list(range(steps))
        info = first["info_schema"]
        schema = RolloutSchema.for_task(task.spec, (*info["weights"], *info["latents"])).columns
        assert set(schema) == set(table.columns)
        for column in ("angle", "angular_velocity", "act_torque", "mean_torque",
                       "latent_torque_command", "next_angle"):
            assert table[column].notna().all(), column
        assert table["act_torque"].between(-2.0, 2.0).all()


@pytest.mark.timeout(600)
def test_refine_run_offline_on_the_pendulum(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["run", "--task", "pendulum", "--analyst", "offline", "--max-rounds", "3",
                 "--max-steps", str(MAX_STEPS), "--eval-episodes", "1", "--run", str(run_dir), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "no catalogue of edits for task 'pendulum'" in out
    _check_the_single_diagnosed_round(run_dir, MAX_STEPS, analyst_rounds_allowed=3)
    assert main(["report", "--run", str(run_dir)]) == 0
    assert "pendulum" in (run_dir / "report.html").read_text()


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_refine_up_pendulum_sim_with_the_sim_node(tmp_path):
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")
    from refine_ros.bringup.up import EXIT_STOPPED, UpOptions, run_profile

    run_dir = tmp_path / "up"
    sets = ["analysis_node.selection_episodes=1", "analysis_node.eval_episodes=1"]
    options = UpOptions(run_dir=run_dir, analyst="offline", max_rounds=3, diagnostic_episodes=1, max_steps=MAX_STEPS,
                        sets=sets, timeout_s=400)
    assert run_profile("pendulum_sim", options) == EXIT_STOPPED
    _check_the_single_diagnosed_round(run_dir, MAX_STEPS, analyst_rounds_allowed=3)


@pytest.mark.ros  # a one-process graph over DDS
def test_refine_up_in_a_thread_ends_when_its_stop_event_is_set(tmp_path):
    """`UpOptions.stop` is how an embedding program (and a failing test) takes a one-process
    graph down: the run ends as Ctrl-C would, long before its timeout, and closes its nodes."""
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")
    import threading
    import time

    from refine_ros.bringup.up import EXIT_INTERRUPTED, UpOptions, run_profile

    stop = threading.Event()
    options = UpOptions(run_dir=tmp_path / "up", analyst="offline", max_rounds=50, timeout_s=600, stop=stop)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(run_profile("pendulum_sim", options)), daemon=True)
    runner.start()
    time.sleep(5.0)
    assert runner.is_alive(), "fifty rounds cannot be over after five seconds"
    stop.set()
    runner.join(30.0)
    assert result == [EXIT_INTERRUPTED], "the run did not end within 30 s of its stop event"
