"""refine_core is the method in pure Python: importing all of it must not pull in ROS."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import refine_core

ROS_MODULES = ("rclpy", "std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "visualization_msgs",
               "diagnostic_msgs", "std_srvs", "refine_ros")


def test_importing_every_refine_core_module_loads_no_ros():
    modules = [m.name for m in pkgutil.walk_packages(refine_core.__path__, "refine_core.")
               if ".programs." not in m.name and ".edits." not in m.name]  # program texts, not code
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ROS_MODULES!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"refine_core imported ROS modules: {out.stdout}"
    assert len(modules) > 40


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """Every module an import statement names, at any depth (functions, try blocks, `if`s)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            names.append((node.lineno, str(node.args[0].value)))
    return names


def test_no_refine_core_source_imports_ros_even_lazily():
    """The import test above only sees what loads at import time; a lazy import inside a
    function (how `refine up` once reached refine_ros) only shows in the source."""
    root = Path(refine_core.__file__).parent
    offending = []
    for path in sorted(root.rglob("*.py")):
        for line, name in _imported_names(ast.parse(path.read_text(), str(path))):
            if name.split(".")[0] in ROS_MODULES:
                offending.append(f"{path.relative_to(root.parent)}:{line} imports {name}")
    assert not offending, "\n".join(offending)


def test_the_source_check_sees_lazy_imports():
    tree = ast.parse("def f():\n    try:\n        from refine_ros.up import run\n    except ImportError:\n"
                     "        import importlib\n        importlib.import_module('rclpy')\n")
    assert [name for _, name in _imported_names(tree)] == ["refine_ros.up", "importlib", "rclpy"]


def test_ros_verbs_and_benchmarks_come_from_entry_points():
    from importlib.metadata import entry_points

    from refine_core.cli import command_modules

    verbs = {e.name: e.value for e in entry_points(group="refine.commands")}
    assert {"up", "export", "demo"} <= set(verbs)
    assert all(value.startswith("refine_ros.") for value in verbs.values())
    assert command_modules()["up"] == verbs["up"]
    assert "ros" in {e.name for e in entry_points(group="refine.benchmarks")}


def test_the_database_is_reached_only_through_refine_core_store():
    """The nodes (the rollout logger's writer included), the report, the experiment and every
    command use refine_core.store's methods: no SQL statement and no raw connection use
    anywhere outside refine_core/store."""
    import re

    import refine_core
    import refine_ros

    sql = re.compile(r"\b(SELECT\s+.+\s+FROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+TABLE)\b"
                     r"|\.execute(many)?\(|\.query\(|\.conn\b", re.IGNORECASE)
    offending = []
    for package in (refine_ros, refine_core):
        root = Path(package.__file__).parent
        for path in sorted(root.rglob("*.py")):
            if path.parent.name == "store" and path.parent.parent == Path(refine_core.__file__).parent:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if sql.search(line):
                    offending.append(f"{path.relative_to(root.parent)}:{number}: {line.strip()}")
    assert not offending, "\n".join(offending)
