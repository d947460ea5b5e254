"""Executors on their own threads that stop without touching a destroyed handle.

Why this exists: rclpy's `Executor.shutdown()` called from another thread does not wait for a
spinning thread to leave its wait set (in this rclpy it even destroys the executor's guard
condition while the spinner may still be waiting on it), so a node destroyed right after it
can be used once more by that thread: `InvalidHandle: cannot use Destroyable because
destruction was requested`, raised in an executor thread during shutdown. The order here is
the one that cannot race: ask each spin loop to stop and wake it, join its thread (nothing
spins any more), only then shut the executor down; the caller destroys the nodes after
`stop()` returns, and shuts the context down last.

`refine up` runs every node of a profile this way, and the ROS tests use the same class, so
what the tests exercise is what users run.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

EXECUTORS = ("single", "multi")


def make_executor(kind: str, context: Any):
    """One node's executor: rclpy's SingleThreadedExecutor ("single", the default: lowest
    latency measured) or a two-thread MultiThreadedExecutor ("multi"). rclpy.experimental's
    EventsExecutor is left out: with this rclpy it never delivered the learner's service
    responses (the round hung)."""
    from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor

    if kind == "single":
        return SingleThreadedExecutor(context=context)
    if kind == "multi":
        return MultiThreadedExecutor(num_threads=2, context=context)
    raise ValueError(f"executor must be one of {EXECUTORS}, got {kind!r}")


class NodeSpinner:
    """One executor per node, each spun on its own daemon thread until `stop()`."""

    def __init__(self, nodes: Iterable[Any], context: Any, kind: str = "single") -> None:
        self._stop = threading.Event()
        self.executors: list[Any] = []
        self.threads: list[threading.Thread] = []
        for node in nodes:
            executor = make_executor(kind, context)
            executor.add_node(node)
            self.executors.append(executor)
            self.threads.append(threading.Thread(target=self._spin, args=(executor,),
                                                 name=f"spin-{node.get_name()}", daemon=True))

    def _spin(self, executor: Any) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            while not self._stop.is_set() and executor.context.ok():
                executor.spin_once(timeout_sec=0.5)
        except (ExternalShutdownException, KeyboardInterrupt):
            pass  # the context went down (Ctrl-C): the owner's stop() still joins this thread

    def start(self) -> NodeSpinner:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Stop every spin loop, join the threads, then shut the executors down. True when all
        threads ended within `timeout_s` each (a callback that never returns keeps its thread)."""
        self._stop.set()
        for executor in self.executors:
            executor.wake()
        joined = True
        for thread in self.threads:
            if thread.ident is not None:  # started
                thread.join(timeout_s)
                joined = joined and not thread.is_alive()
        for executor in self.executors:
            executor.shutdown(timeout_sec=timeout_s)
        return joined

    def __enter__(self) -> NodeSpinner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def call_service(client: Any, request: Any, timeout: float = 10.0) -> Any:
    """Call a service from a thread that does not spin the client's node (a `NodeSpinner` does):
    waiting on the future here would otherwise deadlock. RuntimeError names the service that
    never came up or never answered."""
    if not client.wait_for_service(timeout_sec=timeout):
        raise RuntimeError(f"{client.srv_name} never came up")
    done = threading.Event()
    future = client.call_async(request)
    future.add_done_callback(lambda _f: done.set())
    if not done.wait(timeout):
        raise RuntimeError(f"no answer from {client.srv_name}")
    return future.result()


def destroy_actions(node: Any) -> None:
    """Destroy the node's action servers and clients; call it in `destroy_node`, before rclpy's.

    rclpy's `Node.destroy_node()` does not: they are waitables, which it leaves alone, and each
    holds the node's handle, so the node and its action services stay in the DDS graph,
    answering nothing, until the garbage collector happens to free them. A client that starts
    later in the same domain then finds that dead server at once and sends its goal there while
    the live one is still being discovered: after an in-process `refine up`, the RL goal tests
    lost their goals exactly so (nothing listed, nothing answered)."""
    from rclpy.action import ActionClient, ActionServer

    for waitable in list(node.waitables):
        if isinstance(waitable, (ActionServer, ActionClient)):
            waitable.destroy()
