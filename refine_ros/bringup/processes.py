"""A profile's nodes, each in its own process, started the way `ros2 launch` starts them but
without `launch`: `refine up PROFILE --processes`, the multi-process test and the benchmark.

Why it exists: `ros2 launch` is what ROS users run, and it puts every node in a process of its
own; `launch` itself is not on PyPI, so neither CI nor a machine with only the ROS wheels can
run it. This module runs exactly what the launch files run: the same `bringup.launch_plan`
(executables, node names, parameters written to a parameters file as launch_ros writes it,
remappings, the same pre-start checks) and the same ending (the run ends when the analysis node
exits; every other node then gets SIGINT, like launch's shutdown, and SIGTERM / SIGKILL only if
it has not exited within `stop_timeout`).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from refine_ros.bringup import LaunchPlan, PlannedNode, dds_environment
from refine_ros.nodes.registry import PACKAGE

STOP_TIMEOUT_S = 5.0
"""How long a node may take to exit after SIGINT before it gets SIGTERM (launch's default)."""


@dataclass
class NodeProcess:
    """One running node: its process and the tail of what it printed."""

    planned: PlannedNode
    popen: subprocess.Popen
    started: float
    tail: collections.deque = field(default_factory=lambda: collections.deque(maxlen=400))
    ended: float | None = None
    signals: list[str] = field(default_factory=list)
    """Signals sent to stop it, in order (SIGINT, then SIGTERM / SIGKILL if it lingered)."""

    @property
    def name(self) -> str:
        return self.planned.name

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def output(self) -> str:
        return "\n".join(self.tail)


def die_with_parent() -> None:
    """`preexec_fn` of every node process: the kernel sends it SIGTERM (a normal stop for our
    nodes) when the process that started it dies. A supervisor killed outright (SIGKILL, a CI
    timeout) would otherwise leave its nodes running on the DDS graph, answering services and
    publishing on topics meant for the next run. Linux only; elsewhere a no-op. The signal
    follows the starting thread, so start nodes from a thread that outlives them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass(frozen=True)
class StopReport:
    """How one node ended: exit code, seconds from SIGINT to exit, signals it needed."""

    name: str
    returncode: int | None
    seconds: float
    signals: tuple[str, ...]


class ProcessGraph:
    """Starts every node of a launch plan as a process; stops them as launch would."""

    def __init__(self, plan: LaunchPlan, *, env: dict[str, str] | None = None,
                 echo: Callable[[str], None] | None = print, workdir: Path | None = None,
                 log_dir: Path | None = None) -> None:
        """`log_dir`: also write each node's whole output to `<log_dir>/<node>.log` (the tail
        kept in memory is the last 400 lines)."""
        self.plan = plan
        self.log_dir = log_dir
        self.env = dict(os.environ if env is None else env)
        self.env.update(dds_environment(self.env))  # as the launch files do
        self.env.setdefault("PYTHONUNBUFFERED", "1")  # lines as they happen, as under launch
        self.echo = echo
        self._tmp = None if workdir is not None else tempfile.TemporaryDirectory(prefix="refine_processes_")
        self.workdir = Path(workdir if workdir is not None else self._tmp.name)
        self.processes: list[NodeProcess] = []
        self._readers: list[threading.Thread] = []

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every planned node in order (the checks ran when the plan was made)."""
        for warning in self.plan.skipped:
            self._say(f"[WARN] {warning}")
        try:
            for planned in self.plan.nodes:
                self.processes.append(self._start(planned))
        except BaseException:
            self.stop()
            raise

    def _start(self, planned: PlannedNode) -> NodeProcess:
        params_file = None
        if planned.parameters:
            params_file = self.workdir / f"{planned.name}.params.yaml"
            params_file.write_text(yaml.safe_dump(planned.params_document(), default_flow_style=False))
        popen = subprocess.Popen(planned.command(params_file), env=self.env, preexec_fn=die_with_parent,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, bufsize=1)
        process = NodeProcess(planned, popen, time.monotonic())
        reader = threading.Thread(target=self._read, args=(process,), name=f"out-{planned.name}", daemon=True)
        reader.start()
        self._readers.append(reader)
        self._say(f"[INFO] [{planned.name}]: process started with pid [{popen.pid}]")
        return process

    def _read(self, process: NodeProcess) -> None:
        quiet = process.planned.output == "log"
        log = None
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = (self.log_dir / f"{process.name}.log").open("a", buffering=1)
        for line in process.popen.stdout:
            line = line.rstrip("\n")
            process.tail.append(line)
            if log is not None:
                log.write(line + "\n")
            if not quiet:
                self._say(f"[{process.name}] {line}")
        process.popen.stdout.close()
        if log is not None:
            log.close()

    def _say(self, text: str) -> None:
        if self.echo is not None:
            self.echo(text)

    # -- run -------------------------------------------------------------------------------------
    def node(self, name: str) -> NodeProcess:
        for process in self.processes:
            if process.name == name:
                return process
        raise KeyError(name)

    def wait(self, timeout_s: float | None = None, poll_s: float = 0.2) -> str:
        """Block until the launch would end (`LaunchPlan.exit_reason`): 'finished' (the node
        the plan ends with exited), 'crashed:<name>' (another required node exited first), or
        'timeout'."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            for process in self.processes:
                code = process.returncode
                if code is None:
                    continue
                if process.ended is None:
                    process.ended = time.monotonic()
                    self._say(f"[INFO] [{process.name}]: process has finished cleanly [pid {process.popen.pid}]"
                              if code == 0 else
                              f"[ERROR] [{process.name}]: process has died [pid {process.popen.pid}, exit code {code}]")
                if process.name == self.plan.ends_with:
                    return "finished"
                if self.plan.exit_reason(process.name) is not None:
                    return f"crashed:{process.name}"
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout"
            time.sleep(poll_s)

    def dump_stacks(self, settle_s: float = 1.0) -> list[str]:
        """Every refine_ros node still running prints its threads' stacks into its output
        (SIGUSR1, for which `refine_ros.nodes._main` registers faulthandler; another package's
        executable would die of it, so it is left alone): where a run that hangs waits. Returns
        the names signalled."""
        names = []
        for process in self.processes:
            if process.returncode is None and process.planned.package == PACKAGE:
                try:
                    process.popen.send_signal(signal.SIGUSR1)
                    names.append(process.name)
                except ProcessLookupError:
                    pass
        if names:
            time.sleep(settle_s)  # the stacks reach the readers
        return names

    # -- stop ------------------------------------------------------------------------------------
    def stop(self, timeout_s: float = STOP_TIMEOUT_S, sig: int = signal.SIGINT) -> list[StopReport]:
        """SIGINT every node still running, at once (as launch's shutdown does); SIGTERM what
        has not exited after `timeout_s`, SIGKILL what is left 5 s later."""
        start = time.monotonic()
        running = [p for p in self.processes if p.returncode is None]
        for process in running:
            self._signal(process, sig)
        escalation = [(timeout_s, signal.SIGTERM), (timeout_s + 5.0, signal.SIGKILL)]
        while any(p.returncode is None for p in running):
            elapsed = time.monotonic() - start
            if escalation and elapsed >= escalation[0][0]:
                _, next_sig = escalation.pop(0)
                if next_sig == signal.SIGTERM:
                    self.dump_stacks(settle_s=0.5)  # what kept them from stopping, into their logs
                for process in running:
                    if process.returncode is None:
                        self._say(f"[WARN] [{process.name}]: still running {elapsed:.1f} s after "
                                  f"{process.signals[-1]}: sending {signal.Signals(next_sig).name}")
                        self._signal(process, next_sig)
            for process in running:
                if process.returncode is not None and process.ended is None:
                    process.ended = time.monotonic()
            time.sleep(0.02)
        for process in running:
            if process.ended is None:
                process.ended = time.monotonic()
        for reader in self._readers:
            reader.join(2.0)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        return [StopReport(p.name, p.returncode, (p.ended or start) - start, tuple(p.signals)) for p in running]

    @staticmethod
    def _signal(process: NodeProcess, sig: int) -> None:
        try:
            process.popen.send_signal(sig)
            process.signals.append(signal.Signals(sig).name)
        except ProcessLookupError:
            pass
