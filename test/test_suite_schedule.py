"""How `make test` shares the tests out over its workers (test/conftest.py): the controller
finds the `alone` tests in the source, since it collects nothing itself; what it finds must be
what pytest itself selects with `-m alone`."""

import json
import os
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
