"""`ros_multiprocess_car_steps_per_s` and `ros_oneprocess_car_steps_per_s`: the control rate of
the car_sim node graph run as `ros2 launch` runs it (every node its own process, started from
its executable with the profile's parameters) and as `refine up` runs it (one process, one
executor thread per node), measured side by side.

Why it is measured this way: the rate a user sees is set by the whole lockstep loop (sim step,
observation over DDS, the learner's forward pass, the action back, the logger recording every
stream), not by any one node. So the benchmark runs the profile's real sim node, learner and
rollout logger, and stands in only for the analysis node: it sends one rollout request (the
car starter program at its initial weights, `EPISODES` diagnostic episodes of at most
`MAX_STEPS` steps, fixed seeds, so both layouts do the same work) and times it until the
answer. It then asks the logger to flush and counts the rows and gap events it committed, so a
fast but lossy run cannot pass for a good one.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PROFILE = "car_sim"
EPISODES = 3
MAX_STEPS = 500
TARGET_RATIO = 0.8
"""Multi-process rate / one-process rate the issue asks for."""
WARM_UP_STEPS = 20
"""Steps of an untimed warm-up episode: every writer must have matched its readers first."""
WARM_UPS = 5
"""Warm-up episodes at most, until one is logged without a gap."""


@dataclass
class GraphTrial:
    layout: str
    steps: int
    seconds: float
    steps_per_s: float
    rows: int
    gap_events: int


def _profile(run_dir: Path):
    """car_sim as `refine up` plans it, without the analysis node (the benchmark drives)."""
    from refine_ros.bringup import Profile
    from refine_ros.bringup.up import UpOptions, plan_profile

    full = plan_profile(PROFILE, UpOptions(run_dir=run_dir))
    nodes = tuple(n for n in full.nodes if n.name != "analysis_node")
    return Profile(full.name, full.description, full.kind, full.task, full.arguments, nodes, full.urdf,
                   full.rviz_config)


def _task() -> str:
    """The profile's task."""
    from refine_ros.bringup import resolve_profile

    return resolve_profile(PROFILE, check_modules=False).task


class _Driver:
    """Stands in for the analysis node: one rollout goal, its result, a logger flush."""

    def __init__(self, context) -> None:
        from rclpy.node import Node
        from std_srvs.srv import Trigger

        from refine_ros.bringup.spin import action_client
        from refine_ros.wire import protocol
        from refine_ros_interfaces.action import RunRollout

        self.node = Node("bench_graph_driver", context=context)
        self.client = action_client(self.node, RunRollout, protocol.ROLLOUT_ACTION)
        self.answer: dict[str, Any] | None = None
        self.arrived = threading.Event()
        self.flush = self.node.create_client(Trigger, "logger/flush")

    def send(self, goal) -> None:
        from refine_ros.wire import protocol

        def on_result(future) -> None:
            self.answer = protocol.read_rollout_result(future.result().result)
            self.arrived.set()

        sent = self.client.send_goal_async(goal)
        sent.add_done_callback(lambda f: f.result().get_result_async().add_done_callback(on_result))

    def ready(self) -> bool:
        node = self.node
        return (self.client.server_is_ready() and node.count_publishers("refine/observation") >= 1
                and node.count_subscribers("refine/action") >= 2 and node.count_subscribers("refine/observation") >= 2
                and self.flush.service_is_ready())


def _goal(run_id: int, episodes: int, max_steps: int, round_: int = 0) -> Any:
    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.plan import PlannedEpisode
    from refine_core.tasks.registry import get_task
    from refine_ros.wire import protocol

    task = get_task(_task())
    plan = [PlannedEpisode("diagnostic", i, seed) for i, seed in enumerate(task.spec.selection_seeds[:episodes])]
    bundle = PolicyBundle(starter_program(task.spec.name), {})
    return protocol.rollout_goal(run_id, round_, bundle, plan, mode="mean", max_steps=max_steps)


def _drive(driver: _Driver, run_dir: Path, run_id: int, episodes: int, max_steps: int,
           timeout_s: float = 600.0, warmup_run: int | None = None) -> tuple[int, float]:
    """Time one rollout goal of `episodes` x `max_steps` and wait until the logger stored it.
    Short untimed episodes of `warmup_run` go first, until one is logged without a gap: the
    graph's processes discover each other over a second or two, and the learner's action and
    policy-step writers may not have matched the logger yet when the driver sees every node;
    steps lost to that say nothing about the graph's speed."""
    deadline = time.monotonic() + 60.0
    while not driver.ready():
        if time.monotonic() > deadline:
            raise TimeoutError("the graph's nodes did not all appear within 60 s")
        time.sleep(0.1)
    time.sleep(0.5)  # latched columns and events settle before the first step
    gaps = 0
    for attempt in range(WARM_UPS if warmup_run is not None else 0):
        driver.send(_goal(warmup_run, 1, WARM_UP_STEPS, round_=1 + attempt))  # counters of its own
        if not driver.arrived.wait(timeout_s):
            raise TimeoutError("no result for the warm-up episode")
        driver.arrived.clear()
        _flush(driver, run_dir, warmup_run, WARM_UP_STEPS * (attempt + 1))
        gaps, before = _count(run_dir, warmup_run)[1], gaps
        if gaps == before:
            break  # a warm-up episode without a gap: every writer has matched its readers
    start = time.perf_counter()
    driver.send(_goal(run_id, episodes, max_steps))
    if not driver.arrived.wait(timeout_s):
        raise TimeoutError("no rollout result")
    seconds = time.perf_counter() - start
    steps = sum(int(e["steps"]) for e in driver.answer["episodes"])
    errors = [e["error"] for e in driver.answer["episodes"] if e.get("error")]
    if errors:
        raise RuntimeError(f"episodes failed: {errors}")
    _flush(driver, run_dir, run_id, steps)
    return steps, seconds


def _flush(driver: _Driver, run_dir: Path, run_id: int, steps: int) -> None:
    """Ask the logger to commit until `run_id` holds `steps` rows (at most a minute): the
    result can overtake the last steps."""
    from std_srvs.srv import Trigger

    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        done = threading.Event()
        future = driver.flush.call_async(Trigger.Request())
        future.add_done_callback(lambda _f, event=done: event.set())
        done.wait(max(0.1, deadline - time.monotonic()))
        if _count(run_dir, run_id)[0] >= steps:
            return
        time.sleep(0.2)


def _count(run_dir: Path, run_id: int) -> tuple[int, int]:
    from refine_core.store.db import RunDatabase

    with RunDatabase(run_dir, create=False) as db:
        return len(db.load_steps(run_id)), len(db.events(run_id, kind="gap"))


def _new_run(run_dir: Path) -> int:
    from refine_core.store.db import RunDatabase

    with RunDatabase(run_dir) as db:
        return int(db.create_run(_task(), config={"source": "bench_graph"}))


def trial_multiprocess(workdir: Path, episodes: int = EPISODES, max_steps: int = MAX_STEPS) -> GraphTrial:
    """The nodes as separate processes from their executables, as `ros2 launch` starts them."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from refine_ros.bringup import launch_plan
    from refine_ros.bringup.processes import ProcessGraph
    from refine_ros.bringup.spin import destroy_actions

    run_dir = workdir / "multi"
    run_id, warmup = _new_run(run_dir), _new_run(run_dir)  # the latest run takes anything unannounced
    graph = ProcessGraph(launch_plan(_profile(run_dir)), echo=None)
    context = rclpy.Context()
    rclpy.init(context=context)
    executor = SingleThreadedExecutor(context=context)
    driver = _Driver(context)
    executor.add_node(driver.node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    try:
        graph.start()
        spin.start()
        steps, seconds = _drive(driver, run_dir, run_id, episodes, max_steps, warmup_run=warmup)
    finally:
        graph.stop()
        executor.shutdown(timeout_sec=5.0)
        destroy_actions(driver.node)
        driver.node.destroy_node()
        rclpy.try_shutdown(context=context)
    rows, gaps = _count(run_dir, run_id)
    return GraphTrial("multiprocess", steps, round(seconds, 3), round(steps / seconds, 1), rows, gaps)


def trial_oneprocess(workdir: Path, episodes: int = EPISODES, max_steps: int = MAX_STEPS) -> GraphTrial:
    """The same nodes in this process, as `refine up` runs them."""
    import rclpy

    from refine_ros.bringup.spin import NodeSpinner, destroy_actions
    from refine_ros.bringup.up import control_switch_interval, start_nodes

    run_dir = workdir / "one"
    run_id, warmup = _new_run(run_dir), _new_run(run_dir)  # the latest run takes anything unannounced
    context = rclpy.Context()
    rclpy.init(context=context)
    nodes: list[Any] = []
    spinner = None
    try:
        with control_switch_interval():
            nodes = start_nodes(_profile(run_dir), context)
            driver = _Driver(context)
            nodes.append(driver.node)
            spinner = NodeSpinner(nodes, context)
            spinner.start()
            steps, seconds = _drive(driver, run_dir, run_id, episodes, max_steps, warmup_run=warmup)
    finally:
        if spinner is not None:
            spinner.stop()
        for node in reversed(nodes):
            destroy_actions(node)
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    rows, gaps = _count(run_dir, run_id)
    return GraphTrial("oneprocess", steps, round(seconds, 3), round(steps / seconds, 1), rows, gaps)


def bench_graph(repeats: int = 2, progress: bool = True, episodes: int = EPISODES,
                max_steps: int = MAX_STEPS) -> dict[str, Any]:
    """Both layouts, interleaved (one, multi, one, multi, ...) so that load from other work on
    the machine hits them alike; each figure is the median of its trials."""
    from tqdm import tqdm

    trials: list[GraphTrial] = []
    with tempfile.TemporaryDirectory(prefix="refine_bench_graph_") as tmp:
        order = [("oneprocess", trial_oneprocess), ("multiprocess", trial_multiprocess)] * repeats
        for i, (_name, trial) in enumerate(tqdm(order, desc="graph layouts", disable=not progress)):
            trials.append(trial(Path(tmp) / str(i), episodes, max_steps))
    one = statistics.median(t.steps_per_s for t in trials if t.layout == "oneprocess")
    multi = statistics.median(t.steps_per_s for t in trials if t.layout == "multiprocess")
    return {
        "ros_multiprocess_car_steps_per_s": multi,
        "ros_oneprocess_car_steps_per_s": one,
        "ros_multiprocess_vs_oneprocess": round(multi / one, 3) if one else None,
        "ros_graph_target_ratio": TARGET_RATIO,
        "ros_graph_trials": [asdict(t) for t in trials],
    }


if __name__ == "__main__":
    print(json.dumps(bench_graph(), indent=2))
