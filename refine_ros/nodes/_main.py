"""The `main()` every node executable shares: init, spin, clean shutdown (ros2/demos style).

One place decides how a node process ends: Ctrl-C and an external shutdown are a normal end,
the node is always destroyed (so loggers flush and envs close) and the context shut down.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             *, until: Callable[[Node], bool] | None = None, linger: float = 0.0,
             executor: Callable[[], Executor] = SingleThreadedExecutor) -> None:
    """Spin the node `factory()` builds until shutdown (or until `until(node)` is true, then
    `linger` seconds more, so that what the node published last still reaches late readers)."""
    rclpy.init(args=args)
    node = None
    try:
        spinner = executor()  # first: a Ctrl-C must not land in its constructor
        node = factory()
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
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
