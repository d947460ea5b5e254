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


def _tests(seconds: float, count: int, *, mark: str = "", name: str = "ordinary") -> str:
    """A module of `count` tests that each sleep `seconds` and record when they ran."""
    decorator = f"@pytest.mark.{mark}\n" if mark else ""
    return TIMED_TEST.format(seconds=seconds) + "".join(
        f"\n{decorator}def test_{name}_{i}():\n    _record('{name}')\n" for i in range(count))


def _run_suite(folder: Path, modules: dict[str, str], **env: str) -> tuple[int, str, list[list]]:
    """Run `modules` with this suite's conftest and pytest.ini, as `make test` does (two workers,
    whole modules each): exit status, output, and what the timed tests recorded. Every process
    it started is gone afterwards, a worker the backstop did not end included."""
    for name in ("conftest.py", "../pytest.ini"):
        (folder / Path(name).name).write_text((HERE / name).read_text())
    for name, text in modules.items():
        (folder / name).write_text(text)
    log = folder / "schedule.jsonl"
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                            "no:cacheprovider", str(folder)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, cwd=folder, env={**os.environ, "SCHEDULE_LOG": str(log), **env},
                           start_new_session=True)
    try:
        out, _ = run.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return run.returncode, out, records


def test_an_alone_test_has_the_machine_to_itself_and_the_alone_tests_run_back_to_back(tmp_path):
    """Two workers, two `alone` tests and four ordinary ones (in two modules): no ordinary test
    runs while an `alone` one does, and none runs between the two `alone` tests (their worker
    keeps the machine from one to the next). Where the machine allows it (root), the `alone` tests
    and what they start run at a raised priority, and the ordinary ones at the usual one."""
    status, out, records = _run_suite(tmp_path, {"test_robot.py": _tests(0.6, 2, mark="alone", name="alone"),
                                                 "test_first.py": _tests(0.6, 2), "test_second.py": _tests(0.6, 2)})
    assert status == 0, out[-6000:]
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
    status, out, _ = _run_suite(tmp_path, {"test_stuck.py": STUCK_TEST}, REFINE_TEST_BACKSTOP_MARGIN_S="3")
    assert status == 1, out[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "crashed while running 'test_stuck.py::test_stuck_holding_the_interpreter_lock'" in out, out[-3000:]
    assert "stuck past its timeout" in out and 'test_stuck.py", line 9 in test_stuck_holding_the_interpreter_lock' in out, \
        out[-3000:]


def test_a_test_waiting_for_the_alone_ones_is_not_taken_for_stuck(tmp_path):
    """The backstop counts a test's own time, not its wait for the machine: ordinary tests with a
    backstop of 2.5 s (timeout 2 s + 0.5 s) wait about 6 s for two `alone` tests of 3 s, and pass."""
    status, out, records = _run_suite(tmp_path, {"test_robot.py": _tests(3.0, 2, mark="alone", name="alone"),
                                                 "test_other.py": _tests(0.3, 3, mark="timeout(2)")},
                                      REFINE_TEST_BACKSTOP_MARGIN_S="0.5")
    assert status == 0 and "5 passed" in out, out[-6000:]
    runs = sorted((start, end, name) for name, start, end, *_ in records)
    alone_end = max(end for _, end, name in runs if name == "alone")
    assert any(start >= alone_end for start, _, name in runs if name == "ordinary"), ("none waited", runs)
