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
    tree = ast.parse("def f():\n    try:\n        from refine_ros.bringup.up import run\n    except ImportError:\n"
                     "        import importlib\n        importlib.import_module('rclpy')\n")
    assert [name for _, name in _imported_names(tree)] == ["refine_ros.bringup.up", "importlib", "rclpy"]


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
                     r"|\.execute(many)?\((?!\))|\.query\(|\.conn\b", re.IGNORECASE)  # (an action goal's execute() takes no SQL)
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


# ---- every internal import resolves ---------------------------------------------------------------
REPO = Path(refine_core.__file__).resolve().parents[1]
INTERNAL = ("refine_core", "refine_ros")


def _module_file(name: str) -> Path | None:
    """The source file of an internal module (a package's __init__.py), without importing it."""
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(path: Path) -> set[str]:
    """What a module binds at its top level: definitions, assignments and imports (a name bound
    inside an `if`/`try` at the top counts)."""
    names: set[str] = set()

    def bind(target: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.add(node.id)

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    bind(target)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                bind(node.target)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [])
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
    visit(ast.parse(path.read_text()).body)
    return names


def unresolved_imports(path: Path, package: str | None = None) -> list[str]:
    """Internal imports in `path` (at any depth) naming a module or attribute that does not exist;
    `package`: the one `path` belongs to (default: from where it lies in the repository)."""
    if package is None:
        package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                module = ".".join(parts[:len(parts) - node.level + 1] + ([module] if module else []))
            targets = [(module, a.name) for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                "import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
            targets = [(str(node.args[0].value), None)]
        else:
            continue
        for module, attribute in targets:
            if module.split(".")[0] not in INTERNAL:
                continue
            where = f"{path.name}:{node.lineno}"
            found = _module_file(module)
            if found is None:
                bad.append(f"{where} no module {module}")
            elif attribute not in (None, "*") and _module_file(f"{module}.{attribute}") is None \
                    and attribute not in _top_level_names(found):
                bad.append(f"{where} {module} has no {attribute}")
    return bad


def test_every_internal_import_resolves_to_a_module_or_attribute():
    """Lazy imports inside functions run only when that code path does; a moved or deleted
    module or name must fail here, not in the one run that reaches it."""
    paths = [p for package in INTERNAL for p in sorted((REPO / package).rglob("*.py"))]
    paths += sorted((REPO / "test").glob("*.py")) + sorted((REPO / "launch").glob("*.py"))
    bad = [hit for p in paths for hit in unresolved_imports(p)]
    assert not bad, "\n".join(bad)
    assert len(paths) > 150


def test_entry_points_name_real_modules_and_attributes():
    """A node executable names its node through refine_ros/nodes/_start.py, whose module-level
    `__getattr__` starts any registry node: there the name must be a registry node's."""
    from importlib.metadata import entry_points

    from refine_ros.nodes.registry import NODES

    bad = []
    for group in ("console_scripts", "refine.commands", "refine.benchmarks"):
        for entry in entry_points(group=group):
            module, _, attribute = entry.value.partition(":")
            if module.split(".")[0] not in INTERNAL:
                continue
            found = _module_file(module)
            names = _top_level_names(found) if found is not None else set()
            if "__getattr__" in names:
                names |= set(NODES)
            if found is None or (attribute and attribute.split(".")[0] not in names):
                bad.append(f"{group} {entry.name} = {entry.value}")
    assert not bad, bad
    assert "__getattr__" in _top_level_names(REPO / "refine_ros" / "nodes" / "_start.py")


def test_the_import_check_finds_a_missing_module_and_a_missing_name(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from refine_core.rollout.schema import no_such_name\n"
                     "    import refine_core.no_such_module\n    from .rollout import schema\n"
                     "    from refine_core.rollout import schema as s2\n    from .nowhere import x\n")
    assert unresolved_imports(probe, package="refine_core") == [
        "probe.py:2 refine_core.rollout.schema has no no_such_name",
        "probe.py:3 no module refine_core.no_such_module",
        "probe.py:6 no module refine_core.nowhere"]
