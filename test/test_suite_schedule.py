"""How `make test` shares the tests out over its workers (test/conftest.py): the controller
finds the `alone` tests in the source, since it collects nothing itself."""

import re
from pathlib import Path

from conftest import alone_tests

HERE = Path(__file__).parent


def test_every_test_marked_alone_in_the_source_is_found():
    marked = {(path.name, name) for path in HERE.glob("test_*.py")
              for name in re.findall(r"@pytest\.mark\.alone\b[^\n]*\n(?:@[^\n]*\n)*def (\w+)", path.read_text())}
    assert len(marked) >= 14, marked  # the watchdogs, twins, live graphs and fault cells at least
    assert alone_tests(HERE) == marked
    assert ("test_ros_faults.py", "test_a_fault_leaves_the_robot_stopped_until_the_operator_confirms") in marked
