"""How `make test` shares the tests out over its workers (test/conftest.py): the controller
finds the `alone` tests in the source, since it collects nothing itself; what it finds must be
what pytest itself selects with `-m alone`."""

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import ALONE_NICE, alone_tests

HERE = Path(__file__).parent


def test_the_alone_tests_read_from_the_source_are_the_ones_pytest_marks():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "alone", "-p",
                           "no:cacheprovider", str(HERE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    marked = {(Path(line.split("::")[0]).name, line.split("::")[1].split("[")[0])
              for line in done.stdout.splitlines() if "::" in line}
    assert len(marked) >= 14, marked  # the watchdogs, twins, live graphs and fault cells at least
    assert alone_tests(HERE) == marked


TIMED_TEST = '''
import json, os, subprocess, sys, time
import pytest

def _record(name):
    start = time.monotonic()
    time.sleep({seconds})
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
                           capture_output=True, text=True, check=True).stdout
    with open(os.environ["SCHEDULE_LOG"], "a") as log:
        log.write(json.dumps([name, start, time.monotonic(), os.getpriority(os.PRIO_PROCESS, 0), int(child)]) + "\\n")
'''


def test_an_alone_test_has_the_machine_to_itself_and_the_alone_tests_run_back_to_back(tmp_path):
    """Two workers, two `alone` tests and four ordinary ones (in two modules): no ordinary test
    runs while an `alone` one does, and none runs between the two `alone` tests (their worker
    keeps the machine from one to the next). Where the machine allows it (root), the `alone` tests
    and what they start run at a raised priority, and the ordinary ones at the usual one."""
    for name in ("conftest.py", "../pytest.ini"):
        (tmp_path / Path(name).name).write_text((HERE / name).read_text())
    body = TIMED_TEST.format(seconds=0.6)
    (tmp_path / "test_robot.py").write_text(body + "".join(
        f"\n@pytest.mark.alone\ndef test_alone_{i}():\n    _record('alone')\n" for i in range(2)))
    for module in ("test_first.py", "test_second.py"):
        (tmp_path / module).write_text(body + "".join(
            f"\ndef test_ordinary_{i}():\n    _record('ordinary')\n" for i in range(2)))
    log = tmp_path / "schedule.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                           "no:cacheprovider", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "SCHEDULE_LOG": str(log)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    runs = sorted((start, end, name) for name, start, end, *_ in records)
    assert [name for *_, name in runs].count("alone") == 2 and len(runs) == 6, runs
    alone = [(start, end) for start, end, name in runs if name == "alone"]
    ordinary = [(start, end) for start, end, name in runs if name == "ordinary"]
    span = (alone[0][0], alone[-1][1])
    assert all(end <= span[0] or start >= span[1] for start, end in ordinary), runs
    usual = os.getpriority(os.PRIO_PROCESS, 0)
    may_raise = subprocess.run([sys.executable, "-c", "import os; os.nice(-1)"]).returncode == 0
    for name, *_, nice, child_nice in records:
        expected = ALONE_NICE if name == "alone" and may_raise else usual
        assert (nice, child_nice) == (expected, expected), (name, nice, child_nice, may_raise)


STUCK_TEST = """
import ctypes, pytest

@pytest.mark.timeout(2)
def test_stuck_holding_the_interpreter_lock():
    libc = ctypes.PyDLL(None)  # a PyDLL call keeps the interpreter's lock, as rclpy's destroy calls do
    mutex = ctypes.create_string_buffer(64)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)  # a plain mutex locked twice: a wait that no signal ends

def test_after_it():
    pass
"""


def test_a_test_stuck_in_native_code_ends_its_worker_with_the_stacks_and_the_run_goes_on(tmp_path):
    """What ciQ needed: a test stuck in native code with the interpreter's lock held (Fast DDS's
    deadlock, test/conftest.py: BACKSTOP_MARGIN_S), where pytest-timeout cannot raise. The run
    must end, that test reported as failed, with the stuck thread's stack, and the other tests run."""
    for name in ("conftest.py", "../pytest.ini"):
        (tmp_path / Path(name).name).write_text((HERE / name).read_text())
    (tmp_path / "test_stuck.py").write_text(STUCK_TEST)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", str(tmp_path)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
                           env={**os.environ, "REFINE_TEST_BACKSTOP_MARGIN_S": "3"}, start_new_session=True)
    try:
        out, _ = run.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a worker the backstop did not end must not outlive the test
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "crashed while running 'test_stuck.py::test_stuck_holding_the_interpreter_lock'" in out, out[-3000:]
    assert "stuck past its timeout" in out and 'test_stuck.py", line 9 in test_stuck_holding_the_interpreter_lock' in out, \
        out[-3000:]


def test_a_test_waiting_for_the_alone_ones_is_not_taken_for_stuck(tmp_path):
    """The backstop counts a test's own time, not its wait for the machine: ordinary tests with a
    backstop of 2.5 s (timeout 2 s + 0.5 s) wait about 6 s for two `alone` tests of 3 s, and pass."""
    for name in ("conftest.py", "../pytest.ini"):
        (tmp_path / Path(name).name).write_text((HERE / name).read_text())
    (tmp_path / "test_robot.py").write_text(TIMED_TEST.format(seconds=3.0) + "".join(
        f"\n@pytest.mark.alone\ndef test_alone_{i}():\n    _record('alone')\n" for i in range(2)))
    (tmp_path / "test_other.py").write_text(TIMED_TEST.format(seconds=0.3) + "".join(
        f"\n@pytest.mark.timeout(2)\ndef test_ordinary_{i}():\n    _record('ordinary')\n" for i in range(3)))
    log = tmp_path / "schedule.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                           "no:cacheprovider", str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env={**os.environ, "SCHEDULE_LOG": str(log), "REFINE_TEST_BACKSTOP_MARGIN_S": "0.5"})
    assert done.returncode == 0 and "5 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    runs = sorted((start, end, name) for name, start, end, *_ in map(json.loads, log.read_text().splitlines()))
    alone_end = max(end for _, end, name in runs if name == "alone")
    assert any(start >= alone_end for start, _, name in runs if name == "ordinary"), ("none waited", runs)
