"""The one list of this package's ROS nodes, read from the node modules themselves.

A node is a module `refine_ros/nodes/<name>.py` whose `main()` starts it with
`run_node(<NodeClass>, ...)` (modules starting with `_` are helpers). Everything else follows
from the module: its executable `<name>` (`ros2 run refine_ros <name>`, a console script
setup.py generates from this list), the class `refine up` starts in one process, and whether
it takes the profile's task (its `PARAMETERS` table declares `task`). A profile
(`config/<profile>.yaml`) names nodes by this name only and adds parameters and remappings;
bringup reads the rest from here. So adding a node (a robot's bridge, say) is adding its
module, and nothing can disagree about where a node lives or what it is called.

Pure standard library and no imports of the modules it lists (they are read as text, with
`ast`): setup.py runs this file by path before anything is installed.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

PACKAGE = "refine_ros"
NODE_DIR = Path(__file__).resolve().parent


class NodeEntry(NamedTuple):
    name: str
    """Node name, executable name and module name (refine_ros.nodes.<name>)."""
    class_name: str
    """The rclpy Node subclass `main()` runs (what `refine up` instantiates)."""
    takes_task: bool = False
    """The node has a `task` parameter and is given the profile's task: a profile states its
    task once, at the top, never per node."""

    @property
    def module(self) -> str:
        return f"{PACKAGE}.nodes.{self.name}"

    @property
    def executable(self) -> str:
        return self.name

    @property
    def console_script(self) -> str:
        """The setuptools console_scripts entry that installs the executable."""
        return f"{self.executable} = {self.module}:main"


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


def read_nodes(folder: Path = NODE_DIR) -> dict[str, NodeEntry]:
    """Every node module in `folder`, in file-name order."""
    found = {}
    for path in sorted(folder.glob("*.py")):
        if path.stem.startswith("_") or path.stem == "registry":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        class_name = _started_class(tree)
        if class_name is None:
            raise ValueError(f"{path}: a module in refine_ros/nodes/ is a node and needs main() calling "
                             "run_node(<NodeClass>, args); put helpers in a module whose name starts with _")
        found[path.stem] = NodeEntry(path.stem, class_name, "task" in _parameter_names(tree))
    return found


NODES: dict[str, NodeEntry] = read_nodes()


def console_scripts() -> list[str]:
    """setup.py's console_scripts for the nodes, one per node module."""
    return [entry.console_script for entry in NODES.values()]
