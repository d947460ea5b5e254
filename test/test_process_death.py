"""The robot stops when our processes die: the fault matrix's process-death cells
(refine_ros/bench/process_death.py) on the twins, every node a process of its own over real
DDS, and the verdict they apply. A bridge killed or frozen behind a forward velocity
controller or F1TENTH's VESC (stacks that hold the last command) and a safety node killed
behind MoveIt Servo: the twin's robot is driven no longer than the stack's own timeout (or the
named safeguard's), from its ground truth."""

from __future__ import annotations

import pytest

from refine_ros.bench.process_death import DeathCell, judge
from refine_ros.robots.registry import get_robot


class _Msg:
    def __init__(self, speed: float) -> None:
        self.data = [speed] * 7


def _rows(times, speed, commanded):
    return [(t, t, 0.45 + 0.03 * t, 0.0, 0.2, speed(t), commanded(t)) for t in times]


def test_a_process_that_will_not_stop_leaves_its_python_and_c_stacks_in_its_log(tmp_path):
    """A rig's node that ignores the stop for its whole grace period is killed, and its log says
    where it waited, below Python too (gdb): the next hang in rcl or the DDS library names itself."""
    import os
    import shutil
    import signal
    import time

    from refine_ros.bench.faults import Processes

    procs = Processes(dict(os.environ), tmp_path)
    procs.start("stuck", ["-c", "import faulthandler, signal, time; faulthandler.register(signal.SIGUSR1, "
                                "all_threads=True); signal.signal(signal.SIGINT, signal.SIG_IGN); "
                                "print('up', flush=True); time.sleep(120)"])
    deadline = time.monotonic() + 30
    while "up" not in procs.output("stuck") and time.monotonic() < deadline:
        time.sleep(0.05)
    procs.signal("stuck", signal.SIGINT)
    assert procs.wait("stuck", timeout=1.0) == -9
    log = procs.output("stuck")
    assert 'File "<string>", line 1' in log, log
    if shutil.which("gdb") is None:
        assert "no gdb here" in log
    else:
        assert "C stacks (gdb):" in log and "clock_nanosleep" in log, log[-3000:]
    # what a failed rig reports of it: its Python stack with the C one, however long gdb's is
    report = procs.hang_report("stuck", chars=1000)
    assert 'File "<string>", line 1' in report and len(report) <= 1000 + len("C stacks (gdb):"), report


def test_a_held_command_is_unsafe_and_a_stop_in_time_is_not():
    arm = get_robot("arm")
    times = [i * 0.02 for i in range(150)]
    held = DeathCell("arm", "forward_velocity", "sigkill_bridge", allowed_s=0.15)
    judge(held, arm, _rows(times, lambda t: 0.03, lambda t: 0.03), [], 0.5, None, 3.0)
    assert held.unsafe == 1 and held.driven_s > 2.0, "the controller held the last command: unsafe"
    stopped = DeathCell("arm", "forward_velocity", "sigkill_bridge", allowed_s=0.15)
    commands = [(0.4, _Msg(0.1)), (0.62, _Msg(0.0))]
    judge(stopped, arm, _rows(times, lambda t: 0.03 if t < 0.7 else 0.0, lambda t: 0.03 if t < 0.62 else 0.0),
          commands, 0.5, None, 3.0)
    assert stopped.unsafe == 0 and stopped.stop_latency_s == pytest.approx(0.12) and stopped.moved > 0
    # the graph had sent the stop just before the fault (ciG: a loaded machine's safety node):
    # latency 0, and a moving command after it still counts
    early = DeathCell("arm", "forward_velocity", "sigkill_bridge", allowed_s=0.15)
    judge(early, arm, _rows(times, lambda t: 0.03 if t < 0.55 else 0.0, lambda t: 0.0), [(0.48, _Msg(0.0))],
          0.5, None, 3.0)
    assert early.unsafe == 0 and early.stop_latency_s == 0.0 and early.driven_s == 0.0
    late = DeathCell("arm", "forward_velocity", "sigkill_bridge", allowed_s=0.15)
    judge(late, arm, _rows(times, lambda t: 0.03, lambda t: 0.0), [(0.48, _Msg(0.0)), (0.7, _Msg(0.1))],
          0.5, None, 3.0)
    assert late.driver_moving_after == 1 and late.unsafe == 1


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("robot, path, fault", [
    ("arm", "forward_velocity", "sigkill_bridge"),  # nothing upstream stops it: the command guard does
    ("arm", "forward_velocity", "sigstop_bridge"),
    ("arm", "servo_jazzy", "sigkill_safety"),  # the bridge's own watchdog, Servo's timeout
    ("car", "ackermann", "sigkill_bridge"),  # ackermann_mux sends no stop, the VESC holds for 1 s
    ("car", "ackermann", "sigstop_safety"),
])
@pytest.mark.alone  # a wall-clock budget: under pytest-xdist no other test runs beside it
def test_the_twins_robot_stops_within_the_stacks_own_timeout_when_a_process_dies(tmp_path, robot, path, fault):
    from refine_ros.bench import ros_env
    from refine_ros.bench.process_death import TOLERANCE_S, run_cell

    cell = run_cell(robot, path, fault, {**ros_env(), "PYTHONUNBUFFERED": "1"}, tmp_path)
    assert cell.error is None, cell.error
    timeline = tmp_path / "timeline.txt"  # a string, shown whole (a tuple's repr is cut short)
    assert cell.unsafe == 0, "\n".join([*cell.reasons, timeline.read_text()[:4000] if timeline.exists() else ""])
    assert cell.moved > 0, "the robot was moving when the process died"
    assert cell.driven_s <= cell.allowed_s + TOLERANCE_S and cell.stop_latency_s is not None
    assert not cell.resumed
