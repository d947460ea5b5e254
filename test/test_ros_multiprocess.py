"""The node graph as `ros2 launch` runs it: every node its own process, started from its console
script with exactly the executable, node name, parameters file and remappings the launch files
use (`bringup.launch_plan`, run by `refine_ros.bringup.processes` because `launch` is not on PyPI).
A car_sim and a door_sim round complete, every step reaches the database with no gap, the
run ends when the analysis node does, and Ctrl-C ends every node within 5 s without a
traceback."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from refine_core.store.db import RunDatabase  # noqa: E402
from refine_ros.bench import ros_env  # noqa: E402
from refine_ros.bringup import launch_plan  # noqa: E402
from refine_ros.bringup.processes import STOP_TIMEOUT_S, ProcessGraph  # noqa: E402
from refine_ros.bringup.up import EXIT_STOPPED, UpOptions, plan_profile, run_profile  # noqa: E402

MAX_STEPS = 40
SMALL = ["analysis_node.selection_episodes=1", "analysis_node.eval_episodes=1"]


def _options(run_dir, **kw) -> UpOptions:
    settings = {"max_rounds": 1, "diagnostic_episodes": 1, "max_steps": MAX_STEPS, "sets": SMALL, "processes": True, **kw}
    return UpOptions(run_dir=run_dir, **settings)


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("profile", ["car_sim", "door_sim"])
def test_a_round_with_every_node_in_its_own_process(profile, tmp_path, monkeypatch, capsys):
    for key, value in ros_env().items():  # a DDS domain of its own for the child processes
        monkeypatch.setenv(key, value)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    code = run_profile(profile, _options(run_dir, timeout_s=300))
    out = capsys.readouterr().out
    assert code == EXIT_STOPPED, out[-3000:]
    assert "analysis_node]: process has finished cleanly" in out, "the run ended with the analysis node"
    assert "Traceback" not in out, out[-3000:]
    for name in ("sim_node", "learner_node", "rollout_logger", "analysis_node"):
        assert f"[{name}]: process started with pid" in out, f"{name} was not its own process"
    with RunDatabase(run_dir, create=False) as db:
        run = db.latest_run()
        (round0,) = db.rounds(run["id"])
        assert round0["status"] == "committed" and round0["has_weights"]
        steps = db.load_steps(run["id"], 0, kind="diagnostic")
        assert list(steps["step"]) == list(range(MAX_STEPS)), "every step logged, in order"
        episodes = db.episodes(run["id"], 0)
        assert sorted(episodes["kind"]) == ["diagnostic", "eval", "selection"]
        assert (episodes["complete"] == 1).all() and (episodes["steps"] == MAX_STEPS).all()
        assert not db.events(run["id"], kind="gap"), "no message lost between the processes"
    print(f"{profile}: one round through {len(launch_plan(plan_profile(profile, _options(run_dir))).nodes)} "
          f"processes in {time.monotonic() - started:.1f} s")


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ctrl_c_ends_every_node_within_five_seconds_without_a_traceback(tmp_path):
    """SIGINT to every node at once, as `ros2 launch` (and a terminal's Ctrl-C) sends it, while
    the learner is driving episodes: each exits 0 within STOP_TIMEOUT_S (after which launch
    would escalate to SIGTERM), and none prints a traceback (the learner's 'publisher's context
    is invalid' of issue 11)."""
    plan = launch_plan(plan_profile("door_sim", _options(tmp_path / "run", max_rounds=2)))
    lines: list[str] = []
    graph = ProcessGraph(plan, env=ros_env(), echo=lines.append)
    try:
        graph.start()
        deadline = time.monotonic() + 200
        while not any("learner_node] " in line and "episodes" in line for line in lines):
            assert time.monotonic() < deadline, "the learner never started a round"
            assert graph.wait(timeout_s=0.2) == "timeout", "\n".join(lines[-40:])
        time.sleep(0.5)  # inside an episode
    finally:
        reports = graph.stop()
    text = "\n".join(lines)
    for report in reports:
        assert report.returncode == 0, f"{report.name} exit code {report.returncode}\n{text[-3000:]}"
        assert report.signals == ("SIGINT",), f"{report.name} needed {report.signals}"
        assert report.seconds < STOP_TIMEOUT_S, f"{report.name} took {report.seconds:.1f} s"
    assert {r.name for r in reports} == {"sim_node", "learner_node", "rollout_logger", "analysis_node"}
    assert "Traceback" not in text and "RCLError" not in text, text[-3000:]
    print({r.name: round(r.seconds, 2) for r in reports})


# ------------------------------------------------------------------------- the benchmarks, small
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_graph_benchmark_measures_both_layouts_without_loss():
    """`refine bench`'s ros_multiprocess_car_steps_per_s / ros_oneprocess_car_steps_per_s, on a
    small budget: both layouts ran the same steps and logged every one of them (the speed
    itself is the benchmark's verdict, not this test's)."""
    from refine_ros.bench.graph import bench_graph

    result = bench_graph(repeats=1, progress=False, episodes=1, max_steps=150)
    print({k: v for k, v in result.items() if k != "ros_graph_trials"})
    assert result["ros_multiprocess_car_steps_per_s"] > 0 and result["ros_oneprocess_car_steps_per_s"] > 0
    trials = result["ros_graph_trials"]
    assert {t["layout"] for t in trials} == {"oneprocess", "multiprocess"}
    for trial in trials:
        assert trial["rows"] == trial["steps"] > 0 and trial["gap_events"] == 0, trial
    assert len({t["steps"] for t in trials}) == 1, "both layouts did the same work"


@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_live_arm_graph_under_load_loses_nothing(tmp_path):
    """arm_real live, every node its own process, fake drivers at 50 Hz: every step of every
    episode is logged with its action and the safe command sent for it, no gap, and the
    watchdog does not trip while fresh inputs arrive (issue 11: 7 gap events, 18 missing action
    steps and 18 trips in one episode)."""
    from refine_ros.bench.robot import bench_robot

    result = bench_robot(episodes=2, steps=100, timeout_s=300, log_dir=tmp_path / "logs")
    print(result)
    assert result["ros_arm_real_outcome"] == "finished", f"every node's log and stacks: {tmp_path / 'logs'}"
    assert result["ros_arm_real_episodes"] == 2 and result["ros_arm_real_rows"] == 200
    assert result["ros_arm_real_gap_events"] == 0 and result["ros_arm_real_missing_steps"] == 0
    assert result["ros_arm_real_rows_missing_parts"] == 0
    assert result["ros_arm_real_driver_commands"] >= 200, "live: the bridge drove the arm"
    # The watchdog may stop the arm only when its inputs really went stale (here: this shared
    # machine held a process up for longer than the 60 ms the arm profile allows), or when the
    # safety node itself was held up two ticks in a row (issue 16: a late tick defers once only,
    # so a starved safety node still stops the arm rather than never judging).
    stale_ms = 60.0
    for trip in result["ros_arm_real_watchdog_trips_where"]:
        starved = trip["longest_action_gap_ms"] > stale_ms or trip["longest_driver_gap_ms"] > stale_ms
        assert starved or trip["safety_late_ticks"] > 0, f"the watchdog tripped with fresh inputs: {trip}"
    # A step without a safe command is one the safety node skipped because a newer command was
    # already waiting (its command reader is depth 1 on purpose: a robot acts on the newest
    # command, never on a backlog). That happens only when the machine holds a process of the
    # loop up (0 on a quiet machine; 1-12 of 200 with two experiments running beside the test;
    # 23 in a fresh-clone run beside two busy loops, ciO), so the test bounds it instead of
    # asking for none: one in ten where, while the episodes ran, neither the safety node's
    # watchdog ticked late nor the fake drivers stalled over 50 ms, a quarter where they did
    # (the host held the loop up); the row itself is never lost.
    skipped = result["ros_arm_real_steps_without_safe_command"]
    late, stalls = result["ros_arm_real_safety_late_ticks_in_episodes"], result["ros_arm_real_driver_stalls_in_episodes"]
    assert skipped <= (0.25 if late or stalls else 0.1) * result["ros_arm_real_rows"], \
        (skipped, late, stalls, result["ros_arm_real_steps_without_safe_command_first"])
