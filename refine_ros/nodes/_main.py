"""The `main()` every node executable shares: init, spin, clean shutdown (ros2/demos style).

One place decides how a node process ends. Ctrl-C (SIGINT, which a terminal and `ros2 launch`
both send) and SIGTERM are a normal end: the node is destroyed first, while its context is still
valid, so worker threads finish what they were publishing and the logger flushes; only then is
the context shut down. rclpy's own signal handlers would shut the context down first, and every
publish from a worker thread after that is an `RCLError` traceback; so they are not installed,
and the executor spins in short slices so that a signal is seen within `SPIN_SLICE_S`.
SIGUSR1 prints every thread's stack to stderr (the processes' supervisors send it before they
kill a node that did not stop). The
handler only sets a flag the spin loop reads: an exception raised from it could land inside a
callback or inside rclpy's C++ bindings (which turn it into an unrelated RuntimeError), and the
node would end with a traceback instead of its stop. A node
that refuses to start (`StartRefused`: a robot-specific parameter the profile must set,
inconsistent safety limits, no demonstration recorded on the robot) ends its process with one
line on the log and exit status 2, never a traceback.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

import rclpy
import rclpy.logging
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from refine_ros.bringup.dds import udp_only_environment
from refine_ros.params import StartRefused

EXIT_REFUSED = 2
SPIN_SLICE_S = 0.1
"""Longest time the main thread waits in the executor before it looks at signals again."""
TEARDOWN_S = 10.0
"""Longest time a node process may take to end once its spin has ended: its own shutdown (a
bridge's stop and the driver's acknowledgement, 0.5 s; a worker thread's join, 2 s) and then
rclpy's and the middleware's destruction of the node. Past it, every thread's stack goes to the
log ("Timeout (0:00:10)!" and the stacks) and the process ends with status 1: a teardown that
hangs in native code must not leave a process that ignores the next Ctrl-C. The rollout logger,
which may still be flushing a backlog, gives itself longer."""
__all__ = ["EXIT_REFUSED", "SPIN_SLICE_S", "TEARDOWN_S", "StartRefused", "run_node", "without_shared_memory"]


def without_shared_memory(node: str, args: list[str] | None) -> None:
    """Start this process again, same PID and arguments, with a Fast DDS participant that sends
    over UDP only (config/fastdds_udp.xml), unless it already has one or the user configured
    Fast DDS themselves; returns only when there is nothing to change.

    For the nodes that must keep working while another process is frozen: a send over shared
    memory to a frozen process waited up to its resumption here, holding the GIL, so the whole
    process stopped (config/fastdds_udp.xml has the measurements). Why a new process: Fast DDS
    reads its profile file when rclpy's libraries load, and a change made after the import was
    ignored when the variable was already set (the launch files set it)."""
    extra = udp_only_environment(os.environ)  # empty once it is in force: no second start
    if not extra:
        return
    argv = sys.argv[1:] if args is None else list(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "refine_ros.nodes._start", node, *argv],
              {**os.environ, **extra})


_STOP = threading.Event()


def _stop_on_signal(signum: int, _frame) -> None:
    """The first SIGINT / SIGTERM ends the spin; a second one (the terminal's Ctrl-C and
    launch's SIGINT both arrive) must not cut the cleanup short, and a SIGTERM after that (launch
    escalating after its timeout) ends the process the default way."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _STOP.set()


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             *, until: Callable[[Node], bool] | None = None, linger: float = 0.0,
             executor: Callable[[], Executor] = SingleThreadedExecutor,
             exit_code: Callable[[Node], int] | None = None, teardown_s: float = TEARDOWN_S) -> None:
    """Spin the node `factory()` builds until a signal (or until `until(node)` is true, then
    `linger` seconds more, so that what the node published last still reaches late readers).
    `exit_code(node)`, read after the node is destroyed, is the process's exit status (a node
    whose work failed says so to `ros2 launch` and to scripts). The teardown after the spin has
    `teardown_s` seconds (TEARDOWN_S)."""
    handles_signals = threading.current_thread() is threading.main_thread()  # (tests spin nodes in threads)
    if handles_signals:
        # `kill -USR1 <pid>` prints every thread's stack: where a node that will not stop is stuck
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        _STOP.clear()
        previous = signal.signal(signal.SIGINT, _stop_on_signal), signal.signal(signal.SIGTERM, _stop_on_signal)
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = spinner = refused = None
    status = 0
    try:
        spinner = executor()  # first: a Ctrl-C must not land in its constructor
        try:
            node = factory()
        except StartRefused as exc:
            refused = exc
            rclpy.logging.get_logger(getattr(factory, "__name__", "node")).fatal(str(exc))
            return
        spinner.add_node(node)
        for companion in getattr(node, "companion_nodes", ()):  # a twin's stand-in for another node (Servo)
            spinner.add_node(companion)
        # The imports (torch, MuJoCo, ...) leave a large heap; a full garbage collection over it
        # held a node up for 100-250 ms. Frozen, it is never scanned again, so the control path's
        # collections only look at what the node makes from now on.
        gc.collect()
        gc.freeze()
        while rclpy.ok() and not _STOP.is_set() and not (until is not None and until(node)):
            spinner.spin_once(timeout_sec=SPIN_SLICE_S)
        deadline = time.monotonic() + (linger if until is not None and not _STOP.is_set() else 0.0)
        while rclpy.ok() and not _STOP.is_set() and time.monotonic() < deadline:
            spinner.spin_once(timeout_sec=SPIN_SLICE_S)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if handles_signals:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # nothing may interrupt the cleanup below
            # ...and nothing may hold it forever: faulthandler's own thread needs no GIL, so it
            # fires even when the main thread waits inside native code holding it
            faulthandler.dump_traceback_later(teardown_s, exit=True)
        try:
            if spinner is not None:
                spinner.shutdown()  # this thread spun it: nothing is in its wait set any more
            if node is not None:
                node.destroy_node()
                if exit_code is not None:
                    status = int(exit_code(node))
            rclpy.try_shutdown()
        finally:
            if handles_signals:
                faulthandler.cancel_dump_traceback_later()
        if handles_signals:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
        if refused is not None:
            raise SystemExit(EXIT_REFUSED)
        if status:
            raise SystemExit(status)
