"""The real profiles rehearsed on the physics twins, as on the robot: every node its own
process over real DDS (the robot's twin node where the hardware's drivers would be, the
nodes its rig needs beside the bridge (the car's track detector on the twin's rendered
camera), the profile's bridge and safety node live, the rollout logger; all named by the
robot's descriptor, refine_ros/robots/descriptor.py), and in this process a harness that plays the
learner (it answers every observation at once with the next action of a simple controller, so
the time from observation to command is the graph's own) and the operator (episode start,
confirmation, pulling a sensor's plug through the twin's `~/silence_<sensor>`).

What one run measures (`run_rig`): the observation rate achieved against the bridge's
configured rate; observation -> command latency through the safety node (the harness gets an
observation, answers, and times the bridge's `refine/command_result` for that step: what the
driver was sent); watchdog trips while the episode runs; the logger's gap events and the rows
it stored; and, with a fault, whether the robot stopped and stayed stopped until confirmed.
`bench_twin` adds each robot's own twin figures that need no ROS (its rig's
`twin_bench_figures`: the car's track detector on the rendered camera).

`python -m refine_ros.bench.twin [--robot NAME] [--seconds 20] [--quick]` prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from refine_ros.bench.faults import (
    Harness as FaultHarness,
)
from refine_ros.bench.faults import (
    Processes,
    driver_topic,
    exact_stop,
    moving,
    node_command,
    profile_parameters,
)
from refine_ros.robots.registry import get_robot, robots
from refine_ros.wire.messages import REWARD_NAMES


# ---- the harness ------------------------------------------------------------------------------
class Harness:
    """Learner and operator of one rig. Thread-safe records, read after the run."""

    def __init__(self, context, robot: str, bridge: dict[str, Any]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from std_msgs.msg import Float64MultiArray, String
        from std_srvs.srv import SetBool, Trigger

        from refine_ros.wire import qos
        from refine_ros.wire.messages import (
            pack_json,
            pack_step,
            pack_vector,
            step_type,
            unpack_vector,
        )

        self.robot = robot
        described = get_robot(robot)
        self.rig = described.rig
        self.node = node = Node("twin_harness", context=context)
        self.pack_vector, self.pack_json, self.unpack = pack_vector, pack_json, unpack_vector
        self.pack_step = pack_step
        self.lock = threading.Lock()
        self.episode: int | None = None  # answering observations of this episode
        self.observed: dict[tuple[int, int], float] = {}  # (episode, step) -> arrival
        self.results: dict[tuple[int, int], tuple[float, float]] = {}  # -> (arrival, halted)
        self.commands: list[tuple[float, Any]] = []
        self.status: list[tuple[float, dict[str, str]]] = []
        self.observations = 0
        self.heartbeats: list[float] = []  # arrivals of the driver's heartbeat (joint states, odometry)
        self.sensor_arrivals: list[float] = []  # the slow sensor path (a marker tracker, a camera detector)
        beat, beat_topic = self.rig.heartbeat(bridge)
        node.create_subscription(beat, beat_topic, self._on_heartbeat, qos.SENSOR)
        self.rig.watch_sensor(node, bridge, self._on_sensor)
        self.figures = self.rig.watch_twin(node, bridge)
        kind, topic = driver_topic(robot, bridge)
        node.create_subscription(kind, topic, self._on_command, qos.LOG)
        node.create_subscription(step_type(), "refine/observation", self._on_observation, qos.CONTROL)
        node.create_subscription(Float64MultiArray, "refine/command_result", self._on_result, qos.LOG)
        node.create_subscription(DiagnosticArray, "safety/status", self._on_status, qos.STATE)
        self.pub_action = node.create_publisher(Float64MultiArray, "refine/action", qos.CONTROL)
        self.pub_reward = node.create_publisher(step_type(), "refine/reward", qos.CONTROL)
        self.pub_events = node.create_publisher(String, "refine/episode_events", qos.LATCHED)
        self.confirm_client = node.create_client(Trigger, "safety/confirm_episode")
        self.silence_client = node.create_client(SetBool, f"{described.twin}/silence_{described.twin_heartbeat}")
        self.Trigger, self.SetBool = Trigger, SetBool
        if described.twin_pad:  # the operator holds the autonomy dead-man (F1TENTH's RB), as at the car
            from sensor_msgs.msg import Joy

            pad = node.create_publisher(Joy, "/joy", qos.SENSOR)
            buttons = [described.twin_pad.get(i, 0) for i in range(12)]
            node.create_timer(0.05, lambda: pad.publish(Joy(axes=[0.0] * 6, buttons=list(buttons))))

    # -- the learner -----------------------------------------------------------------------
    def action(self, values: np.ndarray) -> tuple[float, ...]:
        """A simple controller, as a program would be (the robot rig's: the arm circles its
        hand, the car follows the road slowly)."""
        return self.rig.controller(values)

    def _on_observation(self, msg) -> None:
        v = self.unpack(msg)
        episode, step, values = v.episode, v.step, v.values
        now = time.monotonic()
        with self.lock:
            self.observations += 1
            if episode != self.episode:
                return
            self.observed[(episode, step)] = now
        self.pub_action.publish(self.pack_vector(episode, step, self.action(np.asarray(values)), label="policy"))
        self.pub_reward.publish(self.pack_step(episode, step, REWARD_NAMES, [0.0, 0.0, 0.0]))

    def _on_result(self, msg) -> None:
        v = self.unpack(msg)
        episode, step, values = v.episode, v.step, v.values
        with self.lock:
            self.results.setdefault((episode, step), (time.monotonic(), float(values[0])))

    def _on_command(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), msg))

    def _on_status(self, msg) -> None:
        if msg.status:
            with self.lock:
                self.status.append((time.monotonic(), {kv.key: kv.value for kv in msg.status[0].values}))

    def _on_heartbeat(self, _msg) -> None:
        with self.lock:
            self.heartbeats.append(time.monotonic())

    def _on_sensor(self) -> None:
        with self.lock:
            self.sensor_arrivals.append(time.monotonic())

    def logger_listening(self) -> bool:
        """The rollout logger reads the episode events and the observations: steps published
        before it started would be gaps of the rig's start-up, not of the graph."""
        topics = ("/refine/episode_events", "/refine/observation")
        return all(any(i.node_name == "rollout_logger" for i in self.node.get_subscriptions_info_by_topic(t))
                   for t in topics)

    # -- the operator ----------------------------------------------------------------------
    call = FaultHarness.call  # a service call answered while the spinner thread spins

    def start_episode(self, episode: int) -> None:
        self.pub_events.publish(self.pack_json({"event": "start", "episode": episode, "round": 0,
                                                "kind": "diagnostic", "seed": 0}))  # fmt: skip
        with self.lock:
            self.episode = episode

    def end_episode(self, episode: int) -> None:
        with self.lock:
            self.episode = None
            last = max((s for e, s in self.observed if e == episode), default=-1)
        if last >= 0:
            self.pub_reward.publish(self.pack_step(episode, last, REWARD_NAMES, [0.0, 1.0, 0.0]))
        self.pub_events.publish(self.pack_json({"event": "end", "episode": episode, "metric": 0.0,
                                                "source": "twin rehearsal"}))  # fmt: skip

    def confirm(self) -> bool:
        return bool(self.call(self.confirm_client, self.Trigger.Request()).success)

    def silence(self, on: bool) -> None:
        self.call(self.silence_client, self.SetBool.Request(data=on))

    def trips(self, since: float, until: float) -> int:
        """Watchdog trips counted by the safety node between two times."""
        with self.lock:
            counts = [int(v["watchdog_trips"]) for t, v in self.status if since <= t <= until and "watchdog_trips" in v]
        return (max(counts) - min(counts)) if counts else 0

    def trip_causes(self, since: float, until: float) -> list[dict[str, str]]:
        """The safety node's own account at each trip (the first status that counts it): its
        cause, the ages of its inputs and its late ticks, so a trip names where time was lost."""
        keys = ("halt_cause", "observation_age_s", "policy_age_s", "late_watchdog_ticks")
        causes, last = [], None
        with self.lock:
            for t, v in self.status:
                if "watchdog_trips" not in v:
                    continue
                count = int(v["watchdog_trips"])
                if last is not None and count > last and since <= t <= until:
                    causes.append({k: v.get(k, "") for k in keys})
                last = count
        return causes


# ---- one run -----------------------------------------------------------------------------------
@dataclass
class RigResult:
    robot: str
    configured_hz: float = 0.0
    achieved_hz: float = 0.0
    driver_hz: float = 0.0
    """The twin's heartbeat (joint states, odometry) as it arrived here, configured 50 Hz."""
    driver_longest_gap_ms: float = 0.0
    sensor_longest_gap_ms: float = 0.0
    """The longest silence of the slow sensor path as it arrived here (the robot rig's
    `watch_sensor`: the arm's handle marker on TF, the car's camera -> detector tiles)."""
    observation_longest_gap_ms: float = 0.0
    """The longest silence of refine/observation in the episode: the watchdog's input."""
    steps: int = 0
    latency_ms: dict[str, float] = field(default_factory=dict)
    watchdog_trips: int = 0
    trip_causes: list[dict[str, str]] = field(default_factory=list)
    """The safety node's status at each trip (`Harness.trip_causes`)."""
    logger_rows: int = 0
    logger_gaps: int = 0
    dropout: dict[str, Any] = field(default_factory=dict)
    detector: dict[str, float] = field(default_factory=dict)
    """The robot's own sensor figures over DDS (the rig's `watch_twin`: the car's detector
    against the simulator's tiles)."""
    error: str | None = None


def start_rig(procs: Processes, robot: str, workdir: Path, twin: dict[str, Any] | None = None,
              logger: bool = True) -> dict[str, Any]:
    """The twin, the robot's rig nodes (the car's track detector), the bridge, the live safety
    node and (`logger`) the rollout logger; returns the bridge's parameters."""
    described = get_robot(robot)
    bridge = {**profile_parameters(robot, described.bridge), **described.twin_bridge_overrides}
    safety = {**profile_parameters(robot, "safety_node"), "dry_run": False}
    procs.start("twin", node_command(described.twin), twin or {}, node=described.twin)
    for name in described.rig_nodes:
        procs.start(name, node_command(name), profile_parameters(robot, name), node=name)
    procs.start("bridge", node_command(described.bridge), bridge, node=described.bridge)
    procs.start("safety", node_command("safety_node"), safety, node="safety_node")
    if logger:
        procs.start("logger", node_command("rollout_logger"),
                    {**profile_parameters(robot, "rollout_logger"), "run_dir": str(workdir / "run")},
                    node="rollout_logger")  # fmt: skip
    return bridge


def run_rig(robot: str, env: dict[str, str], workdir: Path, *, seconds: float = 10.0, dropout_at: float | None = None,
            dropout_s: float = 1.0, twin: dict[str, Any] | None = None, logger: bool = True,
            startup_s: float = 90.0) -> RigResult:
    """One episode of `seconds` on the twin. With `dropout_at` (seconds into the episode) the
    driver's heartbeat sensor is silenced for `dropout_s`, then restored without confirming:
    `dropout` says whether the robot stopped, how soon, and whether it stayed stopped."""
    import rclpy
    from rclpy.context import Context

    from refine_ros.bench import count_logged
    from refine_ros.bringup.spin import NodeSpinner

    result = RigResult(robot)
    procs = Processes(env, workdir)
    bridge = start_rig(procs, robot, workdir, twin, logger)
    result.configured_hz = float(bridge.get("observation_rate", 50.0))
    context = Context()
    rclpy.init(context=context)
    harness = Harness(context, robot, bridge)
    spinner = NodeSpinner([harness.node], context).start()
    try:
        from refine_ros.bench import wait_for

        if not wait_for(lambda: harness.observations > 20 and harness.confirm_client.service_is_ready(), startup_s):
            raise RuntimeError(f"the rig never came up ({harness.observations} observations): "
                               + " | ".join(f"{n}: {procs.output(n)[-300:]}" for n in procs.running))
        if logger and not wait_for(harness.logger_listening, startup_s):
            raise RuntimeError("the rollout logger never subscribed: " + procs.output("logger")[-300:])
        time.sleep(1.0)  # the processes' start-up work is over before the episode is timed
        harness.start_episode(1)
        time.sleep(0.3)
        if not harness.confirm():
            raise RuntimeError("confirmation refused")
        t0 = time.monotonic()
        if dropout_at is None:
            time.sleep(seconds)
        else:
            time.sleep(dropout_at)
            t_fault = time.monotonic()
            harness.silence(True)
            time.sleep(dropout_s)
            t_back = time.monotonic()
            harness.silence(False)
            time.sleep(max(0.0, seconds - dropout_at - dropout_s))
        t1 = time.monotonic()
        harness.end_episode(1)
        result.watchdog_trips = harness.trips(t0, t1)
        result.trip_causes = harness.trip_causes(t0, t1)
        _rates(result, harness, t0, t1)
        if dropout_at is not None:
            result.dropout = _dropout(robot, harness.commands, t_fault, t_back, t1)
        result.detector = harness.figures().get("detector", {})
        if logger:
            wait_for(lambda: count_logged(workdir / "run", episode=1)[2], 20.0)
    except Exception as exc:  # noqa: BLE001 - a rig that fails is reported, never a crash of the bench
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        spinner.stop()
        harness.node.destroy_node()
        rclpy.try_shutdown(context=context)
        codes = procs.stop_all()
    rows, gaps, _complete = count_logged(workdir / "run", episode=1)
    result.logger_rows, result.logger_gaps = rows, gaps
    crashed = {n: c for n, c in codes.items() if c not in (0, -2)}
    if crashed and result.error is None:
        result.error = f"processes ended badly: {crashed}: " + " | ".join(procs.hang_report(n) for n in crashed)
    return result


def _rates(result: RigResult, harness: Harness, t0: float, t1: float) -> None:
    with harness.lock:
        inside = {k: t for k, t in harness.observed.items() if t0 <= t <= t1}
        latencies = [(harness.results[k][0] - t) * 1e3 for k, t in inside.items() if k in harness.results]
        beats = [t for t in harness.heartbeats if t0 <= t <= t1]
    if len(beats) > 1:
        result.driver_hz = round((len(beats) - 1) / (beats[-1] - beats[0]), 2)
        result.driver_longest_gap_ms = round(float(np.max(np.diff(beats))) * 1e3, 1)
    sensed = [t for t in harness.sensor_arrivals if t0 <= t <= t1]
    if len(sensed) > 1:
        result.sensor_longest_gap_ms = round(float(np.max(np.diff(sensed))) * 1e3, 1)
    arrivals = sorted(inside.values())
    if len(arrivals) > 1:
        result.observation_longest_gap_ms = round(float(np.max(np.diff(arrivals))) * 1e3, 1)
    result.steps = len(inside)
    result.achieved_hz = round(len(inside) / (t1 - t0), 2)
    if latencies:
        result.latency_ms = {"p50": round(float(np.percentile(latencies, 50)), 2),
                             "p99": round(float(np.percentile(latencies, 99)), 2),
                             "max": round(float(np.max(latencies)), 2), "answered": len(latencies)}  # fmt: skip


def _dropout(robot: str, commands: list[tuple[float, Any]], t_fault: float, t_back: float, t_end: float) -> dict:
    """Did the robot stop after the plug was pulled, and stay stopped after it came back
    (no confirmation was given)?"""
    after = [(t, m) for t, m in commands if t >= t_fault]
    stops = [t for t, m in after if exact_stop(robot, m)]
    resumed = [t for t, m in after if t > t_back + 0.3 and moving(robot, m)]
    last = after[-1][1] if after else None
    return {"stop_latency_s": round(stops[0] - t_fault, 3) if stops else None,
            "resumed_without_confirmation": bool(resumed),
            "last_command_is_stop": bool(last is not None and exact_stop(robot, last)),
            "commands_after_fault": len(after)}  # fmt: skip


# ---- the bench section -------------------------------------------------------------------------
def bench_twin(quick: bool = False, progress: bool = True) -> dict[str, Any]:
    """`refine bench` section `twin`: per robot a nominal episode on its twin (rate, latency,
    trips, gaps) and one with the driver's heartbeat pulled for a second; the detector's tile
    error on the twin's rendered camera, without ROS, next to the simulator's. `quick`: three
    seconds of the nominal episodes only, one short detector drive; figures meaningless."""
    from tqdm import tqdm

    from refine_ros.bench import ros_env

    env = {**ros_env(), "PYTHONUNBUFFERED": "1"}
    seconds = 3.0 if quick else 30.0
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="refine_twin_") as tmp:
        runs = [(robot, fault) for robot in robots() for fault in ((False,) if quick else (False, True))]
        for robot, fault in tqdm(runs, desc="twin rehearsal", disable=not progress, leave=False):
            workdir = Path(tmp) / f"{robot}_{'dropout' if fault else 'nominal'}"
            workdir.mkdir()
            r = run_rig(robot, env, workdir, seconds=seconds if not fault else 4.0,
                        dropout_at=1.5 if fault else None)  # fmt: skip
            key = f"twin_{robot}_{'dropout' if fault else 'nominal'}"
            out[key] = {k: v for k, v in r.__dict__.items() if k not in ("robot", "error") and v not in ({}, None)}
            if r.error is not None:  # top level, where `refine bench` looks for a failed section
                out[f"{key}_error"] = r.error
    for robot in robots():
        nominal = out[f"twin_{robot}_nominal"]
        if f"twin_{robot}_nominal_error" in out:
            continue
        out[f"twin_{robot}_rate_fraction"] = round(nominal["achieved_hz"] / nominal["configured_hz"], 3)
        out[f"twin_{robot}_latency_p99_ms"] = nominal.get("latency_ms", {}).get("p99")
        out[f"twin_{robot}_watchdog_trips"] = nominal["watchdog_trips"]
        out[f"twin_{robot}_logger_gaps"] = nominal["logger_gaps"]
    for described in robots().values():
        out.update(described.rig.twin_bench_figures(quick))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", choices=list(robots()), help="one rig run on this robot (default: the section)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--dropout-at", type=float, default=None, help="seconds into the episode")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.robot is None:
        print(json.dumps(bench_twin(quick=args.quick), indent=2))
        return
    from refine_ros.bench import ros_env

    with tempfile.TemporaryDirectory(prefix="refine_twin_") as tmp:
        r = run_rig(args.robot, {**ros_env(), "PYTHONUNBUFFERED": "1"}, Path(tmp), seconds=args.seconds,
                    dropout_at=args.dropout_at)  # fmt: skip
    print(json.dumps(r.__dict__, indent=2))


if __name__ == "__main__":
    main()
