"""Launch planning: everything a launch of a resolved profile will start, checked before
anything starts.

`launch_plan` finds every executable the launch would run and checks the interpreter the
node scripts were written for: a missing required node is an error that names what to
install, before any process exists (so a failed launch never leaves orphans); a missing
optional node (robot_state_publisher, rviz2) is skipped with a warning. The same plan drives
`ros2 launch` (refine_ros/bringup/launch_support.py) and `refine up --processes`
(refine_ros/bringup/processes.py).
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from refine_ros.bringup.arguments import ProfileError
from refine_ros.bringup.profiles import Profile
from refine_ros.nodes.registry import PACKAGE

NODE_IMPORTS = ("rclpy", "torch", "gymnasium", "sqlite_utils", "yaml", "refine_ros")
"""What the interpreter of the node scripts must be able to import (checked before a launch)."""


@dataclass(frozen=True)
class PlannedNode:
    """One process of a launch: the executable found for it and what it is given. The same
    record drives `ros2 launch` (launch_ros `Node`) and `refine up --processes`."""

    name: str
    package: str
    executable: Path
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    arguments: tuple[str, ...] = ()
    """Plain command-line arguments before `--ros-args` (rviz2's `-d CONFIG`)."""
    optional: bool = False
    output: str = "screen"

    def command(self, params_file: Path | None = None) -> list[str]:
        """The command line launch_ros builds for this node: executable, arguments, then
        `--ros-args` with the node name, the parameters file and the remappings."""
        cmd = [str(self.executable), *self.arguments, "--ros-args", "-r", f"__node:={self.name}"]
        if params_file is not None:
            cmd += ["--params-file", str(params_file)]
        for src, dst in self.remappings:
            cmd += ["-r", f"{src}:={dst}"]
        return cmd

    def params_document(self) -> dict[str, Any]:
        """The parameters file launch_ros writes for a node given a dict of parameters."""
        return {f"/{self.name}": {"ros__parameters": self.parameters}}


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch will start, in order, and the optional nodes it leaves out (and why)."""

    profile: Profile
    nodes: tuple[PlannedNode, ...]
    skipped: tuple[str, ...] = ()
    """One warning per optional node that will not start."""
    keep_alive: bool = False
    ends_with: str | None = "analysis_node"
    """The node whose exit ends the launch: the analysis node, or a record_demo profile's demo
    recorder (None with keep_alive)."""

    FINISHED = "the work is done"

    def exit_reason(self, name: str) -> str | None:
        """Why the launch ends when node `name` exits; None when the others go on without it
        (an optional node such as RViz, or the finishing node with keep_alive)."""
        if name == self.ends_with:
            return f"{name} finished: {self.FINISHED}"
        node = next((n for n in self.nodes if n.name == name), None)
        if node is None or node.optional or (self.keep_alive and name in ("analysis_node", "demo_recorder")):
            return None
        return f"{name} exited before the run was over"

    def failure(self, name: str, returncode: int | None, last_error: str = "") -> str | None:
        """The one line a launch that ends because node `name` exited (`exit_reason`) fails
        with, or None when that exit is the run's normal end (the finishing node exiting 0).
        `last_error` is the node's last error line (its own reason, e.g. why it refused to
        start). `ros2 launch` and `refine up --processes` exit non-zero with it."""
        if self.exit_reason(name) is None:
            return None
        if name == self.ends_with and returncode == 0:
            return None
        what = (f"{name} failed (exit code {returncode})" if name == self.ends_with
                else f"{name} exited before the run was over (exit code {returncode})")
        return f"{what}: {last_error}" if last_error else what


ERROR_MARKS = ("[ERROR]", "[FATAL]")


def last_error_line(lines) -> str:
    """The message of the last ROS log line at ERROR or FATAL among `lines` (the text after the
    logger's `]: `), '' when there is none: the reason a node gives for failing."""
    for line in reversed(list(lines)):
        if any(mark in line for mark in ERROR_MARKS):
            _, sep, message = line.partition("]: ")
            return (message if sep else line).strip()
    return ""


class LaunchCheckError(ProfileError):
    """A launch that must not start: a required executable is missing or its interpreter
    lacks the Python dependencies. Raised before any process exists."""


def _package_prefixes(package: str) -> list[Path]:
    """Where the ament index says `package` is installed ([] when it is not, or when
    ament_index_python is missing: then only the interpreter's own prefix is searched)."""
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_prefix
    except ImportError:
        return []
    try:
        return [Path(get_package_prefix(package))]
    except (PackageNotFoundError, LookupError, ValueError, OSError):
        return []


def find_executable(package: str, executable: str) -> Path | None:
    """The executable `ros2 run package executable` would start: `<prefix>/lib/<package>/`
    of the package's ament prefix (what `colcon build` lays out). For this package also the
    interpreter's scripts directory, where `pip install` puts console scripts."""
    candidates = [prefix / "lib" / package / executable for prefix in _package_prefixes(package)]
    if package == PACKAGE:
        candidates.append(Path(sysconfig.get_path("scripts")) / executable)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def script_interpreter(script: Path) -> str | None:
    """The interpreter a Python console script names in its first line (colcon and pip write
    the interpreter they ran under there); None for a binary or a script without one."""
    try:
        with script.open("rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env" and len(words) > 1:  # `#!/usr/bin/env python3`
        return words[1]
    return words[0]


def missing_imports(interpreter: str, modules: tuple[str, ...] = NODE_IMPORTS) -> list[str] | None:
    """The modules of `modules` that `interpreter` cannot find (found, not imported: fast);
    None when the interpreter cannot be run at all."""
    code = ("import importlib.util, sys\n"
            "print(','.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")
    try:
        done = subprocess.run([interpreter, "-c", code, *modules], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [m for m in done.stdout.strip().split(",") if m]


def _optional_nodes(profile: Profile) -> list[tuple[str, str, str, dict[str, Any], tuple[str, ...], str]]:
    """(launch option, package, executable, parameters, arguments, output) of the optional
    nodes from other packages this profile asks for."""
    wanted = []
    if profile.urdf is not None:
        wanted.append(("robot_state_publisher", "robot_state_publisher", "robot_state_publisher",
                       {"robot_description": profile.robot_description()}, (), "screen"))
    frame = () if profile.fixed_frame == "world" else ("-f", profile.fixed_frame)
    wanted.append(("rviz", "rviz2", "rviz2", {}, ("-d", str(profile.rviz_config), *frame), "log"))
    return wanted


def launch_plan(profile: Profile, *, check_interpreter: bool = True,
                finder=find_executable) -> LaunchPlan:
    """Everything a launch of `profile` will start, checked before anything starts.

    Required (this package's nodes): every executable must exist, and (`check_interpreter`)
    the interpreter its first line names must find the Python dependencies; otherwise a
    `LaunchCheckError` lists every problem at once. Optional (robot_state_publisher, rviz2):
    turned off by their launch option, or skipped with a warning when not installed.
    """
    problems: list[str] = []
    nodes: list[PlannedNode] = []
    interpreters: dict[str, list[str]] = {}
    for spec in profile.nodes:
        path = finder(spec.package, spec.executable)
        if path is None:
            problems.append(
                f"executable {spec.executable!r} of package {spec.package!r} not found (looked in "
                f"lib/{spec.package}/ of the package's ament prefix"
                + (" and in the Python scripts directory" if spec.package == PACKAGE else "")
                + "); build the workspace with colcon and source install/setup.bash")
            continue
        nodes.append(PlannedNode(spec.name, spec.package, path, dict(spec.parameters), spec.remappings))
        interpreter = script_interpreter(path) if check_interpreter else None
        if interpreter and Path(interpreter).name.startswith("python"):  # a wrapper script is its own affair
            interpreters.setdefault(interpreter, []).append(spec.executable)
    for interpreter, executables in interpreters.items():
        missing = missing_imports(interpreter)
        if missing is None:
            problems.append(f"{', '.join(executables)}: interpreter {interpreter} (named in the first line of "
                            "the scripts) cannot be run")
        elif missing:
            problems.append(
                f"{', '.join(executables)} run under {interpreter} (named in their first line: the Python "
                f"colcon ran under), which cannot "
                f"import {', '.join(missing)}: install the dependencies into that Python "
                "(pip install -r requirements.txt) or rebuild with colcon running under the Python that "
                "has them (python -m colcon build), see the README")
    if problems:
        raise LaunchCheckError(f"cannot launch profile {profile.name!r}; nothing was started:\n  - "
                               + "\n  - ".join(problems))

    skipped = []
    for option, package, executable, parameters, arguments, output in _optional_nodes(profile):
        if not profile.arguments.get(option, False):
            continue
        path = finder(package, executable)
        if path is None:
            skipped.append(f"{package} is not installed: starting without it ({option}:=false hides this "
                           f"warning; install it with rosdep or apt: ros-$ROS_DISTRO-{package.replace('_', '-')})")
            continue
        nodes.append(PlannedNode(executable, package, path, parameters, (), arguments, optional=True,
                                 output=output))
    keep_alive = bool(profile.arguments.get("keep_alive", False))
    names = {n.name for n in profile.nodes}
    # the node that finishes the work: the analysis node, or a record_demo profile's recorder
    finisher = next((n for n in ("analysis_node", "demo_recorder") if n in names), None)
    return LaunchPlan(profile, tuple(nodes), tuple(skipped), keep_alive, None if keep_alive else finisher)
