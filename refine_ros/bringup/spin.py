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

import functools
import threading
import time
from collections.abc import Iterable, Sequence
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


def action_client(node: Any, action_type: Any, name: str, **options: Any) -> Any:
    """rclpy's `ActionClient(node, action_type, name, **options)`, safe to create on a node that
    an executor is spinning in another thread.

    rclpy's constructor hands the client to the node (`add_waitable`) before it creates the
    lock that the executor takes in `get_num_entities`; an executor that rebuilt its wait set in
    that gap died with `AttributeError: 'ActionClient' object has no attribute '_lock'`, and
    nothing spun the node any more (seen once in a full run: a test's goal went unanswered).
    Here the lock exists before the client is handed over."""
    return _locked_first_client()(node, action_type, name, **options)


@functools.cache
def _locked_first_client() -> type:
    from rclpy.action import ActionClient

    class LockedFirstActionClient(ActionClient):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._lock = threading.Lock()  # rclpy replaces it at the end, before any goal exists
            super().__init__(*args, **kwargs)

    return LockedFirstActionClient


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


def unmatched_listeners(node: Any, publisher: Any, listeners: Sequence[str]) -> list[str]:
    """Which of `listeners` (node names) the publisher could not yet deliver to: not listed
    on its topic, or listed by the graph but fewer subscriptions matched than listed.

    A reliable, volatile publisher drops what it sends before a subscription matched it, and
    discovery between two processes that started together can take a second on a loaded
    machine: the live arm graph lost an episode's first five actions and policy steps to the
    logger so (CI, a 'gap' event in the run database). An empty list: every one can hear it."""
    infos = node.get_subscriptions_info_by_topic(publisher.topic_name)
    listed = {info.node_name for info in infos}
    missing = [name for name in listeners if name not in listed]
    if not missing and publisher.get_subscription_count() < len(infos):
        missing = [f"{len(infos) - publisher.get_subscription_count()} listed but not matched yet"]
    return missing


def wait_for_listeners(node: Any, publishers: Sequence[Any], listeners: Sequence[str], timeout: float,
                       stop: threading.Event) -> str | None:
    """Wait until every publisher can deliver to every listener (see `unmatched_listeners`);
    None when they can, else what is still missing when `timeout` passed or `stop` was set."""
    deadline = time.monotonic() + timeout
    while True:
        missing = {pub.topic_name: unmatched_listeners(node, pub, listeners) for pub in publishers}
        missing = {topic: names for topic, names in missing.items() if names}
        if not missing:
            return None
        if time.monotonic() > deadline or stop.wait(0.02):
            return "; ".join(f"{topic}: {', '.join(names)}" for topic, names in missing.items())
