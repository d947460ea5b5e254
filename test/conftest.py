"""Shared test setup: headless rendering, an isolated DDS domain per run (and per parallel
worker), temp run dirs, the `ros` mark on every test that starts a ROS graph, and the `alone`
mark for tests that must not share the machine with another worker."""

import ast
import faulthandler
import fcntl
import os
from pathlib import Path

# Headless MuJoCo; egl needs a GPU, osmesa does not.
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")

MAX_DOMAIN_ID = 232
"""Fast DDS derives its ports from the domain id; above 232 they leave the valid range."""


def _dds_domain(environ) -> str:
    """This process's DDS domain. A run picks one (or takes the ROS_DOMAIN_ID it is given);
    under pytest-xdist the n-th worker (gw<n>) takes the run's domain plus n, so two workers'
    graphs never discover each other. Set here, before any rclpy context or node process
    exists: contexts read it when created, child processes inherit it."""
    base = int(environ.get("ROS_DOMAIN_ID") or 1 + os.getpid() % 100)
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    offset = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    return str((base + offset - 1) % MAX_DOMAIN_ID + 1 if base + offset > MAX_DOMAIN_ID else base + offset)


# Keep DDS traffic on loopback and away from other test runs (and other workers of this run).
# The controller of a parallel run keeps the run's domain in ROS_DOMAIN_ID for its workers to
# offset from; it starts no node itself.
# `make test-fast` (REFINE_TESTS_WITHOUT_DDS=1) gives node processes a domain no participant can
# join and refuses rclpy contexts in this process (below), so a test that starts a graph without
# the `ros` mark fails there, and says why.
WITHOUT_DDS = bool(os.environ.get("REFINE_TESTS_WITHOUT_DDS"))
os.environ["ROS_DOMAIN_ID"] = str(MAX_DOMAIN_ID + 8) if WITHOUT_DDS else _dds_domain(os.environ)
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# The Fast DDS profile the launch files give every node (camera images fit in shared memory).
from refine_ros.bringup.dds import dds_environment  # noqa: E402

os.environ.update(dds_environment(os.environ))

import pytest  # noqa: E402

NO_DDS_MESSAGE = ("make test-fast runs without DDS: if this test starts a ROS graph, it needs the `ros` "
                  "mark (test/conftest.py: GRAPH_MODULES)")
if WITHOUT_DDS:  # an rclpy context in this process fails at once, with the reason
    import rclpy.context  # noqa: E402

    def _refuse_dds(self, *args, **kwargs):
        raise RuntimeError(NO_DDS_MESSAGE)

    rclpy.context.Context.init = _refuse_dds


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    return path


@pytest.fixture
def context():
    """An rclpy context of the test's own, shut down afterwards (rclpy imported only here, so
    tests without ROS never load it)."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


ROS_THREAD_ERRORS = "error::pytest.PytestUnhandledThreadExceptionWarning"
"""In the ROS tests an exception in a thread (an executor touching a node being destroyed:
`InvalidHandle: cannot use Destroyable because destruction was requested`) fails the test
instead of scrolling by as a warning; `refine_ros.bringup.spin.NodeSpinner` stops executors first."""


GRAPH_MODULES = {
    "test_bench.py", "test_bridge_watchdog.py", "test_command_guard.py", "test_dds_profile.py",
    "test_process_death.py", "test_robot_computer.py", "test_robot_plugins.py",
    "test_run_failures.py", "test_stock_stack_traps.py", "test_twin_bringup.py",
}
"""Modules outside test_ros_*.py whose tests start a ROS graph (rclpy contexts, node processes
over DDS): each of their tests gets the `ros` mark, so `make test-fast` (`-m "not ros and not
slow"`) leaves them out. `make test-fast` runs without a usable DDS domain, so a test that starts
a graph without the mark fails there instead of slowing the fast loop down unseen."""

LONG_MODULES = (
    "test_loop.py", "test_ros_demo.py", "test_llm_replay.py", "test_ros_nodes_lifecycle.py",
    "test_experiment_from_run.py", "test_experiment_ray.py", "test_robot_plugins.py", "test_ros_record_demo.py",
    "test_sandbox_fit.py", "test_ros_logger.py",
    "test_ros_rl.py", "test_run_procedure.py", "test_ros_multiprocess.py", "test_ros_twin_operator.py",
    "test_experiment.py", "test_offline_analyst.py", "test_ros_interfaces.py", "test_ros_roundtrip.py",
)
"""The modules that take longest (the sums of pytest --durations over a full run, their
`alone` tests left out), longest first. Parallel workers take one module at a time; handing
out the long ones first keeps one worker from starting a long module when the other has
nothing left to do."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith("test_ros_") or item.get_closest_marker("ros") is not None:
            item.add_marker(pytest.mark.filterwarnings(ROS_THREAD_ERRORS))
        if (item.path.name.startswith("test_ros_") or item.path.name in GRAPH_MODULES
                or "context" in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ros)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the same order on every worker: xdist checks
        rank = {name: index for index, name in enumerate(LONG_MODULES)}
        # the `alone` tests first (one unit of work, see pytest_xdist_make_scheduler), then the
        # modules, the longest first
        items.sort(key=lambda item: (item.get_closest_marker("alone") is None,
                                     rank.get(item.path.name, len(rank))))  # stable: file order kept


def alone_tests(folder: Path) -> set[tuple[str, str]]:
    """(module file name, test function) of every test marked `alone`, read from the source:
    the controller of a parallel run collects nothing, so it learns them this way."""
    found = set()
    for path in sorted(folder.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                    ast.unparse(d).endswith("mark.alone") for d in node.decorator_list):
                found.add((path.name, node.name))
    return found


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` with one change: the tests marked `alone` are one unit of work, so one
    worker runs them one after another (they never wait for each other) while the others take
    whole modules. xdist's own `loadgroup` would do this with marks, but under pytest 9 the
    group never reaches the scheduler (the worker's `nodeid` no longer shows the suffix it sets)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    alone = alone_tests(Path(__file__).parent)

    class AloneTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, _, test = nodeid.partition("::")
            return "alone" if (Path(module).name, test.split("[")[0]) in alone else module

        def remove_node(self, node):
            """A crashed worker's unfinished tests go back in the queue, but not the one it
            crashed in: xdist's loadscope sent that one to each new worker again, so a test
            that the backstop (BACKSTOP_MARGIN_S) ends ended every replacement worker in turn."""
            workload = self.assigned_work.pop(node)
            if not self._pending_of(workload):
                return None
            crashed = next(nodeid for unit in workload.values() for nodeid, done in unit.items() if not done)
            for unit in workload.values():
                if crashed in unit:
                    unit[crashed] = True  # reported as crashed by xdist; not run again
            self.workqueue.update({scope: unit for scope, unit in workload.items() if not all(unit.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return AloneTogether(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if WITHOUT_DDS and report.failed:
        report.sections.append(("make test-fast", NO_DDS_MESSAGE))
    if report.failed and item.get_closest_marker("alone") is not None and _PRIORITY.get("refused"):
        report.sections.append(("alone", f"ran at the priority of other work ({_PRIORITY['refused']}): "
                                         "under load its graph shares the CPU with it"))


# -- a test held up where pytest-timeout cannot reach it ------------------------------------------
BACKSTOP_MARGIN_S = float(os.environ.get("REFINE_TEST_BACKSTOP_MARGIN_S", 120.0))
"""How long past its own timeout a test's process may stay stuck before it ends with every thread's
stack (the variable is for the tests of the backstop). pytest-timeout raises in the main thread,
which needs the interpreter's lock; a thread that waits in native code holding it never lets
that happen. ciQ (a fresh clone beside two busy loops) hung that way for 15 min, past the fault
test's 180-s timeout: Fast DDS's UDP receive thread held the discovery (PDP) mutex while it
waited for the event thread to finish its timers (a remote writer removed: the SIGINTed
bridge's), the event thread waited for that mutex (a participant announcement), and the test's
main thread, destroying its publisher, waited for the event thread with the lock held:
eProsima/Fast-DDS#6502, open. faulthandler's timer is a thread of its own in C, which needs no
lock: it writes the stacks and ends the worker, pytest-xdist reports the test as crashed and
starts a new worker, and the run goes on."""


def _backstop_s(item) -> float:
    marker = item.get_closest_marker("timeout")
    given = marker.kwargs.get("timeout", marker.args[0] if marker.args else None) if marker else None
    return float(given or item.config.getini("timeout") or 900) + BACKSTOP_MARGIN_S


def _backstop_file(config):
    """This worker's file for the stacks, in the run's temp directory: the worker's own output
    is captured and lost with it; the controller prints the file at the end of the run."""
    base = config._tmp_path_factory.getbasetemp()
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    path = (base.parent if worker else base) / f"stuck-{worker or 'main'}.txt"  # the controller's basetemp
    return open(path, "w")  # noqa: SIM115 - open for the worker's whole life: faulthandler writes to it


_STUCK: dict[str, object] = {}


@pytest.hookimpl(hookwrapper=True, trylast=True, specname="pytest_runtest_protocol")
def pytest_runtest_protocol_backstop(item, nextitem):
    """Arm the backstop over the whole test (setup, call, teardown), disarm it after. Inside
    the hook below (trylast): a test's wait for the `alone` tests to end is not its own time."""
    if "file" not in _STUCK:
        _STUCK["file"] = _backstop_file(item.config)
    out = _STUCK["file"]
    out.seek(0)
    out.truncate()
    out.write(f"{item.nodeid} stuck past its timeout + {BACKSTOP_MARGIN_S:.0f} s; every thread's stack:\n")
    out.flush()
    faulthandler.dump_traceback_later(_backstop_s(item), exit=True, file=out)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_terminal_summary(terminalreporter):
    """Print what a stuck worker left (see BACKSTOP_MARGIN_S)."""
    for path in sorted(terminalreporter.config._tmp_path_factory.getbasetemp().glob("stuck-*.txt")):
        text = path.read_text(errors="replace")
        if "File " in text:  # stacks were written: the backstop fired
            terminalreporter.write_sep("=", f"stuck test ({path.name})")
            terminalreporter.write_line(text[-20000:])


# -- tests that must not share the machine --------------------------------------------------------
_HELD: dict[str, object] = {}
"""The open lock files of the `alone` test running on this worker, kept until the next test
is not `alone` (the scheduler hands one worker all of them, one after another)."""
ALONE_NICE = -10
"""The `alone` tests' priority over work that is not the suite's (nice -10 against nice 0:
about nine times the CPU share per thread), as a robot computer runs its control graph above
its other jobs; what a test starts inherits it. Needs root or CAP_SYS_NICE (CI runs as root)."""
_PRIORITY: dict[str, object] = {}
"""This worker's nice value before its `alone` tests, and why raising it was refused, if it was."""


def _renice_all_threads(value: int) -> str:
    """Set every thread of this process to `value`; '' or why the kernel refused. Linux keeps a
    nice value per thread (rclpy's and DDS's threads already exist when a module's graph is up);
    a thread or a process started afterwards inherits its creator's."""
    refused = ""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), value)
        except ProcessLookupError:  # the thread ended meanwhile
            pass
        except OSError as exc:
            refused = f"nice {value} refused: {exc}"
    return refused


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under pytest-xdist a test marked `alone` (wall-clock budgets taken from a robot's own
    timeouts: watchdogs, live graphs, real-time twins) runs with the machine to itself. Why no
    ordinary test beside it (there was a "companion seat" for one): one of these graphs fills
    both cores by itself (the car twin's rig: detector 0.54 of a core, twin 0.37, harness 0.27,
    logger 0.27, bridge 0.24, safety node 0.17, sampled from /proc over its episode), so any
    test beside it takes its share from the robot's clock: CI at stop 39 ran that rig's driver
    at 22 Hz of 50 and its logger out of its shutdown time.
    Two lock files in the run's temp directory, shared by the workers: a reader-writer lock on
    the machine, and a turnstile that an `alone` test holds while it waits, so a stream of
    ordinary tests cannot keep it out. The `alone` tests come first and one worker runs them
    all; it keeps both locks from one to the next, so the other worker does not slip a test in
    between each pair. Setup and teardown are inside (a module's graph starts in its first
    test's setup). A worker that dies releases its locks with its file descriptors.
    While it holds them the worker runs at ALONE_NICE, so that work that is not the suite's (a
    loaded machine: two busy loops beside the run) does not take the robot's clock either."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    alone = item.get_closest_marker("alone") is not None
    run_dir = item.config._tmp_path_factory.getbasetemp().parent  # the workers' common basetemp
    if alone and not _HELD:
        _HELD["turnstile"] = turnstile = open(run_dir / "machine.turnstile", "a")  # noqa: SIM115 - held across tests
        _HELD["machine"] = machine = open(run_dir / "machine.lock", "a")  # noqa: SIM115
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_EX)
        _PRIORITY["before"] = os.getpriority(os.PRIO_PROCESS, 0)
        _PRIORITY["refused"] = _renice_all_threads(ALONE_NICE)
    if alone:
        try:
            yield
        finally:
            if nextitem is None or nextitem.get_closest_marker("alone") is None:
                _renice_all_threads(int(_PRIORITY["before"]))  # lowering a priority is always allowed
                for lock in _HELD.values():
                    lock.close()  # closing releases the flock
                _HELD.clear()
        return
    with open(run_dir / "machine.turnstile", "a") as turnstile, open(run_dir / "machine.lock", "a") as machine:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(machine, fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield
