"""Where every node executable of this package begins: setup.py's console scripts point here
(`analysis_node = refine_ros.nodes._start:analysis_node`), not at the node's module.

Why: a launch that ends early (one node refused to start, the operator pressed Ctrl-C) sends
SIGINT to every node, and some are still importing then (torch and MuJoCo take seconds on a busy
machine). Python's answer to SIGINT before the node's own handlers are in place is a
KeyboardInterrupt traceback out of whatever import was running, which reads as a crash in the
launch's output and buries the reason the launch ended. Here that interrupt is a stop: one line,
exit status 0, as a node stopped a moment later ends. Everything that can be interrupted (the
registry lookup included) runs inside the `try`, so this module imports nothing heavy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from importlib import import_module


def start(name: str) -> None:
    """Import node `name`'s module and run its `main()`; SIGINT before the node has taken over
    the signals ends the process quietly."""
    try:
        from refine_ros.nodes.registry import find

        main = import_module(find(name).module).main
        main()
    except KeyboardInterrupt:
        print(f"[{name}] stopped before it had started (interrupted while loading)", file=sys.stderr, flush=True)
        raise SystemExit(0) from None


def __getattr__(name: str) -> Callable[[], None]:
    """`from refine_ros.nodes._start import <node>` (what a console script does) gives that
    node's starter; the registry is read only when it is called, inside `start`'s `try`."""
    if name.startswith("__"):
        raise AttributeError(name)
    return partial(start, name)


if __name__ == "__main__":  # python -m refine_ros.nodes._start <node> [arguments]: a re-executed node
    name = sys.argv.pop(1)  # the node sees the arguments its executable would have
    start(name)
