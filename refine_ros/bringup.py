"""Profiles -> node sets, shared by `ros2 launch` and `refine up`.

A profile (`config/<name>.yaml`) names the nodes of one deployment (door simulation, car
simulation, real arm, real RC car), their parameters and remappings, and the launch arguments
a user may override. Both front ends read it through this module so they can never disagree
about what runs; the launch files stay a thin translation into `launch_ros` actions.

Nothing here imports rclpy or launch: the module is used (and tested) on machines without them.
"""

from __future__ import annotations

import copy
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "refine_ros"
KINDS = ("sim", "real")
_SOURCE_ROOT = Path(__file__).resolve().parents[1]


class ProfileError(ValueError):
    """A profile that cannot be resolved: unknown name, bad override, malformed YAML or a node
    whose module is missing. The message says what to change."""


@dataclass(frozen=True)
class LaunchArgument:
    """One user-facing knob (`ros2 launch ... rounds:=5`, `refine up PROFILE --set rounds=5`)."""

    name: str
    default: Any
    description: str = ""

    @property
    def default_text(self) -> str:
        """The default as ros2 launch spells it (launch arguments are strings)."""
        return str(self.default).lower() if isinstance(self.default, bool) else str(self.default)


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
    """The arguments a launch file declares for this profile, with defaults from the YAML."""
    data = _load(name)
    return [
        LaunchArgument(arg, spec.get("default"), spec.get("description", ""))
        for arg, spec in data["arguments"].items()
    ]


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
        if not isinstance(spec, dict) or "default" not in spec:
            raise ProfileError(f"{path}: argument {arg!r} needs a mapping with a 'default'")
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
    declared = data["arguments"]
    unknown = sorted(set(overrides or {}) - set(declared))
    if unknown:
        raise ProfileError(
            f"profile {name!r} has no argument(s) {', '.join(unknown)}; "
            f"its arguments are: {', '.join(declared)}"
        )
    arguments = {arg: spec["default"] for arg, spec in declared.items()}
    for arg, value in (overrides or {}).items():
        arguments[arg] = coerce(value, declared[arg]["default"], arg)

    nodes = []
    for node in data["nodes"]:
        parameters = copy.deepcopy(node.get("parameters") or {})
        for param, arg in (node.get("from_arguments") or {}).items():
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
    )
