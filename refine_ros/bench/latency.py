"""`ros_action_latency_ms_p99`: observation published -> action received, over DDS on loopback,
with the real learner node and a real program in the loop.

Why it is measured this way: a probe node stands in for the simulator, so the clock is the
control rate (as on a robot) and not the physics: it answers the learner's parameter and
`sim/reset` calls like the sim node, publishes observations of a real door-opening episode
(recorded from MuJoCo by the scripted expert) on a timer, and time-stamps each action as it
arrives. The learner runs exactly as under `refine up` (its own executor thread) with the
bundled starter program at its initial weights, sent in a rollout request the way the
analysis node sends a fitted round's policy (program + weights, no fit).
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
from typing import Any

import numpy as np

RATE_HZ = 50.0
SECONDS = 4.0
TARGET_P99_MS = 10.0


def _door_observations(steps: int) -> list[list[float]]:
    """A real episode's observation values (expert driving MuJoCo), looped to `steps`."""
    from refine_core.tasks.registry import get_task
    from refine_ros.wire.adapters import observation_values

    task = get_task("door_open")
    env = task.make_env()
    try:
        obs, _ = env.reset(seed=task.spec.diagnostic_seeds[0])
        expert = task.expert(env)
        values = []
        for _ in range(min(steps, 200)):
            values.append(observation_values(task.spec, task.split_observation(obs)))
            obs, *_ = env.step(np.asarray(expert(obs), dtype=np.float32))
    finally:
        env.close()
    return [values[i % len(values)] for i in range(steps)]


def _probe_node(context, steps: int, rate_hz: float, observations: list[list[float]]):
    from rclpy.node import Node
    from std_msgs.msg import Float64MultiArray
    from std_srvs.srv import Trigger

    from refine_core.tasks.registry import get_task
    from refine_ros.wire import qos
    from refine_ros.wire.messages import REWARD_NAMES, pack_step, step_type, unpack_vector

    names = get_task("door_open").spec.observation_columns  # the values are the door's (_door_observations)

    class Probe(Node):
        def __init__(self) -> None:
            super().__init__("sim_node", context=context)
            for name, default in (("seed", 0), ("episode", -1), ("max_steps", 0), ("publish_expert", False)):
                self.declare_parameter(name, default)
            self.obs_pub = self.create_publisher(step_type(), "refine/observation", qos.CONTROL)
            self.reward_pub = self.create_publisher(step_type(), "refine/reward", qos.CONTROL)
            self.create_subscription(Float64MultiArray, "refine/action", self._on_action, qos.CONTROL)
            self.create_service(Trigger, "sim/reset", self._on_reset)
            self.sent: dict[int, float] = {}
            self.latency_ms: dict[int, float] = {}
            self.step = 0
            self.episode = 0
            self.done = threading.Event()
            self.timer = None

        def _on_reset(self, request, response):
            self.episode = int(self.get_parameter("episode").value)
            self.step = 0
            self._publish()
            self.timer = self.create_timer(1.0 / rate_hz, self._tick)
            response.success = True
            return response

        def _publish(self) -> None:
            msg = pack_step(self.episode, self.step, names, observations[self.step])
            self.sent[self.step] = time.perf_counter()
            self.obs_pub.publish(msg)

        def _tick(self) -> None:
            if self.step + 1 >= steps:
                self.timer.cancel()
                return
            self.step += 1
            self._publish()

        def _on_action(self, msg) -> None:
            now = time.perf_counter()
            vec = unpack_vector(msg)
            sent = self.sent.get(vec.step)
            if vec.episode != self.episode or sent is None or vec.step in self.latency_ms:
                return
            self.latency_ms[vec.step] = (now - sent) * 1000.0
            last = vec.step >= steps - 1
            self.reward_pub.publish(pack_step(self.episode, vec.step, REWARD_NAMES, [0.0, float(last), 0.0]))
            if last:
                self.done.set()

    return Probe()


def bench_latency(rate_hz: float = RATE_HZ, seconds: float = SECONDS, executor: str = "single") -> dict[str, Any]:
    """Run the probe against the learner for `seconds` at `rate_hz`; returns p50/p99/max in ms,
    the number of observations and how many got no action."""
    from refine_ros.bringup.up import control_switch_interval

    steps = max(10, int(rate_hz * seconds))
    observations = _door_observations(steps)
    with control_switch_interval():  # as under `refine up`
        samples, finished = _measure(steps, rate_hz, seconds, executor, observations)

    def p(q: float) -> float:
        return float(np.percentile(samples, q)) if len(samples) else math.nan

    return {
        "ros_action_latency_ms_p50": p(50), "ros_action_latency_ms_p99": p(99),
        "ros_action_latency_ms_max": float(samples.max()) if len(samples) else math.nan,
        "rate_hz": rate_hz, "observations": steps, "actions": int(len(samples)),
        "missing_actions": steps - int(len(samples)), "finished": bool(finished),
        "target_p99_ms": TARGET_P99_MS, "executor": executor,
    }


def _measure(steps: int, rate_hz: float, seconds: float, executor: str, observations: list[list[float]]):
    import rclpy
    from rclpy.parameter import Parameter

    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.plan import PlannedEpisode
    from refine_ros.bringup.spin import action_client, destroy_actions
    from refine_ros.bringup.up import make_executor
    from refine_ros.nodes.learner_node import LearnerNode
    from refine_ros.wire import protocol
    from refine_ros_interfaces.action import RunRollout

    context = rclpy.Context()
    rclpy.init(context=context)
    nodes, executors, threads = [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="refine-bench-") as run_dir:
            learner = LearnerNode(context=context, parameter_overrides=[
                Parameter("task", value="door_open"), Parameter("run_dir", value=run_dir),
                Parameter("episode_timeout", value=float(seconds * 4 + 30)),
                # no logger here: the learner would wait its listener_timeout for one first
                Parameter("listeners", value=[""]),  # (rclpy reads an empty list as bytes)
            ])
            probe = _probe_node(context, steps, rate_hz, observations)
            nodes = [learner, probe]
            for node in nodes:
                spinner = make_executor(executor, context)
                spinner.add_node(node)
                executors.append(spinner)
                threads.append(threading.Thread(target=spinner.spin, daemon=True))
                threads[-1].start()
            source = starter_program("door_open")
            client = action_client(probe, RunRollout, protocol.ROLLOUT_ACTION)
            if not client.wait_for_server(timeout_sec=30.0):
                raise TimeoutError(f"no {protocol.ROLLOUT_ACTION} server within 30 s")
            plan = [PlannedEpisode("diagnostic", 0, 200)]
            client.send_goal_async(protocol.rollout_goal(1, 0, PolicyBundle(source, {}), plan, mode="mean",
                                                         max_steps=steps))
            finished = probe.done.wait(seconds * 4 + 30)
            samples = np.array(sorted(probe.latency_ms.values()))
    finally:
        for spinner in executors:
            spinner.shutdown(timeout_sec=5.0)
        for node in reversed(nodes):
            destroy_actions(node)
            node.destroy_node()
        rclpy.try_shutdown(context=context)
    return samples, finished


if __name__ == "__main__":
    import json

    print(json.dumps(bench_latency(), indent=2))
