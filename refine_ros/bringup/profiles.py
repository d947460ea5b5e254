"""Profiles: `config/<name>.yaml` read, checked and resolved into the nodes of one deployment.

A profile names the nodes of one deployment (door simulation, car simulation, real arm, real
RC car, and a record_demo profile for each) by their registry name
(`refine_ros/nodes/registry.py`), with their parameters and remappings, the launch arguments
a user may override, its task, URDF and RViz settings. Every check a profile can fail is made
here, with a message that says what to change, before anything is planned or started.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from refine_ros.bringup.arguments import (
    ARGUMENT_TYPES,
    LAUNCH_OPTIONS,
    LaunchArgument,
    ProfileError,
    launch_options,
    renamed,
)
from refine_ros.bringup.drivers import DRIVER_ARGUMENT, apply_driver
from refine_ros.nodes.registry import NODES, PACKAGE

KINDS = ("sim", "real")
_SOURCE_ROOT = Path(__file__).resolve().parents[2]
NODE_KEYS = frozenset({"name", "parameters", "from_arguments", "remappings"})
"""What a profile says about one node: which registry node, and how this deployment sets it up."""


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
    install), then the installed ament share directory (colcon or a wheel), then those of the
    packages that bring robots of their own (their profiles and URDFs; the node registry
    knows them)."""
    return list(_share_dirs())


def _share_dirs() -> Iterator[Path]:
    """`share_dirs()` one at a time: a node looking up a file of its own package (its DDS
    profile) stops at the first and never reads the whole node registry."""
    if (_SOURCE_ROOT / "config").is_dir():
        yield _SOURCE_ROOT
    try:
        from ament_index_python.packages import get_package_share_directory
    except ImportError:
        return
    for package in _share_packages():
        try:
            yield Path(get_package_share_directory(package))
        except (LookupError, OSError, ValueError):  # not installed, or AMENT_PREFIX_PATH unset
            pass


def _share_packages() -> Iterator[str]:
    """This package, then the plug-in robots' packages: a generator, so an installed node that
    finds its file in this package's share directory never reads the node registry."""
    yield PACKAGE
    yield from sorted({entry.package for entry in NODES.values()} - {PACKAGE})


def _find(sub: str, filename: str) -> Path | None:
    for root in _share_dirs():
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


def _profile_path(name: str) -> Path:
    """`config/<name>.yaml` of the first share directory that has it (this package's own config
    directory when none does: the error then names it)."""
    for root in share_dirs():
        if (root / "config" / f"{name}.yaml").is_file():
            return root / "config" / f"{name}.yaml"
    return config_dir() / f"{name}.yaml"


def profile_names() -> list[str]:
    """Profiles are the YAML files that declare `profile:` (other YAML may sit beside them), in
    this package's config directory and those of packages that bring their own robots."""
    names: set[str] = set()
    config_dir()  # none at all: say where it looked
    for folder in (root / "config" for root in share_dirs() if (root / "config").is_dir()):
        for path in sorted(folder.glob("*.yaml")):
            try:
                data = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                continue
            if isinstance(data, dict) and data.get("profile") == path.stem:
                names.add(path.stem)
    return sorted(names)


def launch_arguments(name: str) -> list[LaunchArgument]:
    """The arguments a launch file declares for this profile: the profile's own (defaults from
    its YAML; unset where the nodes' defaults apply), then the launch options."""
    return list(_declared(_load(name)).values())


def _declared(data: dict[str, Any]) -> dict[str, LaunchArgument]:
    """The profile's own arguments, then the launch options of its kind and the driver choice."""
    return {a.name: a for a in (*_profile_arguments(data).values(), *launch_options(data["kind"]), DRIVER_ARGUMENT)}


def all_launch_arguments() -> list[LaunchArgument]:
    """Every argument of any profile, once, as the profile-generic launch file declares them
    (`refine.launch.py profile:=NAME`): no default ('' = the chosen profile's own default) and
    a description that names the profiles having it, so `--show-args` shows everything."""
    found: dict[str, LaunchArgument] = {}
    owners: dict[str, list[str]] = {}
    for name in profile_names():
        for arg in launch_arguments(name):
            found.setdefault(arg.name, arg)
            owners.setdefault(arg.name, []).append(name)
    every = set(profile_names())
    return [
        LaunchArgument(arg.name, None, f"{arg.description} (" + (
            "every profile" if set(owners[arg.name]) == every else "profiles " + ", ".join(owners[arg.name]))
            + "; unset: the profile's default)", arg.kind)
        for arg in found.values()
    ]


def launch_overrides(name: str, given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The overrides a launch passes to `resolve_profile`, from its launch configurations
    (`given`: every `ARG:=VALUE` of the command line, declared or not, and the declared
    defaults). Empty values are not given (the profile's default applies). Returns the
    overrides and the names given with a value that the profile does not have, which the
    launch reports and ignores: a launch file may be included by another, whose own
    configurations reach it too."""
    declared = {arg.name for arg in launch_arguments(name)}
    overrides, ignored = {}, []
    for key, value in renamed(given, declared).items():
        if key == "profile" or value is None or (isinstance(value, str) and value.strip() == ""):
            continue
        if key in declared:
            overrides[key] = value
        else:
            ignored.append(key)
    return overrides, sorted(ignored)


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
    path = _profile_path(name)
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
        if arg in {a.name for a in (*LAUNCH_OPTIONS, DRIVER_ARGUMENT)}:
            raise ProfileError(f"{path}: argument {arg!r} is a launch option every profile has; remove it")
    seen = set()
    for i, node in enumerate(data["nodes"]):
        if not isinstance(node, dict):
            raise ProfileError(f"{path}: nodes[{i}] must be a mapping")
        if not isinstance(node.get("name"), str) or not node["name"]:
            raise ProfileError(f"{path}: nodes[{i}] needs a non-empty string 'name' (a node of the registry: "
                               f"{', '.join(sorted(NODES))})")
        if node["name"] not in NODES:
            raise ProfileError(f"{path}: nodes[{i}]: {node['name']!r} is not a node of this package; the nodes "
                               f"are {', '.join(sorted(NODES))} (refine_ros/nodes/registry.py)")
        unknown = sorted(set(node) - NODE_KEYS)
        if unknown:
            raise ProfileError(f"{path}: node {node['name']!r} has unknown key(s) {', '.join(unknown)}; a profile "
                               f"gives a node only {', '.join(sorted(NODE_KEYS))} (executable, module and class "
                               "come from the node registry, and the task from the profile's `task`)")
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


def resolve_profile(
    name: str, overrides: Mapping[str, Any] | None = None, check_modules: bool = True
) -> Profile:
    """Load a profile, apply user overrides to its arguments and the arguments to the node
    parameters that read them (`from_arguments`). With `check_modules`, every node's module
    must be importable, so a typo fails here rather than half-way through a launch."""
    data = _load(name)
    declared = _declared(data)
    overrides = renamed(overrides or {}, declared)
    unknown = sorted(set(overrides or {}) - set(declared))
    if unknown:
        raise ProfileError(
            f"profile {name!r} has no argument(s) {', '.join(unknown)}; "
            f"its arguments are: {', '.join(declared)}"
        )
    arguments = {arg: spec.default for arg, spec in declared.items()}
    for arg, value in (overrides or {}).items():
        arguments[arg] = declared[arg].read(value)

    driver = arguments[DRIVER_ARGUMENT.name]
    if driver:
        data = apply_driver(data, driver)
        _check_shape(Path(f"{_profile_path(name)} (driver:={driver})"), data)
    nodes = []
    for node in data["nodes"]:
        entry = NODES[node["name"]]
        parameters = {"task": data["task"]} if entry.takes_task else {}
        parameters.update(copy.deepcopy(node.get("parameters") or {}))
        for param, arg in (node.get("from_arguments") or {}).items():
            if arguments[arg] is not None:  # unset: the node keeps its own default
                parameters[param] = arguments[arg]
        remappings = tuple(
            (str(src), str(dst)) for src, dst in (node.get("remappings") or {}).items()
        )
        nodes.append(
            NodeSpec(
                name=entry.name,
                package=entry.package,
                executable=entry.executable,
                module=entry.module,
                class_name=entry.class_name,
                parameters=parameters,
                remappings=remappings,
            )
        )
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
