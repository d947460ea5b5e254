"""Run a robot's hardware stand-in as a process of its own, as a real robot's driver stack
runs: `python -m refine_ros.robots.fake_driver NAME [--ros-args ...]`, NAME a registered robot
(its descriptor's `fake_driver`). The fault matrix, the live-graph benchmark and the ROS tests
start them; no profile does."""

from __future__ import annotations

import importlib
import sys


def main(argv: list[str] | None = None) -> None:
    from refine_ros.nodes._main import run_node
    from refine_ros.robots.registry import robots

    argv = list(sys.argv[1:] if argv is None else argv)
    known = robots()
    if not argv or argv[0] not in known:
        raise SystemExit(f"usage: python -m refine_ros.robots.fake_driver {{{'|'.join(known)}}} [--ros-args ...]")
    module, _, name = known[argv[0]].fake_driver.partition(":")
    run_node(getattr(importlib.import_module(module), name), ["fake_driver", *argv[1:]])


if __name__ == "__main__":
    main()
