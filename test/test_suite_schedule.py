"""How `make test` shares the tests out over its workers (test/conftest.py): the controller
finds the `alone` tests in the source, since it collects nothing itself; what it finds must be
what pytest itself selects with `-m alone`."""

import subprocess
import sys
from pathlib import Path

from conftest import alone_tests

HERE = Path(__file__).parent


def test_the_alone_tests_read_from_the_source_are_the_ones_pytest_marks():
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "alone", "-p",
                           "no:cacheprovider", str(HERE)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    marked = {(Path(line.split("::")[0]).name, line.split("::")[1].split("[")[0])
              for line in done.stdout.splitlines() if "::" in line}
    assert len(marked) >= 14, marked  # the watchdogs, twins, live graphs and fault cells at least
    assert alone_tests(HERE) == marked
