"""The documentation against the code: a README or docs table that names a command, a test or
a topic that does not exist is a lie a user acts on, so these checks fail loudly.

Static reads only (text and `ast`), apart from each sub-command's `--help` and one scene per
registered task (the typed scene topics are named after each task's scene primitives, so they
are read from the tasks); no DDS.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from refine_core import cli
from refine_ros.nodes.registry import NODES

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
INTERFACES = ROOT / "docs" / "ROS_INTERFACES.md"
NODES_DOC = ROOT / "docs" / "NODES.md"


def _node_file(name: str) -> Path:
    """The source of a registry node (refine_ros/nodes/ or a robot folder)."""
    return ROOT.joinpath(*NODES[name].module.split(".")).with_suffix(".py")


CREATE_CALLS = ("create_publisher", "create_subscription", "create_service", "create_client")
TEST_ID = re.compile(r"(test/[\w/]+\.py)::(\w+)")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# ---- (a) every sub-command: --help works and the README names it ----------------------------
@pytest.mark.parametrize("command", cli.COMMANDS)
def test_every_command_has_help_and_is_in_the_readme(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip(), f"refine {command} --help printed nothing"
    assert re.search(rf"`refine {command}\b", _read(README)), f"README does not mention `refine {command}`"


# ---- (b) every test id in the README exists ----------------------------------------------------
def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(_read(path))
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    }


def test_every_test_id_in_the_readme_exists():
    ids = TEST_ID.findall(_read(README))
    assert len(ids) >= 20, "the README's safety table should name the tests of every rule"
    missing = []
    cache: dict[str, set[str]] = {}
    for file, name in ids:
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file} (no such file)")
            continue
        if name not in cache.setdefault(file, _test_functions(path)):
            missing.append(f"{file}::{name}")
    assert not missing, f"README names tests that do not exist: {missing}"


def test_the_readme_placeholders_are_filled():
    text = _read(README)
    left = re.findall(r"\b(?:ROS_TOPICS|ROS_NODES|SAFETY_TABLE|RESULTS_SECTION|FIGURES_[A-Z]+|BENCH_[A-Z]+)\b", text)
    assert not left, f"README still has placeholders: {left}"


# ---- (c) the interface tables and the code name the same topics -------------------------------
def _documented_names(text: str) -> set[str]:
    """The backticked names in the first cell of every table row, except names built from a
    parameter (`<...>`)."""
    names = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        for name in re.findall(r"`([^`]+)`", first_cell):
            if "<" not in name and ("/" in name or name == "joint_states"):
                names.add(name)
    return names


def _string_literals(paths: list[Path]) -> set[str]:
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(_read(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def _topic_table_values(node: ast.AST) -> set[str]:
    """String values of a `*TOPICS` dict, tuple or list (what create_* calls loop over)."""
    if isinstance(node, ast.Dict):
        items = node.values
    elif isinstance(node, (ast.Tuple, ast.List)):
        items = node.elts
    else:
        return set()
    return {v.value for v in items if isinstance(v, ast.Constant) and isinstance(v.value, str)}


def _literal_topics(paths: list[Path]) -> set[str]:
    """Topic and service names written as literals: the name argument of every create_* call,
    the keys of a dict literal that feeds create_publisher (the sim's typed topics), and the
    module-level `*TOPICS` tables."""
    topics: set[str] = set()
    for path in paths:
        for node in ast.walk(ast.parse(_read(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in CREATE_CALLS and len(node.args) >= 2):
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    topics.add(name.value)
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id.endswith("TOPICS") for t in node.targets
            ):
                topics |= _topic_table_values(node.value)
    return topics


def _topic_sources() -> list[Path]:
    helpers = sorted((ROOT / "refine_ros" / "nodes").glob("_*.py"))
    return [*helpers, *(_node_file(name) for name in sorted(NODES)), ROOT / "refine_ros" / "wire" / "adapters.py"]


@cache
def _scene_topics() -> frozenset[str]:
    """The typed topics the sim node publishes for every registered task: refine_ros's naming
    rule applied to a real scene of each task."""
    from refine_core.tasks import get_task, task_names
    from refine_core.tasks.view import TaskView
    from refine_ros.viewers.scene_topics import scene_topics

    topics: set[str] = set()
    for name in task_names():
        task = get_task(name)
        env = task.make_env()
        try:
            env.reset(seed=0)
            topics |= set(scene_topics(TaskView(task).scene(env)))
        finally:
            env.close()
    return frozenset(topics)


def _code_topics() -> set[str]:
    return _literal_topics(_topic_sources()) | _scene_topics()


def _unknown_documented(text: str) -> list[str]:
    in_code = _string_literals(sorted((ROOT / "refine_ros").rglob("*.py"))) | _scene_topics()
    return sorted(_documented_names(text) - in_code)


def _undocumented(text: str) -> list[str]:
    return sorted(_code_topics() - _documented_names(text))


def test_every_documented_topic_exists_in_the_code():
    text = _read(INTERFACES)
    assert {"refine/observation", "refine/safe_action", "sim/reset", "/cmd_vel"} <= _documented_names(text)
    unknown = _unknown_documented(text)
    assert not unknown, f"docs/ROS_INTERFACES.md lists names no code under refine_ros/ uses: {unknown}"


def test_every_literal_topic_of_the_nodes_is_documented():
    in_code = _code_topics()
    assert {"refine/action", "logger/label_episode", "refine/gripper_pose", "refine/odom"} <= in_code
    undocumented = _undocumented(_read(INTERFACES))
    assert not undocumented, f"topics/services in refine_ros/nodes missing from docs/ROS_INTERFACES.md: {undocumented}"


def test_a_drift_between_docs_and_code_is_caught():
    """The two checks above can fail: a made-up row and a dropped row are both reported."""
    text = _read(INTERFACES)
    assert _unknown_documented(text + "\n| `refine/not_a_topic` | x | y | z | w |\n") == ["refine/not_a_topic"]
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `safety/rearm`"))
    assert _undocumented(without) == ["safety/rearm"]


# ---- docs/NODES.md lists every declared parameter ----------------------------------------------
def _declared_parameters(path: Path) -> set[str]:
    """Keys of the module-level PARAMETERS / DEFAULTS dict each node declares from."""
    for node in ast.parse(_read(path)).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id in ("PARAMETERS", "DEFAULTS") and isinstance(node.value, ast.Dict):
            return {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return set()


NODE_FILES = sorted(NODES)  # the node registry; test_node_registry.py checks it lists every node module


@pytest.mark.parametrize("node", NODE_FILES)
def test_nodes_doc_lists_every_parameter(node):
    declared = _declared_parameters(_node_file(node))
    assert declared, f"{node}: no PARAMETERS/DEFAULTS table found"
    sections = re.split(r"^## ", _read(NODES_DOC), flags=re.M)
    section = next((s for s in sections if s.startswith(f"{node}\n")), None)
    assert section is not None, f"docs/NODES.md has no section for {node}"
    rows = set(re.findall(r"^\| `(\w+)` \|", section, flags=re.M))
    assert declared == rows, f"{node}: missing {sorted(declared - rows)}, stale {sorted(rows - declared)}"
