"""`refine up PROFILE`: a profile's whole node set in one process, for machines without
`ros2 launch` (a venv with the ROS 2 client wheels is enough). With `--processes` every node
runs in its own process instead, started exactly as the launch files start it
(`refine_ros.bringup.processes`).

Why it is built this way:
- The node set, parameters and remappings come from `bringup.resolve_profile`, the same
  source the launch files read, so `refine up door_sim` and `ros2 launch refine_ros
  door_sim.launch.py` run the same graph.
- Each node spins in its own single-threaded executor on its own thread: the learner's control
  callback then never waits behind the simulator's physics step or the logger's queueing in
  one shared executor (see `bench_latency` for the measured action latency). All nodes share
  one private rclpy context, so the function can run more than once in a process (tests).
- All nodes share one interpreter, so the learner's control callback competes for the GIL
  with the simulator and the logger. Python hands the GIL over every 5 ms by default, which
  showed up as a 7-8 ms p99 in the control callback alone; `refine up` lowers the switch
  interval to 1 ms while it runs (p99 about 4 ms in the same measurement).
- The process ends when the analysis node publishes its stop (exit 0, or 1 with the node's
  one-line reason when the run failed), after `timeout_s` (exit 1: the run did not finish) or
  on Ctrl-C (exit 130); every node is destroyed in reverse start order, so the logger flushes
  its open batch before the context goes away. With `--processes` a node that ends the run
  early, or an analysis node that exits non-zero, makes the exit 1 with that node's last error
  line, as `ros2 launch` does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from refine_ros.bringup import NodeSpec, Profile, ProfileError, dds_environment, resolve_profile
from refine_ros.bringup.spin import EXECUTORS, NodeSpinner, make_executor  # noqa: F401 - make_executor: bench_latency

EXIT_STOPPED, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 130
EXIT_FAILED = 1
"""The run failed (the analysis node says why): scripts see a non-zero status."""
SWITCH_INTERVAL_S = 0.001


@contextlib.contextmanager
def control_switch_interval(seconds: float = SWITCH_INTERVAL_S):
    """A shorter GIL switch interval while nodes share the process (restored afterwards)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, seconds))
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


@dataclass
class UpOptions:
    """What the `refine up` command line can change; None keeps the profile's value."""

    run_dir: Path | None = None
    """Run directory (the database is <run_dir>/run.db)."""
    analyst: str | None = None
    """offline | openai | replay | record."""
    transcript: Path | None = None
    """JSONL transcript for record/replay."""
    replay_mode: str | None = None
    """exact | sequential (replay)."""
    task_description: str | None = None
    """published | detailed: what the analyst is told (None: the node's default)."""
    start_program: Path | None = None
    """A program the run begins from instead of a zero-shot one."""
    max_rounds: int | None = None
    """Most refinement rounds (RefineConfig.max_rounds)."""
    diagnostic_episodes: int | None = None
    """Diagnostic episodes per round (RefineConfig.diagnostic_episodes)."""
    max_steps: int | None = None
    """Cap on episode length (smoke runs)."""
    driver: str | None = None
    """What drives the robot (`driver:=` of the launch files; refine_ros/bringup/drivers.py);
    None: the profile's own."""
    live: bool = False
    """Real profiles only: command the hardware; otherwise they run as a dry run."""
    sets: Sequence[str] = field(default_factory=list)
    """`node.param=value` overrides (value parsed as YAML)."""
    timeout_s: float | None = None
    """Stop after this many seconds even if the run is not over."""
    processes: bool = False
    """Every node in its own process, started from its executable as `ros2 launch` does."""
    twin: bool = False
    """Real profiles only: the robot's physics twin stands in for its drivers (`driver:=twin`),
    and the safety node's commands go to the twin (not a dry run)."""
    stop: threading.Event | None = None
    """Set from another thread to end a one-process run as Ctrl-C would: a program (or a test)
    that embeds `run_profile` in a thread can always take its nodes down again."""


def parse_set(text: str) -> tuple[str, str, Any]:
    """`node.param=value` -> (node, param, value); the value is read as YAML (3, 0.5, true,
    [1, 2], text). Raises ProfileError with the expected form."""
    key, sep, raw = text.partition("=")
    node, dot, param = key.strip().partition(".")
    if not sep or not dot or not node or not param:
        raise ProfileError(f"--set {text!r}: expected NODE.PARAM=VALUE, e.g. learner_node.max_steps=30")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ProfileError(f"--set {text!r}: value is not valid YAML: {exc}") from None
    return node, param, value


def plan_profile(name: str, options: UpOptions) -> Profile:
    """Resolve the profile with the options applied (no ROS needed: tested on its own)."""
    overrides: dict[str, Any] = {}
    declared = {a.name for a in _arguments(name)}
    given = (("analyst", options.analyst), ("run_dir", options.run_dir), ("max_rounds", options.max_rounds),
             ("diagnostic_episodes", options.diagnostic_episodes), ("max_steps", options.max_steps), ("transcript", options.transcript),
             ("replay_mode", options.replay_mode), ("task_description", options.task_description),
             ("start_program", options.start_program), ("driver", options.driver))
    for arg, value in given:
        if value is not None and arg in declared:
            overrides[arg] = str(value) if isinstance(value, Path) else value
    # RViz and robot_state_publisher are separate programs, never started by `refine up`
    overrides.update({"rviz": False, "robot_state_publisher": False, "keep_alive": False})
    if "dry_run" in declared:
        overrides["dry_run"] = not options.live
    overrides.update(_twin_overrides(options, declared))
    profile = resolve_profile(name, overrides)
    nodes = {spec.name: spec for spec in profile.nodes}
    params = {spec.name: dict(spec.parameters) for spec in profile.nodes}

    def put(node: str, param: str, value: Any) -> None:
        if node in params:
            params[node][param] = value

    for arg, value in given:
        if value is not None and arg not in declared:  # a profile without the argument still gets it
            targets = ("learner_node", "analysis_node", "rollout_logger") if arg == "run_dir" else ("analysis_node",)
            for node in targets:
                put(node, arg, str(value) if isinstance(value, Path) else value)
    for text in options.sets:
        node, param, value = parse_set(text)
        if node not in nodes:
            raise ProfileError(f"--set {text!r}: profile {name!r} has no node {node!r}; nodes: {', '.join(nodes)}")
        params[node][param] = _as_declared(nodes[node], param, value)  # a params file keeps YAML's 3 an int
    specs = tuple(
        NodeSpec(name=s.name, package=s.package, executable=s.executable, module=s.module,
                 class_name=s.class_name, parameters=params[s.name], remappings=s.remappings)
        for s in profile.nodes
    )
    return dataclasses.replace(profile, nodes=specs)


def _twin_overrides(options: UpOptions, declared: set[str]) -> dict[str, Any]:
    """`--twin`: driver:=twin, and live, since the commands go to the twin (nothing reaches
    hardware: the twin is what stands behind the bridge). A profile with no robot bridge is
    refused by the driver seam (refine_ros/bringup/drivers.py)."""
    if not options.twin:
        return {}
    if options.driver not in (None, "", "twin"):
        raise ProfileError(f"--twin and --driver {options.driver} contradict each other; give one")
    return {"driver": "twin", **({"dry_run": False} if "dry_run" in declared else {})}


def _arguments(name: str):
    from refine_ros.bringup import launch_arguments

    return launch_arguments(name)


def _node_kwargs(spec: NodeSpec, context) -> dict[str, Any]:
    from rclpy.parameter import Parameter

    overrides = [Parameter(k, value=_as_declared(spec, k, v)) for k, v in spec.parameters.items()]
    kwargs: dict[str, Any] = {"parameter_overrides": overrides, "context": context}
    if spec.remappings:
        args = ["--ros-args"]
        for src, dst in spec.remappings:
            args += ["-r", f"{src}:={dst}"]
        kwargs["cli_args"] = args
    return kwargs


def _as_declared(spec: NodeSpec, name: str, value: Any) -> Any:
    """YAML writes 30 for a float parameter (or [1, 0] for a float array) as happily as 30.0;
    the node's declared default decides (rclpy refuses an integer for a double parameter)."""
    from refine_ros.params import Required, default_of

    try:
        module = importlib.import_module(spec.module)
    except ImportError:  # planning without rclpy: the node checks its own parameters when it starts
        return value
    table = getattr(module, "PARAMETERS", None)
    if not isinstance(table, dict) or name not in table:
        return value
    default = default_of(table[name])
    floats = (isinstance(default, Required) and default.type in ("double", "double_array")) or isinstance(
        default, float) or (isinstance(default, list) and default and all(isinstance(v, float) for v in default))

    def number(v: Any) -> Any:
        return float(v) if floats and isinstance(v, int) and not isinstance(v, bool) else v

    return [number(v) for v in value] if isinstance(value, list) else number(value)


def start_nodes(profile: Profile, context) -> list[Any]:
    """Instantiate every node of the profile in order; on a failure destroy those started."""
    nodes: list[Any] = []
    try:
        for spec in profile.nodes:
            cls = getattr(importlib.import_module(spec.module), spec.class_name)
            try:
                nodes.append(cls(**_node_kwargs(spec, context)))
            except Exception as exc:
                raise ProfileError(f"node {spec.name} ({spec.target}) failed to start: {exc}") from exc
    except BaseException:
        for node in reversed(nodes):
            node.destroy_node()
        raise
    return nodes


def guard_needs_its_own_process(profile: Profile) -> str | None:
    """Why this profile must not run live in one process: its bridge commands a stack that
    holds the last command by itself (a command path of the robot's descriptor with no stack
    timeout, e.g. a forward velocity controller), whose only safeguard, the command guard, has
    to outlive the bridge. None when one process is fine."""
    from refine_ros.robots.registry import robots

    nodes = {spec.name: spec.parameters for spec in profile.nodes}
    if not any(spec.name == "safety_node" and spec.parameters.get("dry_run") is False for spec in profile.nodes):
        return None  # a dry run sends the robot nothing
    for robot in robots().values():
        bridge = nodes.get(robot.bridge)
        if bridge is None:
            continue
        for name, path in robot.command_paths.items():
            keys = {k: v for k, v in path.bridge.items() if isinstance(v, str)}
            if path.stack_timeout is None and keys and all(bridge.get(k) == v for k, v in keys.items()):
                return (f"{robot.bridge} commands a stack that holds its last command ({name}: {path.stack}); "
                        "the command guard must outlive the bridge, so run it with --processes (or ros2 launch), "
                        "not in one process")
    return None


def run_profile(profile: str, options: UpOptions) -> int:
    """Run the profile's nodes until the analysis node stops the run (a record_demo profile: until
    the demonstration is saved); returns the exit code."""
    resolved = plan_profile(profile, options)
    if not options.processes:
        why = guard_needs_its_own_process(resolved)
        if why is not None:
            raise ProfileError(why)
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    if options.processes:
        return _run_processes(resolved, options)
    os.environ.update(dds_environment(os.environ))  # read when rclpy creates the participant
    with control_switch_interval():
        return _run(profile, resolved, options)


def _run_processes(resolved: Profile, options: UpOptions) -> int:
    """The profile's nodes as separate processes (`refine_ros.bringup.processes`), until the analysis
    node exits; Ctrl-C stops every node as `ros2 launch` would."""
    from refine_ros.bringup import launch_plan
    from refine_ros.bringup.processes import ProcessGraph

    graph = ProcessGraph(launch_plan(resolved))
    code = EXIT_STOPPED
    try:
        graph.start()
        outcome = graph.wait(options.timeout_s)
        if outcome == "timeout":
            print(f"[refine] timeout after {options.timeout_s:g} s; the run did not finish", flush=True)
            code = EXIT_TIMEOUT
        else:
            name = outcome.split(":", 1)[1] if outcome.startswith("crashed:") else graph.plan.ends_with
            node = graph.node(name) if name else None
            failure = None if node is None else graph.plan.failure(name, node.returncode, node.last_error())
            if failure is not None:
                print(f"[refine] {failure}", flush=True)
                code = EXIT_FAILED
    except KeyboardInterrupt:
        print("[refine] interrupted", flush=True)
        code = EXIT_INTERRUPTED
    finally:
        for report in graph.stop():
            if report.signals[1:] or (report.returncode not in (0, None) and code == EXIT_STOPPED):
                print(f"[refine] {report.name}: exit code {report.returncode} after {report.seconds:.1f} s "
                      f"({', '.join(report.signals)})", flush=True)
    return code


def _run(profile: str, resolved: Profile, options: UpOptions) -> int:
    import rclpy
    from tqdm.auto import tqdm

    context = rclpy.Context()
    rclpy.init(context=context)
    nodes: list[Any] = []
    spinner = None
    code = EXIT_STOPPED
    try:
        nodes = start_nodes(resolved, context)
        # a node's companions (a twin's MoveIt Servo) spin beside it; it destroys them itself
        companions = [c for n in nodes for c in getattr(n, "companion_nodes", ())]
        spinner = NodeSpinner([*nodes, *companions], context)  # stops its threads before any node is destroyed
        spinner.start()
        analysis = next((n for n in nodes if n.get_name() == "analysis_node"), None)
        recorder = next((n for n in nodes if n.get_name() == "demo_recorder"), None)
        rounds = int(_param(resolved, "analysis_node", "max_rounds", 0) or 0)
        deadline = None if options.timeout_s is None else time.monotonic() + float(options.timeout_s)
        bar = tqdm(total=rounds or None, desc=f"refine up {profile}", unit="round", disable=analysis is None)
        try:
            while True:
                if analysis is not None:
                    stopped = analysis.finished.wait(0.5)
                    if analysis.rounds_done > bar.n:
                        bar.update(analysis.rounds_done - bar.n)
                    if stopped:
                        break
                elif recorder is not None:  # a record_demo profile ends with the saved demonstration
                    if recorder.finished.wait(0.5):
                        break
                else:
                    time.sleep(0.5)  # a profile without an analysis node runs until timeout / Ctrl-C
                if deadline is not None and time.monotonic() >= deadline:
                    print(f"[refine] timeout after {options.timeout_s:g} s; the run did not finish", flush=True)
                    code = EXIT_TIMEOUT
                    break
                if options.stop is not None and options.stop.is_set():
                    print("[refine] stopped", flush=True)
                    code = EXIT_INTERRUPTED
                    break
        finally:
            bar.close()
        if analysis is not None and analysis.finished.is_set():
            print(_summary(analysis), flush=True)
            if analysis.failed and code == EXIT_STOPPED:
                code = EXIT_FAILED
        if recorder is not None and recorder.finished.is_set():
            print(f"[refine] {recorder.outcome}", flush=True)
    except KeyboardInterrupt:
        print("[refine] interrupted", flush=True)
        code = EXIT_INTERRUPTED
    finally:
        if spinner is not None:
            spinner.stop()
        for node in reversed(nodes):
            try:
                node.destroy_node()
            except Exception as exc:  # one node failing to close must not keep the others open
                print(f"[refine] closing {node.get_name()}: {exc}", flush=True)
        rclpy.try_shutdown(context=context)
    return code


def _param(profile: Profile, node: str, name: str, default: Any) -> Any:
    for spec in profile.nodes:
        if spec.name == node:
            return spec.parameters.get(name, default)
    return default


def _summary(analysis: Any) -> str:
    result = analysis.result
    if result is None:
        return f"[refine] the run {'failed' if analysis.failed else 'ended without a result'}: {analysis.stop_reason}"
    best = result.best
    lines = [f"[refine] run {result.run_id}: {len(result.rounds)} round(s); {analysis.stop_reason}"]
    if best is not None:
        metric = analysis.task.spec.metric
        sel = best.metrics.get("selection", {}).get("metric_mean", math.nan)
        ev = best.metrics.get("eval", {})
        lines.append(f"[refine] best round {best.round}: {metric.name} {sel:.4g} (selection)"
                     f", eval {ev.get('metric_mean', math.nan):.4g} ± {ev.get('metric_std', math.nan):.3g}")
    lines.append(f"[refine] database: {analysis.run_dir / 'run.db'}")
    return "\n".join(lines)
