"""The `main()` every node executable shares: init, spin, clean shutdown (ros2/demos style).

One place decides how a node process ends: Ctrl-C and an external shutdown are a normal end,
the node is always destroyed (so loggers flush and envs close) and the context shut down.
"""

from __future__ import annotations

from collections.abc import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node


def run_node(factory: Callable[[], Node], args: list[str] | None = None,
             *, until: Callable[[Node], bool] | None = None) -> None:
    """Spin the node `factory()` builds until shutdown (or until `until(node)` is true)."""
    rclpy.init(args=args)
    node = None
    try:
        executor = SingleThreadedExecutor()  # first: a Ctrl-C must not land in its constructor
        node = factory()
        executor.add_node(node)
        if until is None:
            executor.spin()
        else:
            while rclpy.ok() and not until(node):
                executor.spin_once(timeout_sec=0.2)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
