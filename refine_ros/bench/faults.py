"""Faults on a live robot graph, and what reached the robot: the fault matrix of `refine bench`.

For each registered robot (refine_ros/robots/registry.py) and each fault, a rig of separate
processes over real DDS, as on the robot: the robot's drivers (its descriptor's fake driver,
the interfaces a real stack exposes), the bridge and the safety node
with the robot's profile (live, not a dry run), and in this process a harness that plays the
policy (commands at 50 Hz on `refine/action`), the operator (confirm, e-stop, re-arm, the
autonomy dead-man) and the observer (every message on the driver's command topic, in its
genuine type).

A run: confirm, drive until motion reaches the driver, inject the fault at t_f while the policy
keeps commanding, then clear it (sensor back, e-stop released and re-armed, ...) *without*
confirming again. What is counted as unsafe:
- a moving command on the driver topic later than t_f + the fault's grace (the time the rules
  allow: the watchdog's budget for stale inputs, a tenth of a second for an e-stop), before the
  operator confirmed again;
- a command beyond the robot's limits (its rig's `beyond_limits`: a speed above the bridge's
  `max_speed`, a car reversing), at any time;
- a fault that leaves the driver's last command a moving one (a driver that holds its last
  command would go on moving), or no stop at all;
- a step the driver refused (MoveIt Servo halted) that the bridge reported as executed.

What is robot-specific comes from the robot's descriptor (refine_ros/robots/descriptor.py):
its profile and bridge, the fake driver and its `fake/*` fault levers, the command the policy
sends while all is well, how its driver commands read.

`python -m refine_ros.bench.faults [--robot NAME] [--fault estop]` prints the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from refine_ros.bringup.processes import die_with_parent
from refine_ros.robots.registry import get_robot, robot_names

ROBOTS = robot_names()
FAULTS = ("stale_sensor", "driver_loss", "estop", "estop_heartbeat", "deadman_release", "sigint", "sigterm",
          "servo_rejects", "nan_burst", "param_change")
LEVER_FAULTS = ("stale_sensor", "servo_rejects")
"""Faults a robot's fake driver causes through one of its levers (`fault_levers`): a robot
without that lever does not run the fault (only an arm behind MoveIt Servo refuses motion)."""
POLICY_HZ = 50.0
DEADMAN_BUTTON = 5
ESTOP_HEARTBEAT_S = 0.2
SERVICE_FAULTS = ("stale_sensor", "driver_loss", "servo_rejects")
"""Faults the fake driver applies when its fake/* service answers: they start then, not when
the request left (a loaded machine may take a while to answer)."""


def _wait_for(predicate: Callable[[], bool], timeout: float) -> bool:
    from refine_ros.bench import wait_for

    return wait_for(predicate, timeout, period=0.02)


def applies(robot: str, fault: str) -> bool:
    return fault not in LEVER_FAULTS or fault in get_robot(robot).fault_levers


def profile_parameters(robot: str, node: str) -> dict[str, Any]:
    from refine_ros.bringup import resolve_profile

    params = dict(resolve_profile(get_robot(robot).profile, check_modules=False).node(node).parameters)
    params.pop("dry_run", None)
    return params


def node_command(name: str) -> list[str]:
    """How a rig starts a registry node: `python -m <its module>`."""
    from refine_ros.nodes.registry import NODES

    return ["-m", NODES[name].module]


def native_stacks(pid: int) -> str:
    """Every thread's C stack of a hung process, when gdb is installed: a node seen once hanging
    in rcl's node destruction for 20 s, where Python's own dump ends."""
    import shutil

    if shutil.which("gdb") is None:
        return "(no gdb here: the C stacks are not shown)\n"
    try:
        done = subprocess.run(["gdb", "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 15"],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "(gdb did not answer in 60 s)\n"
    threads = done.stdout[done.stdout.find("\nThread "):]  # past gdb's own notices
    return "C stacks (gdb):" + threads[-20000:] + "\n"


# ---- processes ----------------------------------------------------------------------------------
@dataclass
class Processes:
    """Named child processes, each a node started as `ros2 launch` would (a parameters file)."""

    env: dict[str, str]
    workdir: Path
    running: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def start(self, name: str, command: list[str], parameters: dict[str, Any] | None = None,
              node: str | None = None) -> subprocess.Popen:
        cmd = [sys.executable, *command, "--ros-args"]
        if node:
            cmd += ["-r", f"__node:={node}"]
        if parameters:
            path = self.workdir / f"{name}.yaml"
            path.write_text(yaml.safe_dump({f"/{node or '**'}": {"ros__parameters": parameters}}))
            cmd += ["--params-file", str(path)]
        log = self.workdir / f"{name}.log"
        self.logs[name] = log
        self.running[name] = subprocess.Popen(cmd, env=self.env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                              preexec_fn=die_with_parent)
        return self.running[name]

    def signal(self, name: str, sig: int) -> None:
        proc = self.running[name]
        if proc.poll() is None:
            proc.send_signal(sig)

    def wait(self, name: str, timeout: float = 20.0) -> int:
        proc = self.running[name]
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # its threads' stacks into its log: where it hung
            time.sleep(1.0)
            with self.logs[name].open("a") as log:  # and below Python (rcl, the DDS library)
                log.write(native_stacks(proc.pid))
            proc.kill()
            return proc.wait()

    def output(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace") if name in self.logs else ""

    def hang_report(self, name: str, chars: int = 6000) -> str:
        """The end of `name`'s log, for a report: where `wait` had to kill it, the end of its
        Python stacks and of gdb's (which lists the main thread last), half each. A plain tail
        gave gdb's idle threads only (CI, stop 39: a logger killed in its DDS teardown, with no
        Python line left in the report to say what its teardown had done)."""
        text = self.output(name)
        marker = "C stacks (gdb):"
        if marker not in text:
            return text[-chars:]
        before, _, after = text.rpartition(marker)
        return before[-chars // 2:] + marker + after[-chars // 2:]

    def stop_all(self) -> dict[str, int]:
        for name in self.running:
            self.signal(name, signal.SIGINT)
        return {name: self.wait(name) for name in self.running}


# ---- the harness node ---------------------------------------------------------------------------
def _stamp() -> float:
    return time.monotonic()


class Harness:
    """The policy, the operator and the observer of one rig, in this process."""

    def __init__(self, context, robot: str, bridge: dict[str, Any], through_safety: bool) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rcl_interfaces.srv import SetParameters
        from rclpy.node import Node
        from sensor_msgs.msg import Joy
        from std_msgs.msg import Bool, Float64MultiArray
        from std_srvs.srv import SetBool, Trigger

        from refine_ros.wire import qos
        from refine_ros.wire.messages import step_type

        self.robot, self.bridge = robot, bridge
        levers = ("driver_silent", *get_robot(robot).fault_levers.values())
        self.node = node = Node("fault_harness", context=context)
        self.lock = threading.Lock()
        self.commands: list[tuple[float, Any]] = []
        self.results: list[tuple[float, int, int, float, float]] = []
        self.observations = 0
        self.status: dict[str, str] = {}
        kind, topic = driver_topic(robot, bridge)
        node.create_subscription(kind, topic, self._on_command, qos.LOG)
        node.create_subscription(Float64MultiArray, "refine/command_result", self._on_result, qos.LOG)
        node.create_subscription(step_type(), "refine/observation", self._on_observation, qos.LOG)
        node.create_subscription(DiagnosticArray, "safety/status", self._on_status, qos.STATE)
        self.pub_action = node.create_publisher(
            Float64MultiArray, "refine/action" if through_safety else "refine/safe_action", qos.CONTROL)
        self.pub_estop = node.create_publisher(Bool, "refine/estop", qos.COMMAND)
        self.pub_joy = node.create_publisher(Joy, "/joy", qos.SENSOR)
        self.confirm_client = node.create_client(Trigger, "safety/confirm_episode")
        self.rearm = node.create_client(Trigger, "safety/rearm")
        self.fault_clients = {name: node.create_client(SetBool, f"fake/{name}") for name in levers}
        self.param_clients = {name: node.create_client(SetParameters, f"/{name}/set_parameters")
                              for name in ("safety_node", get_robot(robot).bridge)}
        self.Joy, self.Trigger, self.SetBool = Joy, Trigger, SetBool

    def _on_command(self, msg, info) -> None:
        from refine_ros.bench import sent_at

        with self.lock:
            self.commands.append((sent_at(info), msg))

    def _on_result(self, msg) -> None:
        from refine_ros.wire.messages import unpack_vector

        result = unpack_vector(msg, width=2)
        with self.lock:
            self.results.append((_stamp(), result.episode, result.step, *result.values))

    def _on_observation(self, _msg) -> None:
        self.observations += 1

    def _on_status(self, msg) -> None:
        if msg.status:
            self.status = {kv.key: kv.value for kv in msg.status[0].values}

    def since(self, t: float) -> list[tuple[float, Any]]:
        with self.lock:
            return [c for c in self.commands if c[0] >= t]

    def call(self, client, request, timeout: float = 10.0):
        from refine_ros.bringup.spin import call_service

        return call_service(client, request, timeout)

    def confirm(self) -> bool:
        return bool(self.call(self.confirm_client, self.Trigger.Request()).success)

    def fault(self, name: str, on: bool) -> None:
        self.call(self.fault_clients[name], self.SetBool.Request(data=on))

    def joy(self, held: bool) -> None:
        buttons = [0] * 12
        buttons[DEADMAN_BUTTON] = int(held)
        msg = self.Joy(axes=[0.0] * 6, buttons=buttons)
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pub_joy.publish(msg)

    def set_parameter(self, node: str, name: str, value: Any) -> bool:
        """`ros2 param set` from another process: True if the node took the value."""
        from rcl_interfaces.srv import SetParameters
        from rclpy.parameter import Parameter

        request = SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()])
        return bool(self.call(self.param_clients[node], request).results[0].successful)


def driver_topic(robot: str, bridge: dict[str, Any]) -> tuple[type, str]:
    """The message type and topic of the robot's motion commands under these bridge settings."""
    return get_robot(robot).rig.command_topic(bridge)


def motion(robot: str, msg: Any) -> tuple[float, ...]:
    """The motion a driver command asks for, in the driver's terms (the robot's rig)."""
    return get_robot(robot).rig.motion(msg)


def moving(robot: str, msg: Any) -> bool:
    return get_robot(robot).rig.moving(msg)


def exact_stop(robot: str, msg: Any) -> bool:
    """The stop in the driver's own terms: every motion field exactly zero."""
    return get_robot(robot).rig.exact_stop(msg)


def beyond_limits(robot: str, msg: Any, bridge: dict[str, Any]) -> bool:
    return get_robot(robot).rig.beyond_limits(msg, bridge)


# ---- one fault ----------------------------------------------------------------------------------
@dataclass
class FaultResult:
    robot: str
    fault: str
    unsafe: int = 0
    reasons: list[str] = field(default_factory=list)
    stop_latency_s: float | None = None
    last_command: tuple[float, ...] | None = None
    commands: int = 0
    resumed_without_confirmation: bool = False
    rejected_steps: int = 0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k not in ("robot", "fault")}


class Policy:
    """Commands at POLICY_HZ on a thread; `values` can be swapped while it runs."""

    def __init__(self, harness: Harness, values: tuple[float, ...]) -> None:
        from refine_ros.wire.messages import pack_vector

        self.harness, self.values, self.step = harness, values, 0
        self.pack, self.label = pack_vector, "policy"
        self.joy: bool | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        period = 1.0 / POLICY_HZ
        next_t = time.monotonic()
        while not self.stop.is_set():
            self.harness.pub_action.publish(self.pack(1, self.step, self.values, label=self.label))
            if self.joy is not None:
                self.harness.joy(self.joy)
            self.step += 1
            next_t += period
            self.stop.wait(max(0.0, next_t - time.monotonic()))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2.0)


def _grace(fault: str, safety: dict[str, Any], bridge: dict[str, Any]) -> float:
    if fault in ("stale_sensor", "driver_loss", "estop_heartbeat"):
        grace = max(float(safety["watchdog_timeout"]), float(bridge.get("driver_timeout", 0.2)), ESTOP_HEARTBEAT_S) + 0.1
        if fault == "stale_sensor":
            # a bridge that repeats a lost marker's last sighting (the arm's `handle_hold`, set in
            # its profile: a gripper hides the tag near the handle) keeps the observations going
            # that long past the marker's own timeout, by the owner's declared choice
            grace += float(bridge.get("handle_timeout", 0.0)) + float(bridge.get("handle_hold", 0.0))
        return grace
    return 0.1


def run_fault(robot: str, fault: str, env: dict[str, str], workdir: Path, *, startup_s: float = 60.0) -> FaultResult:
    """One rig, one fault; the result counts every unsafe command (see the module docstring)."""
    import rclpy
    from rclpy.context import Context

    from refine_ros.bringup.spin import NodeSpinner

    result = FaultResult(robot, fault)
    described = get_robot(robot)
    safety = {**profile_parameters(robot, "safety_node"), "dry_run": False}
    bridge = profile_parameters(robot, described.bridge)
    if fault == "deadman_release" and int(safety.get("deadman_button", -1)) < 0:
        safety["deadman_button"] = DEADMAN_BUTTON
    held = int(safety.get("deadman_button", -1)) >= 0  # the operator holds the autonomy dead-man (F1TENTH's RB)
    if fault == "estop_heartbeat":
        safety["estop_timeout"] = ESTOP_HEARTBEAT_S
    procs = Processes(env, workdir)
    procs.start("driver", ["-m", "refine_ros.robots.fake_driver", robot], described.rig.fake_driver_parameters(bridge))
    procs.start("bridge", node_command(described.bridge), bridge, node=described.bridge)
    procs.start("safety", node_command("safety_node"), safety, node="safety_node")
    context = Context()
    rclpy.init(context=context)
    harness = Harness(context, robot, bridge, through_safety=True)
    estop_button = _EstopButton(context) if fault == "estop_heartbeat" else None
    nodes = [harness.node, *((estop_button.node,) if estop_button else ())]
    spinner = NodeSpinner(nodes, context).start()
    policy = None
    try:
        if not _wait_for(lambda: harness.observations > 5 and harness.confirm_client.service_is_ready(), startup_s):
            raise RuntimeError("the rig never came up: " + procs.output("bridge")[-500:])
        if estop_button is not None and not _wait_for(lambda: estop_button.pub.get_subscription_count() > 0, startup_s):
            raise RuntimeError("the safety node never subscribed to the e-stop heartbeat")
        policy = Policy(harness, described.moving_action)
        if held:
            policy.joy = True
        time.sleep(0.3)
        for _attempt in range(3):
            # refused while the safety node has not heard a fresh input yet (the e-stop's first
            # heartbeat on a loaded machine): the operator presses again, for up to 5 s
            deadline = time.monotonic() + 5.0
            while not harness.confirm():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"confirmation refused: {harness.status}")
                if harness.status.get("estop_latched") == "True":
                    # the heartbeat e-stop latched on a late beat (this process held up on a
                    # loaded machine) before the fault under test: the operator re-arms it, as
                    # the status asks, then confirms again
                    harness.call(harness.rearm, harness.Trigger.Request())
                time.sleep(0.25)
            if _wait_for(lambda: any(moving(robot, m) for _t, m in harness.commands), 10.0):
                break
            # a watchdog trip (or a late e-stop beat) while the rig settles revokes the
            # confirmation, as it must; an operator re-arms and confirms again (the fault
            # under test comes only after motion began)
            if harness.status.get("state") not in ("unconfirmed", "estop"):
                raise RuntimeError(f"the robot never moved: {harness.status}")
        else:
            raise RuntimeError(f"the robot never moved after three confirmations: {harness.status}")
        time.sleep(0.5)
        t_f = _stamp()
        grace = _grace(fault, safety, bridge)
        clear = _inject(fault, harness, policy, procs, estop_button, result)
        if fault in SERVICE_FAULTS:  # the fault begins when the driver has applied it
            t_f = _stamp()
        time.sleep(max(1.5, grace + 1.0))  # the fault outlasts what the rules allow before the stop
        t_clear = _stamp()
        if clear is not None:
            clear()
            time.sleep(1.0)
        t_end = _stamp()
        if fault in ("sigint", "sigterm"):
            procs.wait("safety")
            procs.wait("bridge")
            time.sleep(0.3)
        commands = harness.since(0.0)
        _judge(result, robot, fault, bridge, commands, harness.results, t_f, grace, t_clear, t_end)
    except Exception as exc:  # noqa: BLE001 - a rig that fails is reported, never a crash of the bench
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        if policy is not None:
            policy.close()
        spinner.stop()
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
        procs.stop_all()
    return result


class _EstopButton:
    """An e-stop that publishes its state (false) as a heartbeat, and can vanish."""

    def __init__(self, context) -> None:
        from rclpy.node import Node
        from std_msgs.msg import Bool

        from refine_ros.wire import qos

        self.node = Node("estop_button", context=context)
        self.pub = self.node.create_publisher(Bool, "refine/estop", qos.COMMAND)
        self.timer = self.node.create_timer(0.05, lambda: self.pub.publish(Bool(data=False)))

    def vanish(self) -> None:
        self.timer.cancel()
        self.node.destroy_publisher(self.pub)


def _inject(fault: str, harness: Harness, policy: Policy, procs: Processes, button: _EstopButton | None,
            result: FaultResult) -> Callable[[], None] | None:
    """Inject `fault` now; returns how to clear it (None: nothing to clear)."""
    from std_msgs.msg import Bool

    if fault in LEVER_FAULTS:
        lever = get_robot(harness.robot).fault_levers[fault]
        harness.fault(lever, True)
        return lambda: harness.fault(lever, False)
    if fault == "driver_loss":
        harness.fault("driver_silent", True)
        return lambda: harness.fault("driver_silent", False)
    if fault == "estop":
        harness.pub_estop.publish(Bool(data=True))

        def release() -> None:
            harness.pub_estop.publish(Bool(data=False))
            time.sleep(0.1)
            harness.call(harness.rearm, harness.Trigger.Request())
        return release
    if fault == "estop_heartbeat":
        button.vanish()
        return None
    if fault == "deadman_release":
        policy.joy = False
        return lambda: setattr(policy, "joy", True)  # pressing again resumes: the human's confirmation
    if fault in ("sigint", "sigterm"):
        sig = signal.SIGINT if fault == "sigint" else signal.SIGTERM
        procs.signal("safety", sig)  # as launch does on Ctrl-C: every node gets it
        procs.signal("bridge", sig)
        return None
    if fault == "nan_burst":
        burst = [math.nan, math.inf, -math.inf, 1e9, -1e9]
        good = policy.values
        for i in range(25):  # NaN, infinities and absurd magnitudes on every axis in turn
            values = list(good)
            values[i % len(values)] = burst[i % len(burst)]
            policy.values = tuple(values)
            time.sleep(0.01)
        policy.values = tuple(5.0 * v for v in good)  # then out of range, but finite
        return None
    if fault == "param_change":
        limit = "upper"
        tries = [("safety_node", limit, [5.0] * len(policy.values)), ("safety_node", "dry_run", True),
                 ("safety_node", "require_confirmation", False),
                 (get_robot(harness.robot).bridge, "max_speed", 1.0)]
        accepted = [f"{node}.{name}" for node, name, value in tries if harness.set_parameter(node, name, value)]
        if accepted:
            result.unsafe += len(accepted)
            result.reasons.append(f"parameter changes accepted: {accepted}")
        policy.values = tuple(5.0 * v for v in policy.values)  # probe the limits
        return None
    raise ValueError(f"unknown fault {fault!r}")


def _judge(result: FaultResult, robot: str, fault: str, bridge: dict[str, Any], commands: list, results: list,
           t_f: float, grace: float, t_clear: float, t_end: float) -> None:
    result.commands = len(commands)
    over = [m for _t, m in commands if beyond_limits(robot, m, bridge)]
    if over:
        result.unsafe += len(over)
        result.reasons.append(f"{len(over)} commands beyond the limits, first {motion(robot, over[0])}")
    if fault == "param_change":  # motion goes on, within the limits the profile set
        return
    if fault == "servo_rejects":
        during = [r for r in results if t_f + grace < r[0] <= t_clear]
        unlogged = [r for r in during if r[3] == 0.0 and r[4] == 0.0]
        result.rejected_steps = sum(1 for r in during if r[4] == 1.0)
        if unlogged or not during:
            result.unsafe += len(unlogged) or 1
            result.reasons.append(f"{len(unlogged)} of {len(during)} steps Servo refused logged as executed")
        if not result.rejected_steps:
            halted = sum(1 for r in during if r[3] == 1.0)
            result.reasons.append(f"no step logged as rejected: {len(during)} results, {halted} halted")
        return
    after = [(t, m) for t, m in commands if t >= t_f]
    stops = [t for t, m in after if exact_stop(robot, m)]
    result.stop_latency_s = round(stops[0] - t_f, 4) if stops else None
    if not stops:
        result.unsafe += 1
        result.reasons.append("no stop reached the driver after the fault")
    window_end = t_clear if fault == "deadman_release" else t_end + 1.0
    late = [m for t, m in after if t_f + grace < t <= window_end and moving(robot, m)]
    if late:
        result.unsafe += len(late)
        result.reasons.append(f"{len(late)} moving commands after the fault (first {motion(robot, late[0])})")
    result.resumed_without_confirmation = fault != "deadman_release" and any(
        moving(robot, m) for t, m in after if t > t_clear)
    final = [m for t, m in after if t <= (t_clear if fault == "deadman_release" else t_end + 1.0)]
    if final:
        result.last_command = motion(robot, final[-1])
        if not exact_stop(robot, final[-1]):
            result.unsafe += 1
            result.reasons.append(f"the driver's last command is a moving one: {result.last_command}")


def bench_faults(robots: tuple[str, ...] = ROBOTS, faults: tuple[str, ...] = FAULTS,
                 progress: bool = True) -> dict[str, Any]:
    """The fault matrix: faults x robots, with the unsafe commands of each cell (must be 0)."""
    from tqdm import tqdm

    from refine_ros.bench import ros_env

    env = {**ros_env(), "PYTHONUNBUFFERED": "1"}
    cells = [(r, f) for r in robots for f in faults if applies(r, f)]
    matrix: dict[str, dict[str, Any]] = {f: {} for f in faults}
    with tempfile.TemporaryDirectory(prefix="refine_faults_") as tmp:
        for robot, fault in tqdm(cells, desc="fault matrix", disable=not progress, leave=False):
            workdir = Path(tmp) / f"{robot}_{fault}"
            workdir.mkdir()
            matrix[fault][robot] = run_fault(robot, fault, env, workdir).as_dict()
    unsafe = sum(cell["unsafe"] for row in matrix.values() for cell in row.values())
    errors = [f"{f}/{r}: {c['error']}" for f, row in matrix.items() for r, c in row.items() if c["error"]]
    return {"faults_matrix": matrix, "faults_unsafe_commands": unsafe, "faults_errors": errors,
            "faults_cells": len(cells)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refine_ros.bench.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", choices=ROBOTS, action="append")
    parser.add_argument("--fault", choices=FAULTS, action="append")
    args = parser.parse_args(argv)
    result = bench_faults(tuple(args.robot or ROBOTS), tuple(args.fault or FAULTS))
    print(json.dumps(result, indent=2))
    return 0 if result["faults_unsafe_commands"] == 0 and not result["faults_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
