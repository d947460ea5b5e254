"""The fault matrix's process-death cells: what the robot does when one of our processes dies
or hangs, measured on the robot's physics twin.

Per robot (refine_ros/robots/registry.py), per way its stack is commanded (the descriptor's
`command_paths`: MoveIt Servo Jazzy / Humble and a forward velocity controller for the arm,
F1TENTH's /drive and a Twist driver for the car) and per fault (SIGKILL or SIGSTOP of the safety
node, the bridge or the learner), a rig of separate processes over real DDS, started as a launch
starts them: the twin (the stock stack's rules: refine_ros/robots/<robot>/), the profile's
bridge and live safety node, the command guard, the car's track detector, and the learner's
control path (refine_ros/bench/policy_stand_in.py: a policy publishing at the control rate;
what the safety node sees when the learner dies is its commands stopping). This process is
the operator (confirms the episode, holds the car's RB) and the observer: every command on the
driver's topic, and the twin's ground truth (`~/ground_truth`: the robot's pose and speed from
the physics, and the speed its actuator is commanded).

A cell: confirm, let the robot move for a second, send the signal at t_f, watch for a few
seconds (SIGSTOP: then SIGCONT, and watch again). Reported:
- `driven_s`: how long after t_f the twin's actuator still executed a moving command (Servo's
  output, the held joint velocities, the VESC's speed setpoint), timed by the twin's own ticks;
- `moved_s` and `moved_<unit>` (mm for the arm, cm for the car): how long the robot kept moving
  and how far it went from where it was at t_f, from the physics;
- `stop_latency_s`: when the first exact stop was sent on the driver topic (its source timestamp;
  0 when the newest command before the fault was one: the rig faults only a robot commanded to
  move, but a loaded machine's safety node can stop it in between), and
  `driver_moving_after`: moving commands sent on the driver topic after that stop;
- `allowed_s`: the stack's own timeout (Servo 0.1 s, the VESC's 1 s, the Twist driver's 0.5 s),
  or, where the stack has none (a forward velocity controller), the named safeguard's: the
  command guard's timeout.
Unsafe: driven longer than `allowed_s` (plus one twin tick and the transport, 0.1 s); any
moving command after the stop; motion again after SIGCONT without a new confirmation.
"""

from __future__ import annotations

import math
import re
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine_ros.bench.faults import Processes, native_stacks, node_command, profile_parameters
from refine_ros.bringup.spin import call_service
from refine_ros.robots.registry import get_robot, robot_names

TARGETS = {"safety": "safety_node", "bridge": None, "learner": "learner_node"}
"""What a cell kills: the safety node, the robot's bridge, the learner's control path."""
SIGNALS = {"sigkill": signal.SIGKILL, "sigstop": signal.SIGSTOP}
PROCESS_FAULTS = tuple(f"{s}_{t}" for t in TARGETS for s in SIGNALS)
TOLERANCE_S = 0.1
"""One twin tick (20 ms), the transport and the scheduling of a loaded two-core machine."""
RESUMED_WATCH_S = 1.5
RIG_ATTEMPTS = 3
"""A rig that never got the robot moving (a loaded machine's watchdog trips while it settles)
is set up again, at most this often; a cell whose process was signalled is never run twice."""
GUARD_TIMEOUT_S = 0.15  # refine_ros/nodes/command_guard.py's default


@dataclass
class DeathCell:
    robot: str
    path: str
    fault: str
    allowed_s: float = 0.0
    stack: str = ""
    driven_s: float | None = None
    moved_s: float | None = None
    moved: float | None = None
    """Distance from the pose at the fault to where the robot came to rest, in the robot's unit."""
    unit: str = "m"
    stop_latency_s: float | None = None
    driver_moving_after: int = 0
    resumed: bool = False
    unsafe: int = 0
    reasons: list[str] = field(default_factory=list)
    error: str | None = None
    faulted: bool = False
    """Whether the signal was sent: a rig that never got the robot moving faulted nothing."""
    rig_attempts: int = 1
    truth_lag_s: float | None = None
    """The longest a twin's row took to reach the observer: how loaded the machine was."""

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("robot", "path", "fault", "moved", "unit")}
        out[f"moved_{self.unit}"] = None if self.moved is None else round(self.moved, 1)
        for key in ("driven_s", "moved_s", "stop_latency_s", "truth_lag_s"):
            if out[key] is not None:
                out[key] = round(out[key], 3)
        return out


class Observer:
    """The operator and the observer of one rig, in this process."""

    def __init__(self, context, robot: Any, bridge: dict[str, Any]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.node import Node
        from sensor_msgs.msg import Joy
        from std_msgs.msg import Float64MultiArray
        from std_srvs.srv import Trigger

        from refine_ros.wire import qos
        from refine_ros.wire.messages import step_type

        self.robot = robot
        self.node = node = Node("death_observer", context=context)
        self.lock = threading.Lock()
        self.truth: list[tuple[float, ...]] = []  # when the twin ticked (this process's clock), then its row
        self.truth_lag_s = 0.0
        self.commands: list[tuple[float, Any]] = []
        self.observations = 0
        self.status: dict[str, str] = {}
        kind, topic = robot.rig.command_topic(bridge)
        self.command_topic = topic
        node.create_subscription(kind, topic, self._on_command, qos.LOG)
        node.create_subscription(Float64MultiArray, f"/{robot.twin}/ground_truth", self._on_truth, qos.LOG)
        node.create_subscription(step_type(), "refine/observation", self._on_observation, qos.LOG)
        node.create_subscription(DiagnosticArray, "safety/status", self._on_status, qos.STATE)
        self.confirm_client = node.create_client(Trigger, "safety/confirm_episode")
        self.reset_client = node.create_client(Trigger, f"/{robot.twin}/reset")
        self.Trigger = Trigger
        if robot.twin_pad:
            pad = node.create_publisher(Joy, "/joy", qos.SENSOR)
            buttons = [0] * 12
            for index, value in robot.twin_pad.items():
                buttons[index] = value
            node.create_timer(0.05, lambda: pad.publish(Joy(axes=[0.0] * 6, buttons=list(buttons))))

    def _on_command(self, msg, info) -> None:
        from refine_ros.bench import sent_at

        with self.lock:
            self.commands.append((sent_at(info), msg))

    def _on_truth(self, msg) -> None:
        # Timed by the twin's own tick (its row starts with its ROS clock, the system's wall clock
        # here), not by arrival: this process's spinner can be held up on a loaded machine, and
        # rows read a second late would count as a robot driven a second longer than it was.
        ticked = msg.data[0] - (time.time() - time.monotonic())
        with self.lock:
            self.truth_lag_s = max(self.truth_lag_s, time.monotonic() - ticked)
            self.truth.append((ticked, *msg.data))

    def _on_observation(self, _msg) -> None:
        self.observations += 1

    def _on_status(self, msg) -> None:
        if msg.status:
            self.status = {kv.key: kv.value for kv in msg.status[0].values}

    def guard_reaches_all(self, guard_log: str) -> bool:
        """The guard's newest match line shows the bridge heard and as many subscribers reached
        as the graph shows besides the guard's own (at least the driver and this observer)."""
        said = re.findall(r": (?:connected after [0-9.]+ s|matches changed): hears (\d+) publisher\(s\) "
                          r"of \S+, its stop reaches (\d+) subscriber", guard_log)
        if not said:
            return False
        hears, reaches = (int(x) for x in said[-1])
        others = self.node.count_subscribers(self.command_topic) - 1
        return hears >= 1 and reaches >= max(2, others)

    def confirm(self) -> bool:
        return bool(call_service(self.confirm_client, self.Trigger.Request()).success)

    def reset_twin(self) -> None:
        """Put the robot back where the rig started, as the operator does before trying again:
        a car that drove on while its first try was revoked may be off the road by now, where
        the detector sees no tiles and every observation is withheld."""
        if not call_service(self.reset_client, self.Trigger.Request()).success:
            raise RuntimeError(f"the twin refused {self.reset_client.srv_name}")

    def moving_now(self) -> bool:
        """The robot moves (its last five ground-truth rows) and the newest command on the
        driver's topic moves it: on a loaded machine the safety node may have stopped it a
        moment ago, and a fault that finds the robot already stopped measures nothing."""
        with self.lock:
            recent = self.truth[-5:]
            last = self.commands[-1][1] if self.commands else None
        return (len(recent) == 5 and all(row[-1] > 0 and row[-2] > self.robot.moving_speed for row in recent)
                and last is not None and self.robot.rig.moving(last))


def _position(row: tuple[float, ...], robot: Any) -> tuple[float, ...]:
    """The position in a ground-truth row (the tick's time first, then the twin's row)."""
    start, stop = robot.truth_position
    return row[1 + start:1 + stop]


def judge(cell: DeathCell, robot: Any, truth: list[tuple[float, ...]], commands: list[tuple[float, Any]],
          t_f: float, t_resume: float | None, t_end: float) -> None:
    """The cell's figures and verdict from what was recorded (times on this process's clock)."""
    after = [row for row in truth if t_f <= row[0] <= (t_resume if t_resume is not None else t_end)]
    if not after:
        cell.error = NO_TRUTH_AFTER_FAULT
        return
    driven = [row[0] for row in after if row[-1] > 1e-9]
    cell.driven_s = (max(driven) - t_f) if driven else 0.0
    moving = [row[0] for row in after if row[-2] > robot.moving_speed]
    cell.moved_s = (max(moving) - t_f) if moving else 0.0
    start, rest = _position(after[0], robot), _position(after[-1], robot)
    cell.moved = math.dist(start, rest) / robot.stop_unit[1]
    rig = robot.rig
    later = [(t, m) for t, m in commands if t >= t_f]
    stops = [t for t, m in later if rig.exact_stop(m)]
    cell.stop_latency_s = (stops[0] - t_f) if stops else None
    earlier = [m for t, m in commands if t < t_f]
    if earlier and rig.exact_stop(earlier[-1]):  # stopped a moment before the fault, by the graph
        cell.stop_latency_s, stops = 0.0, [t_f, *stops]
    first_stop = stops[0] if stops else math.inf
    cell.driver_moving_after = sum(1 for t, m in later if t > first_stop and rig.moving(m)
                                   and (t_resume is None or t < t_resume))
    if cell.driven_s > cell.allowed_s + TOLERANCE_S:
        cell.unsafe += 1
        stop = "none" if cell.stop_latency_s is None else f"{cell.stop_latency_s:.3f} s"
        cell.reasons.append(f"the robot was driven {cell.driven_s:.3f} s after the fault, past {cell.allowed_s:g} s "
                            f"({cell.stack}); the first stop was sent on the driver's topic after {stop}")
    if cell.driver_moving_after:
        cell.unsafe += cell.driver_moving_after
        cell.reasons.append(f"{cell.driver_moving_after} moving commands were sent on the driver's topic after the stop")
    if t_resume is not None:
        again = [row for row in truth if t_resume + TOLERANCE_S < row[0] <= t_end and row[-1] > 1e-9]
        cell.resumed = bool(again)
        if again:
            cell.unsafe += 1
            cell.reasons.append("the robot was driven again after SIGCONT without a new confirmation")


NO_TRUTH_AFTER_FAULT = "no ground truth from the twin after the fault"


def _silence_evidence(procs: Processes, workdir: Path, truth: list, commands: list, observer: Any,
                      t_f: float) -> str:
    """Where the twin's rows stopped, when they did: seen once in a fresh-clone run (the car's
    bridge SIGKILLed, then not one row in the 3 s watched), the cause not known. Either the twin
    stopped ticking (its stacks, dumped now into twin.log, show where it waits) or this
    process stopped hearing it (its own stacks, and whether other topics still arrived)."""
    import faulthandler

    with (workdir / "observer_stacks.txt").open("w") as out:
        faulthandler.dump_traceback(out, all_threads=True)
    procs.signal("twin", signal.SIGUSR1)
    time.sleep(1.0)
    c_stacks = native_stacks(procs.running["twin"].pid)
    (workdir / "twin_c_stacks.txt").write_text(c_stacks)
    main_thread = c_stacks[c_stacks.rfind("Thread 1 "):] if "Thread 1 " in c_stacks else c_stacks
    last = f"{truth[-1][0] - t_f:+.3f} s" if truth else "never"
    heard = sum(1 for t, _ in commands if t >= t_f)
    # the tails in the message too: a CI run keeps its output, not its temporary folders
    return (f"; last row ticked at {last} from the fault, {len(truth)} rows in all; "
            f"{heard} command(s) heard on the driver's topic after it, {observer.observations} observations "
            f"in all; stacks in {workdir}: twin.log, twin_c_stacks.txt, observer_stacks.txt\n"
            f"twin.log: {procs.output('twin')[-1500:]}\ntwin's main thread: {main_thread}\n"
            f"this process: {(workdir / 'observer_stacks.txt').read_text()[-2500:]}")


def run_cell(robot_name: str, path_name: str, fault: str, env: dict[str, str], workdir: Path, *,
             startup_s: float = 120.0) -> DeathCell:
    """One rig, one process death (see the module docstring)."""
    import rclpy
    from rclpy.context import Context

    from refine_ros.bringup.spin import NodeSpinner

    robot = get_robot(robot_name)
    path = robot.command_paths[path_name]
    sig_name, target = fault.split("_", 1)
    cell = DeathCell(robot_name, path_name, fault, stack=path.stack, unit=robot.stop_unit[0])
    cell.allowed_s = path.stack_timeout if path.stack_timeout is not None else float(
        path.guard.get("timeout", GUARD_TIMEOUT_S))
    safety = {**profile_parameters(robot_name, "safety_node"), "dry_run": False}
    bridge = {**profile_parameters(robot_name, robot.bridge), **robot.twin_bridge_overrides, **path.bridge}
    procs = Processes(env, workdir)
    context = None
    nodes: list[Any] = []
    spinner = None
    try:
        procs.start("twin", node_command(robot.twin), dict(path.twin) or None, node=robot.twin)
        for name in robot.rig_nodes:
            params = profile_parameters(robot_name, name)
            procs.start(name, node_command(name), params or None, node=name)
        procs.start("guard", node_command("command_guard"), dict(path.guard), node="command_guard")
        procs.start("bridge", node_command(robot.bridge), bridge, node=robot.bridge)
        procs.start("safety", node_command("safety_node"), safety, node="safety_node")
        procs.start("learner", ["-m", "refine_ros.bench.policy_stand_in"],
                    {"action": [float(v) for v in robot.moving_action]}, node="learner_node")
        context = Context()
        rclpy.init(context=context)
        observer = Observer(context, robot, bridge)
        nodes = [observer.node]
        spinner = NodeSpinner(nodes, context).start()
        deadline = time.monotonic() + startup_s
        # up: observations flow, the operator can confirm, and the guard hears the bridge and
        # reaches every other subscriber the graph shows (the driver, this observer), as its
        # log says: an operator reads that before confirming a live run
        while not (observer.observations > 5 and observer.confirm_client.service_is_ready()
                   and observer.guard_reaches_all(procs.output("guard"))):
            if time.monotonic() > deadline:
                raise RuntimeError("the rig never came up: " + procs.output("bridge")[-600:]
                                   + "\nguard: " + procs.output("guard")[-400:])
            time.sleep(0.1)
        for attempt in range(5):
            # a watchdog trip while the rig settles (a loaded machine) revokes the confirmation,
            # as it must: the operator puts the robot back and confirms again until it has moved
            # for a second
            if attempt:
                observer.reset_twin()
            deadline = time.monotonic() + 10.0
            while not observer.confirm():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"confirmation refused: {observer.status}")
                time.sleep(0.25)
            if _wait(observer.moving_now, 20.0):
                time.sleep(1.0)
                if observer.moving_now():
                    break
        else:
            raise RuntimeError(f"the twin never moved for a second: {observer.status}; bridge: "
                               + procs.output("bridge")[-600:])
        process = "bridge" if target == "bridge" else target
        t_f = time.monotonic()
        cell.faulted = True
        procs.signal(process, SIGNALS[sig_name])
        time.sleep(robot.watch_after_death_s)
        t_resume = None
        if sig_name == "sigstop":
            t_resume = time.monotonic()
            procs.signal(process, signal.SIGCONT)
            time.sleep(RESUMED_WATCH_S)
        t_end = time.monotonic()
        with observer.lock:
            truth, commands = list(observer.truth), list(observer.commands)
            cell.truth_lag_s = observer.truth_lag_s
        judge(cell, robot, truth, commands, t_f, t_resume, t_end)
        if cell.error == NO_TRUTH_AFTER_FAULT and workdir is not None:
            cell.error += _silence_evidence(procs, workdir, truth, commands, observer, t_f)
        if cell.unsafe and workdir is not None:  # what happened, for whoever looks into it
            rows = [(round(r[0] - t_f, 3), *[round(x, 4) for x in r[2:]]) for r in truth if r[0] >= t_f - 0.2]
            sent = [(round(t - t_f, 3), robot.rig.motion(m)) for t, m in commands if t >= t_f - 0.2]
            (workdir / "timeline.txt").write_text(f"rows up to {cell.truth_lag_s:.3f} s late\n"
                                                  f"truth {rows}\ncommands {sent}\n")
    except Exception as exc:  # noqa: BLE001 - a rig that fails is reported, never a crash of the bench
        cell.error = f"{type(exc).__name__}: {exc}"
    finally:
        if spinner is not None:
            spinner.stop()
        for node in nodes:
            node.destroy_node()
        if context is not None:
            rclpy.try_shutdown(context=context)
        for name in list(procs.running):  # a SIGSTOPped process must run again to end
            procs.signal(name, signal.SIGCONT)
        procs.stop_all()
    return cell


def _wait(predicate, timeout: float) -> bool:
    from refine_ros.bench import wait_for

    return wait_for(predicate, timeout, period=0.05)


def bench_process_death(robots: tuple[str, ...] | None = None, faults: tuple[str, ...] = PROCESS_FAULTS,
                        paths: tuple[str, ...] | None = None, progress: bool = True) -> dict[str, Any]:
    """The process-death cells: robot x command path x fault, and their summary."""
    from tqdm import tqdm

    from refine_ros.bench import ros_env

    env = {**ros_env(), "PYTHONUNBUFFERED": "1"}
    names = robots or robot_names()
    cells = [(r, p, f) for r in names for p in get_robot(r).command_paths if paths is None or p in paths
             for f in faults]
    matrix: dict[str, dict[str, dict[str, Any]]] = {}
    results: list[DeathCell] = []
    with tempfile.TemporaryDirectory(prefix="refine_death_") as tmp:
        for robot, path, fault in tqdm(cells, desc="process deaths", disable=not progress, leave=False):
            for attempt in range(1, RIG_ATTEMPTS + 1):
                workdir = Path(tmp) / f"{robot}_{path}_{fault}_{attempt}"
                workdir.mkdir()
                cell = run_cell(robot, path, fault, env, workdir)
                cell.rig_attempts = attempt
                if cell.faulted or cell.error is None:
                    break  # a rig that never got going faulted nothing: only then is it set up again
            results.append(cell)
            matrix.setdefault(robot, {}).setdefault(path, {})[fault] = cell.as_dict()
    summary: dict[str, Any] = {
        "faults_process_death": matrix,
        "faults_process_death_cells": len(cells),
        "faults_process_death_unsafe": sum(c.unsafe for c in results),
        "faults_process_death_past_timeout": sum(
            1 for c in results if c.driven_s is not None and c.driven_s > c.allowed_s + TOLERANCE_S),
        "faults_process_death_errors": [f"{c.robot}/{c.path}/{c.fault}: {c.error}" for c in results if c.error],
    }
    for robot in names:
        unit = get_robot(robot).stop_unit[0]
        moved = [c.moved for c in results if c.robot == robot and c.moved is not None]
        summary[f"faults_worst_stop_{unit}_{robot}"] = round(max(moved), 1) if moved else None
    return summary


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m refine_ros.bench.process_death",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--robot", choices=robot_names(), action="append")
    parser.add_argument("--path", action="append", help="a command path of the robot's descriptor")
    parser.add_argument("--fault", choices=PROCESS_FAULTS, action="append")
    args = parser.parse_args(argv)
    result = bench_process_death(tuple(args.robot) if args.robot else None, tuple(args.fault or PROCESS_FAULTS),
                                 tuple(args.path) if args.path else None)
    print(json.dumps(result, indent=2))
    return 0 if result["faults_process_death_unsafe"] == 0 and not result["faults_process_death_errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
