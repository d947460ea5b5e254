"""The `main()` every node executable shares: init, spin, clean shutdown (ros2/demos style).

One place decides how a node process ends: Ctrl-C and an external shutdown are a normal end,
the node is always destroyed (so loggers flush and envs close) and the context shut down. A
node that refuses to start (`StartRefused`: a robot-specific parameter the profile must set,
inconsistent safety limits, no demonstration recorded on the robot) ends its process with one
line on the log and exit status 2, never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import rclpy
import rclpy.logging
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node

from refine_ros.params import StartRefused

EXIT_REFUSED = 2
__all__ = ["EXIT_REFUSED", "StartRefused", "run_node"]


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             *, until: Callable[[Node], bool] | None = None, linger: float = 0.0,
             executor: Callable[[], Executor] = SingleThreadedExecutor) -> None:
    """Spin the node `factory()` builds until shutdown (or until `until(node)` is true, then
    `linger` seconds more, so that what the node published last still reaches late readers)."""
    rclpy.init(args=args)
    node = spinner = refused = None
    try:
        spinner = executor()  # first: a Ctrl-C must not land in its constructor
        try:
            node = factory()
        except StartRefused as exc:
            refused = exc
            rclpy.logging.get_logger(getattr(factory, "__name__", "node")).fatal(str(exc))
            return
        spinner.add_node(node)
        if until is None:
            spinner.spin()
        else:
            while rclpy.ok() and not until(node):
                spinner.spin_once(timeout_sec=0.2)
            deadline = time.monotonic() + linger
            while rclpy.ok() and time.monotonic() < deadline:
                spinner.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if spinner is not None:
            spinner.shutdown()  # this thread spun it: nothing is in its wait set any more
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
        if refused is not None:
            raise SystemExit(EXIT_REFUSED)
