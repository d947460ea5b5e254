"""The one list of the graph's ROS nodes, read from the node modules themselves.

A node is a module whose `main()` starts it with `run_node(<NodeClass>, ...)`: every module of
`refine_ros/nodes/` (the graph's generic nodes; modules starting with `_` are helpers), the
node modules of each robot folder listed in refine_ros/robots/registry.py (a bridge, a twin, a
camera detector; a robot folder's other modules are its library and have no such `main()`),
and those of robots other packages register (entry point group `refine.robots`). Everything
else follows from the module: its executable `<name>` (`ros2 run refine_ros <name>`, a console
script setup.py generates from this list; a plug-in robot's package installs its own), the
class `refine up` starts in one process, and whether it takes the profile's task (its
`PARAMETERS` table declares `task`). A profile (`config/<profile>.yaml`) names nodes by this
name only and adds parameters and remappings; bringup reads the rest from here. So adding a
node (a robot's bridge, say) is adding its module, and nothing can disagree about where a node
lives or what it is called.

Pure standard library and no imports of the modules it lists (they are read as text, with
`ast`): setup.py runs this file by path before anything is installed.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator, Mapping
from pathlib import Path
from runpy import run_path
from typing import NamedTuple

PACKAGE = "refine_ros"
NODE_DIR = Path(__file__).resolve().parent
ROBOTS_DIR = NODE_DIR.parent / "robots"


class NodeEntry(NamedTuple):
    name: str
    """Node name, executable name and module name (`<module prefix>.<name>`)."""
    class_name: str
    """The rclpy Node subclass `main()` runs (what `refine up` instantiates)."""
    takes_task: bool = False
    """The node has a `task` parameter and is given the profile's task: a profile states its
    task once, at the top, never per node."""
    module_name: str = ""
    """Its module ('' = refine_ros.nodes.<name>, a generic node)."""
    package: str = PACKAGE
    """The ROS package whose executable it is: this one, or a plug-in robot's own."""

    @property
    def module(self) -> str:
        return self.module_name or f"{PACKAGE}.nodes.{self.name}"

    @property
    def executable(self) -> str:
        return self.name

    @property
    def console_script(self) -> str:
        """The setuptools console_scripts entry that installs the executable: through
        refine_ros/nodes/_start.py, where a SIGINT while the node is still loading is a quiet
        stop (a plug-in robot's package can point its own executables there too)."""
        return f"{self.executable} = {PACKAGE}.nodes._start:{self.name}"


def _started_class(tree: ast.Module) -> str | None:
    """X of `run_node(X, ...)` in the module's `main()`; None when there is no such main."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "main":
            for call in ast.walk(node):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "run_node"
                        and call.args and isinstance(call.args[0], ast.Name)):
                    return call.args[0].id
    return None


def _parameter_names(tree: ast.Module) -> set[str]:
    """The keys of the module-level `PARAMETERS` dict literal (empty without one)."""
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "PARAMETERS" and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return set()


def read_nodes(folder: Path = NODE_DIR, prefix: str = f"{PACKAGE}.nodes", package: str = PACKAGE,
               only_nodes: bool = True) -> dict[str, NodeEntry]:
    """Every node module in `folder` (modules `<prefix>.<stem>`), in file-name order. With
    `only_nodes` (refine_ros/nodes/) every module but a `_helper` must be a node; a robot
    folder also holds modules that are not."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        entry = _read_node(path, prefix, package, only_nodes)
        if entry is not None:
            found[path.stem] = entry
    return found


def _read_node(path: Path, prefix: str, package: str, only_nodes: bool) -> NodeEntry | None:
    """The entry of module `path` when it is a node (None for a helper or a library module)."""
    if path.stem.startswith("_") or path.stem == "registry":
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    class_name = _started_class(tree)
    if class_name is None:
        if not only_nodes:
            return None
        raise ValueError(f"{path}: a module in refine_ros/nodes/ is a node and needs main() calling "
                         "run_node(<NodeClass>, args); put helpers in a module whose name starts with _")
    return NodeEntry(path.stem, class_name, "task" in _parameter_names(tree), f"{prefix}.{path.stem}", package)


def robot_packages() -> tuple[str, ...]:
    """The robots' packages: refine_ros/robots/registry.py's (read by path, as setup.py must)."""
    return tuple(run_path(str(ROBOTS_DIR / "registry.py"))["robot_packages"]())


def _robot_folder(package: str) -> tuple[Path, str]:
    """Where a robot package's modules are, and the ROS package of its executables."""
    if package.startswith(f"{PACKAGE}."):
        return ROBOTS_DIR.joinpath(*package.split(".")[2:]), PACKAGE
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"robot package {package!r} (entry point group refine.robots) is not importable")
    return Path(list(spec.submodule_search_locations)[0]), package.split(".")[0]


def _merge(found: dict[str, NodeEntry], more: dict[str, NodeEntry]) -> None:
    for name, entry in more.items():
        if name in found:
            raise ValueError(f"two nodes are called {name!r}: {found[name].module} and {entry.module}")
        found[name] = entry


def read_all(plugins: bool = True) -> dict[str, NodeEntry]:
    """The generic nodes, then each robot's, in registry order; `plugins`: also the robots
    other packages register."""
    found = read_nodes()
    for package in robot_packages():
        if not plugins and not package.startswith(f"{PACKAGE}."):
            continue
        folder, ros_package = _robot_folder(package)
        _merge(found, read_nodes(folder, package, ros_package, only_nodes=False))
    return found


def find(name: str) -> NodeEntry:
    """NODES[name], read from the one module that can hold it (KeyError when none does): a
    node's process needs its own entry only, and reading every module (parsing some thirty
    files) cost each node process and each `refine` command 0.13 s of CPU, a fifth of a node's
    whole import (measured with `python -X importtime`). Generic nodes first, then each
    robot's, as `read_all` orders them."""
    path = NODE_DIR / f"{name}.py"
    entry = _read_node(path, f"{PACKAGE}.nodes", PACKAGE, True) if path.is_file() else None
    for package in () if entry is not None else robot_packages():
        folder, ros_package = _robot_folder(package)
        path = folder / f"{name}.py"
        entry = _read_node(path, package, ros_package, False) if path.is_file() else None
        if entry is not None:
            break
    if entry is None:
        raise KeyError(name)
    return entry


class _Registry(Mapping[str, NodeEntry]):
    """`read_all()`, read on first use: every node process imports this module (through
    bringup's profiles) and most never look at another node's entry."""

    def __init__(self) -> None:
        self._entries: dict[str, NodeEntry] | None = None

    def _all(self) -> dict[str, NodeEntry]:
        if self._entries is None:
            self._entries = read_all()
        return self._entries

    def __getitem__(self, name: str) -> NodeEntry:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


NODES: Mapping[str, NodeEntry] = _Registry()


def console_scripts() -> list[str]:
    """setup.py's console_scripts: one per node of this package (a plug-in robot's package
    installs its own nodes' executables)."""
    return [entry.console_script for entry in read_all(plugins=False).values()]
