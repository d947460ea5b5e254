"""Profiles -> node sets, shared by `ros2 launch` and `refine up`.

A profile (`config/<name>.yaml`) names the nodes of one deployment (door simulation, car
simulation, real arm, real RC car), their parameters and remappings, and the launch arguments
a user may override. Both front ends read it through this module so they can never disagree
about what runs; the launch files stay a thin translation into `launch_ros` actions.

Before anything starts, `launch_plan` finds every executable the launch would run and checks
the interpreter the node scripts were written for: a missing required node is an error that
names what to install, before any process exists (so a failed launch never leaves orphans); a
missing optional node (robot_state_publisher, rviz2) is skipped with a warning.

Nothing here imports rclpy or launch: the module is used (and tested) on machines without them.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sysconfig
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from refine_ros import twin_bringup

PACKAGE = "refine_ros"
KINDS = ("sim", "real")
_SOURCE_ROOT = Path(__file__).resolve().parents[1]
ARGUMENT_TYPES: dict[str, Any] = {"bool": False, "int": 0, "float": 0.0, "str": ""}
"""An argument with no default in its profile names its type instead (`type: int`)."""
PROFILE_KEYS = ("task",)
"""Top-level profile values a node may take through `from_profile` (stated once per profile)."""
NODE_IMPORTS = ("rclpy", "torch", "gymnasium", "sqlite_utils", "yaml", "refine_ros")
"""What the interpreter of the node scripts must be able to import (checked before a launch)."""


class ProfileError(ValueError):
    """A profile that cannot be resolved: unknown name, bad override, malformed YAML or a node
    whose module is missing. The message says what to change."""


@dataclass(frozen=True)
class LaunchArgument:
    """One user-facing knob (`ros2 launch ... rounds:=5`, `refine up PROFILE --set rounds=5`).

    `default` None means unset: the node parameters the argument feeds keep the nodes' own
    defaults (declared once, in the node's PARAMETERS table), so a profile never repeats them.
    """

    name: str
    default: Any
    description: str = ""
    kind: str = "str"
    """bool | int | float | str: the type a value given on the command line is read as."""

    @property
    def default_text(self) -> str:
        """The default as ros2 launch spells it (launch arguments are strings; '' = unset)."""
        if self.default is None:
            return ""
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)

    def read(self, value: Any) -> Any:
        """A command-line value in this argument's type; '' (or None) means unset."""
        if value is None or (isinstance(value, str) and value.strip() == ""):
            return None
        return coerce(value, ARGUMENT_TYPES[self.kind], self.name)


LAUNCH_OPTIONS: tuple[LaunchArgument, ...] = (
    LaunchArgument("rviz", True, "start rviz2 with config/refine.rviz; when rviz2 is not installed the "
                   "launch goes on without it and says so", "bool"),
    LaunchArgument("robot_state_publisher", True, "start robot_state_publisher with the profile's URDF (the "
                   "TF tree RViz draws the robot model from); when it is not installed the launch goes on "
                   "without it and says so", "bool"),
    LaunchArgument("keep_alive", False, "false: the launch ends when the analysis node finishes the run; "
                   "true: every other node keeps running (e.g. to look at the last episode in RViz) until "
                   "Ctrl-C", "bool"),
)
"""Arguments of every launch file that configure the launch itself, not a node parameter;
`refine up` ignores them (it starts neither RViz nor robot_state_publisher and always ends
with the run)."""
REAL_ROBOT_STATE_PUBLISHER = LaunchArgument(
    "robot_state_publisher", False, "false: the robot's own robot_state_publisher publishes its TF tree "
    "(REP-105: map -> odom -> base_link), and nothing of ours joins it; true: also start one with the "
    "profile's URDF (a model whose root is `world`: only where no other publisher runs)", "bool")
"""A real robot already runs robot_state_publisher and owns its TF tree: ours would be a second
publisher of it, so a real profile starts ours only when asked."""


def launch_options(kind: str) -> tuple[LaunchArgument, ...]:
    """The launch options of a profile of this kind (real: no robot_state_publisher of ours by
    default, and `driver`: the hardware or its physics twin)."""
    if kind != "real":
        return LAUNCH_OPTIONS
    return (*(REAL_ROBOT_STATE_PUBLISHER if o.name == "robot_state_publisher" else o for o in LAUNCH_OPTIONS),
            DRIVER_OPTION)


# -- driver:=twin (refine_ros/twin_bringup.py) ----------------------------------------------------
DRIVER_OPTION = LaunchArgument("driver", "hardware", twin_bringup.DRIVER_HELP, "str")
"""Real profiles only: who stands behind the bridge's interfaces."""


def _with_driver(name: str, nodes: list[NodeSpec], arguments: dict[str, Any]) -> tuple[NodeSpec, ...]:
    try:
        return twin_bringup.with_driver(tuple(nodes), arguments.get("driver") or "hardware", name)
    except ValueError as exc:
        raise ProfileError(str(exc)) from None


@dataclass(frozen=True)
class NodeSpec:
    """Everything needed to start one node either way: as an executable (`package`,
    `executable`) under ros2 launch, or as `module:class_name` in one process."""

    name: str
    package: str
    executable: str
    module: str
    class_name: str
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()

    @property
    def target(self) -> str:
        return f"{self.module}:{self.class_name}"

    def module_available(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    kind: str
    task: str
    arguments: dict[str, Any]
    nodes: tuple[NodeSpec, ...]
    urdf: Path | None
    rviz_config: Path
    fixed_frame: str = "world"
    """RViz's fixed frame: the simulators' `world`; a robot's own frame on real profiles
    (`fixed_frame:` in the profile, e.g. base_link or odom)."""

    @property
    def rviz(self) -> bool:
        return bool(self.arguments.get("rviz", False))

    @property
    def dry_run(self) -> bool:
        return bool(self.arguments.get("dry_run", False))

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise KeyError(f"profile {self.name!r} has no node {name!r}")

    def robot_description(self) -> str:
        """The URDF text for robot_state_publisher ('' when the profile has no model)."""
        return self.urdf.read_text() if self.urdf else ""


def share_dirs() -> list[Path]:
    """Where config/, urdf/ and launch/ live: the source tree first (a checkout or an editable
    install), then the installed ament share directory (colcon or a wheel)."""
    dirs = [_SOURCE_ROOT] if (_SOURCE_ROOT / "config").is_dir() else []
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return dirs
    try:
        dirs.append(Path(get_package_share_directory(PACKAGE)))
    except (LookupError, OSError, ValueError):  # not installed, or AMENT_PREFIX_PATH unset
        pass
    return dirs


def _find(sub: str, filename: str) -> Path | None:
    for root in share_dirs():
        path = root / sub / filename
        if path.is_file():
            return path
    return None


def config_dir() -> Path:
    for root in share_dirs():
        if (root / "config").is_dir():
            return root / "config"
    raise ProfileError(
        f"no config directory found for {PACKAGE} (looked in the source tree and the ament "
        "share directory); run from a checkout or install the package"
    )


def profile_names() -> list[str]:
    """Profiles are the YAML files that declare `profile:` (other YAML may sit beside them)."""
    names = []
    for path in sorted(config_dir().glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and data.get("profile") == path.stem:
            names.append(path.stem)
    return names


def launch_arguments(name: str) -> list[LaunchArgument]:
    """The arguments a launch file declares for this profile: the profile's own (defaults from
    its YAML; unset where the nodes' defaults apply), then the launch options."""
    data = _load(name)
    return [*_profile_arguments(data).values(), *launch_options(data["kind"])]


def _profile_arguments(data: dict[str, Any]) -> dict[str, LaunchArgument]:
    arguments = {}
    for arg, spec in data["arguments"].items():
        default = spec.get("default")
        kind = spec.get("type") or type(default).__name__
        description = str(spec.get("description", "")).strip()
        if default is None:
            description += "; unset: the node's own default (docs/NODES.md)"
        arguments[arg] = LaunchArgument(arg, default, description, kind)
    return arguments


def _load(name: str, _including: tuple[str, ...] = ()) -> dict[str, Any]:
    path = config_dir() / f"{name}.yaml"
    if not path.is_file():
        raise ProfileError(
            f"unknown profile {name!r}; available profiles: {', '.join(profile_names())}"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or data.get("profile") != name:
        raise ProfileError(f"{path}: not a profile (needs 'profile: {name}' at the top level)")
    if "include" in data:
        data["nodes"] = _included_nodes(path, data, (*_including, name)) + list(data.get("nodes") or [])
    _check_shape(path, data)
    return data


def _included_nodes(path: Path, data: dict[str, Any], chain: tuple[str, ...]) -> list[dict[str, Any]]:
    """`include: {profile: P, nodes: [a, b]}`: nodes a and b exactly as profile P defines them
    (parameters, from_arguments, remappings), placed before this profile's own nodes. So the
    drivers and safety limits of a robot are written once, in its profile, and its
    record_demo profile runs the very same nodes."""
    spec = data["include"]
    if not isinstance(spec, dict) or not isinstance(spec.get("profile"), str) or not isinstance(spec.get("nodes"), list):
        raise ProfileError(f"{path}: include needs a mapping {{profile: NAME, nodes: [NODE, ...]}}")
    if spec["profile"] in chain:
        raise ProfileError(f"{path}: profiles include each other ({' -> '.join([*chain, spec['profile']])})")
    source = _load(spec["profile"], chain)
    by_name = {node["name"]: node for node in source["nodes"]}
    missing = [n for n in spec["nodes"] if n not in by_name]
    if missing:
        raise ProfileError(f"{path}: profile {spec['profile']!r} has no node(s) {', '.join(map(str, missing))}")
    return [copy.deepcopy(by_name[n]) for n in spec["nodes"]]


def _check_shape(path: Path, data: dict[str, Any]) -> None:
    for key, kind in (("kind", str), ("task", str), ("arguments", dict), ("nodes", list)):
        if not isinstance(data.get(key), kind):
            raise ProfileError(f"{path}: key {key!r} must be a {kind.__name__}")
    if data["kind"] not in KINDS:
        raise ProfileError(f"{path}: kind must be one of {KINDS}, got {data['kind']!r}")
    for arg, spec in data["arguments"].items():
        if not isinstance(spec, dict) or ("default" not in spec and spec.get("type") not in ARGUMENT_TYPES):
            raise ProfileError(
                f"{path}: argument {arg!r} needs a mapping with a 'default', or a 'type' "
                f"({' | '.join(ARGUMENT_TYPES)}) when the nodes' own default applies"
            )
        if "default" in spec and spec.get("type") and spec["type"] != type(spec["default"]).__name__:
            raise ProfileError(f"{path}: argument {arg!r} has a default that is not a {spec['type']}")
        if arg in {a.name for a in LAUNCH_OPTIONS}:
            raise ProfileError(f"{path}: argument {arg!r} is a launch option every profile has; remove it")
    seen = set()
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict):
            raise ProfileError(f"{path}: nodes[{i}] must be a mapping")
        for key in ("name", "executable", "module", "class"):
            if not isinstance(node.get(key), str) or not node[key]:
                raise ProfileError(f"{path}: nodes[{i}] needs a non-empty string {key!r}")
        if node["name"] in seen:
            raise ProfileError(f"{path}: node name {node['name']!r} appears twice")
        seen.add(node["name"])
        for param, value in (node.get("parameters") or {}).items():
            if isinstance(value, list) and not value:
                raise ProfileError(
                    f"{path}: node {node['name']!r} parameter {param!r} is an empty list, "
                    "which ROS cannot type; leave it out to keep the node's default"
                )
        for param, arg in (node.get("from_arguments") or {}).items():
            if arg not in data["arguments"]:
                raise ProfileError(
                    f"{path}: node {node['name']!r} parameter {param!r} reads unknown "
                    f"argument {arg!r}"
                )
        for param, key in (node.get("from_profile") or {}).items():
            if key not in PROFILE_KEYS:
                raise ProfileError(
                    f"{path}: node {node['name']!r} parameter {param!r} reads {key!r}; a node can "
                    f"take only {', '.join(PROFILE_KEYS)} from the profile"
                )
    _check_demonstration_rules(path, data)


def _check_demonstration_rules(path: Path, data: dict[str, Any]) -> None:
    """A real robot is never fitted to a simulated demonstration: in a `kind: real` profile the
    learner names its robot (it then fits only a demonstration teleoperated on it, and refuses
    to start without one) and the analysis node never records the simulated expert. A demo
    recorder always names the robot its demonstrations come from."""
    for node in data["nodes"]:
        params = node.get("parameters") or {}
        wired = set(node.get("from_arguments") or {})
        named = "robot" in wired or str(params.get("robot", "")).strip()
        if node["name"] == "demo_recorder" and not named:
            raise ProfileError(f"{path}: demo_recorder needs parameters.robot (the demonstration's source)")
        if data["kind"] != "real":
            continue
        if node["name"] == "learner_node" and not named:
            raise ProfileError(f"{path}: a real profile's learner_node needs parameters.robot, so that it fits only "
                               "a demonstration recorded on that robot")
        if node["name"] == "analysis_node" and params.get("demonstration") != "recorded":
            raise ProfileError(f"{path}: a real profile's analysis_node needs demonstration: recorded (never the "
                               "simulated expert)")


def coerce(value: Any, default: Any, name: str) -> Any:
    """Launch arguments arrive as strings ('3', 'true'); give them the type of the default so
    node parameters get the types they declare."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off"):
            return False
        raise ProfileError(f"argument {name!r} must be true or false, got {value!r}")
    if isinstance(default, int):
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(str(value).strip()) if not isinstance(value, (int, float)) else int(value)
        except ValueError:
            raise ProfileError(f"argument {name!r} must be an integer, got {value!r}") from None
    if isinstance(default, float):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ProfileError(f"argument {name!r} must be a number, got {value!r}") from None
    return str(value)


def resolve_profile(
    name: str, overrides: Mapping[str, Any] | None = None, check_modules: bool = True
) -> Profile:
    """Load a profile, apply user overrides to its arguments and the arguments to the node
    parameters that read them (`from_arguments`). With `check_modules`, every node's module
    must be importable, so a typo fails here rather than half-way through a launch."""
    data = _load(name)
    declared = {**_profile_arguments(data), **{a.name: a for a in launch_options(data["kind"])}}
    unknown = sorted(set(overrides or {}) - set(declared))
    if unknown:
        raise ProfileError(
            f"profile {name!r} has no argument(s) {', '.join(unknown)}; "
            f"its arguments are: {', '.join(declared)}"
        )
    arguments = {arg: spec.default for arg, spec in declared.items()}
    for arg, value in (overrides or {}).items():
        arguments[arg] = declared[arg].read(value)

    nodes = []
    for node in data["nodes"]:
        parameters = copy.deepcopy(node.get("parameters") or {})
        for param, key in (node.get("from_profile") or {}).items():
            parameters[param] = data[key]
        for param, arg in (node.get("from_arguments") or {}).items():
            if arguments[arg] is not None:  # unset: the node keeps its own default
                parameters[param] = arguments[arg]
        remappings = tuple(
            (str(src), str(dst)) for src, dst in (node.get("remappings") or {}).items()
        )
        nodes.append(
            NodeSpec(
                name=node["name"],
                package=node.get("package", PACKAGE),
                executable=node["executable"],
                module=node["module"],
                class_name=node["class"],
                parameters=parameters,
                remappings=remappings,
            )
        )
    nodes = list(_with_driver(name, nodes, arguments))
    if check_modules:
        missing = [f"{n.name} ({n.module})" for n in nodes if not n.module_available()]
        if missing:
            raise ProfileError(
                f"profile {name!r}: node module(s) not found: {', '.join(missing)}"
            )

    urdf = None
    if data.get("urdf"):
        urdf = _find("urdf", data["urdf"])
        if urdf is None:
            raise ProfileError(f"profile {name!r}: URDF {data['urdf']!r} not found in urdf/")
    rviz_name = data.get("rviz_config", "refine.rviz")
    rviz_config = _find("config", rviz_name)
    if rviz_config is None:
        raise ProfileError(f"profile {name!r}: RViz config {rviz_name!r} not found in config/")
    return Profile(
        name=name,
        description=str(data.get("description", "")).strip(),
        kind=data["kind"],
        task=data["task"],
        arguments=arguments,
        nodes=tuple(nodes),
        urdf=urdf,
        rviz_config=rviz_config,
        fixed_frame=str(data.get("fixed_frame", "world")),
    )


# ----------------------------------------------------------------------------- launching
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
