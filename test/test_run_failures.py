"""A run that fails is visible to scripts and readable by people: the process that fails exits
non-zero with its own one-line reason, `refine up --processes` (and `ros2 launch`, through the
same `LaunchPlan.failure`) exits non-zero with that line, and a foreseeable operator mistake (no
demonstration recorded on the robot yet) is that one line, naming the real profile to run, never
a traceback or a `<profile>` placeholder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from refine_ros.bringup import LaunchPlan, last_error_line, resolve_profile

ROOT = Path(__file__).resolve().parents[1]


# ---- the plan's verdict (what launch_support raises and refine up prints) ----------------------------
def _plan(profile: str = "arm_real") -> LaunchPlan:
    from refine_ros.bringup import launch_plan

    return launch_plan(resolve_profile(profile), check_interpreter=False)


def test_the_finishing_node_exiting_zero_is_the_normal_end_and_non_zero_a_failure():
    plan = _plan()
    assert plan.failure("analysis_node", 0) is None
    failure = plan.failure("analysis_node", 1, "the run failed: no demonstration")
    assert failure == "analysis_node failed (exit code 1): the run failed: no demonstration"


def test_a_required_node_that_exits_early_fails_the_launch_with_its_own_reason():
    plan = _plan()
    reason = "learner_node: no demonstration recorded on arm_real in runs/x; record one first: ..."
    assert plan.failure("learner_node", 2, reason) == (
        f"learner_node exited before the run was over (exit code 2): {reason}")
    assert plan.failure("learner_node", 0) == "learner_node exited before the run was over (exit code 0)"
    assert plan.failure("rviz2", 1) is None  # an optional node (or one the plan does not start)


def test_the_reason_is_the_last_error_or_fatal_log_line():
    lines = ["[INFO] [1.0] [learner_node]: starting",
             "[FATAL] [2.0] [LearnerNode]: learner_node: no demonstration recorded on arm_real",
             "[INFO] [3.0] [learner_node]: bye"]
    assert last_error_line(lines) == "learner_node: no demonstration recorded on arm_real"
    assert last_error_line(["[analysis_node] [ERROR] [5.0] [analysis_node]: the run failed: x"]) == "the run failed: x"
    assert last_error_line(["[INFO] [1.0] [a]: fine"]) == ""


# ---- the processes, as users run them -------------------------------------------------------------------
@pytest.mark.ros
def test_the_analysis_node_of_a_robot_without_a_demonstration_exits_1_with_one_line(run_dir):
    """The analysis node alone, from its console script with arm_real's parameters: the run
    fails before it needs the learner, and says what to record, by name."""
    from refine_ros.bench import ros_env

    analysis = resolve_profile("arm_real").node("analysis_node").parameters
    args = [f"{k}:={str(v).lower() if isinstance(v, bool) else v}" for k, v in analysis.items()
            if not isinstance(v, (list, dict)) and k != "run_dir"]
    cmd = [str(Path(sys.executable).parent / "analysis_node"), "--ros-args", "-p", "task:=door_open",
           "-p", f"run_dir:={run_dir}", *[x for a in args for x in ("-p", a)]]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ros_env())
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "Traceback" not in out and "<profile>" not in out, out[-3000:]
    reason = last_error_line(out.splitlines())
    assert reason.startswith("the run failed: run 1 in ") and "has no demonstration" in reason, out[-3000:]
    assert f"refine up arm_real_record_demo --run {run_dir} --live" in reason


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_refine_up_processes_exits_non_zero_with_the_failing_nodes_reason(run_dir):
    """`refine up arm_real --processes` on a run directory without a demonstration (the first
    thing a new robot owner meets): exit status 1, the failing node's reason as refine's last
    line, and no traceback anywhere. Before, this exited 0 after a traceback."""
    from refine_ros.bench import ros_env

    done = subprocess.run([sys.executable, "-m", "refine_core.cli", "up", "arm_real", "--processes", "--run",
                           str(run_dir), "--timeout", "400"],
                          capture_output=True, text=True, timeout=500, env=ros_env(), cwd=ROOT)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-4000:]
    assert "Traceback" not in out and "<profile>" not in out, out[-4000:]
    last = [line for line in out.splitlines() if line.startswith("[refine] ")][-1]
    assert last.startswith(("[refine] analysis_node failed (exit code 1): the run failed:",
                            "[refine] learner_node exited before the run was over (exit code 2): learner_node: no "
                            "demonstration recorded on arm_real")), out[-4000:]
    assert "refine up arm_real_record_demo" in last


def _loading(pid: int, library: str) -> bool:
    """The process has mapped `library`: it is past Python's start and inside its imports."""
    try:
        return library in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.ros
@pytest.mark.timeout(120)
def test_a_node_interrupted_while_loading_stops_quietly(run_dir):
    """CI (stop 33) saw the analysis node, still importing when the learner refused to start,
    end the launch's output with a KeyboardInterrupt traceback out of the node registry's import,
    under the learner's real reason. A SIGINT before a node has taken over the signals is a stop:
    exit status 0, one line, no traceback. The signal is sent once rclpy's library is mapped,
    about a second before the node's imports (torch) are done."""
    import signal
    import time

    from refine_ros.bench import ros_env

    node = subprocess.Popen([str(Path(sys.executable).parent / "analysis_node"), "--ros-args", "-p",
                             "task:=door_open", "-p", f"run_dir:={run_dir}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ros_env())
    deadline = time.monotonic() + 60
    while not _loading(node.pid, "_rclpy_pybind11") and node.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    node.send_signal(signal.SIGINT)
    out, err = node.communicate(timeout=60)
    assert "Traceback" not in out + err, err[-3000:]
    assert node.returncode == 0, err[-3000:]
    assert "[analysis_node] stopped before it had started (interrupted while loading)" in err, err[-3000:]
