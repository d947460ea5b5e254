"""refine_ros/nodes/registry.py is the one list of nodes: the installed console scripts, the
node modules, every profile's nodes and what bringup resolves them to all agree with it, so
adding a node (or a robot) never means writing its executable, module or class twice."""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from refine_ros import bringup
from refine_ros.nodes.registry import NODES, NodeEntry

ROOT = Path(__file__).resolve().parents[1]


def test_setup_py_installs_one_console_script_per_registry_node():
    installed = {ep.name: ep.value for ep in importlib.metadata.distribution("refine_ros").entry_points
                 if ep.group == "console_scripts"}
    nodes = {name: value for name, value in installed.items() if name != "refine"}
    assert nodes == {entry.executable: f"{entry.module}:main" for entry in NODES.values()}


def test_setup_py_reads_the_registry_without_installing_anything():
    """setup.py runs before the package (or its dependencies) is importable: the registry must
    load by path with nothing but the standard library."""
    code = ("import runpy, sys; r = runpy.run_path('refine_ros/nodes/registry.py'); "
            "print(len(r['console_scripts']())); "
            "assert not [m for m in ('refine_ros', 'yaml', 'rclpy') if m in sys.modules]")
    done = subprocess.run([sys.executable, "-S", "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(NODES)
    assert "NODES" not in (ROOT / "setup.py").read_text().replace("NODE_SCRIPTS", ""), "no second list in setup.py"


def test_every_node_module_is_registered_and_every_entry_exists():
    modules = {p.stem for p in (ROOT / "refine_ros" / "nodes").glob("*.py")
               if not p.stem.startswith("_") and p.stem != "registry"}
    assert modules == set(NODES), "a node module outside the registry (or an entry without a module)"
    for entry in NODES.values():
        module = importlib.import_module(entry.module)
        assert callable(module.main), entry.name
        assert getattr(module, entry.class_name).__module__ == entry.module, entry.name


@pytest.mark.parametrize("entry", NODES.values(), ids=lambda e: e.name)
def test_takes_task_matches_the_node_parameters(entry: NodeEntry):
    table = getattr(importlib.import_module(entry.module), "PARAMETERS", None) or {}
    assert ("task" in table) == entry.takes_task, \
        f"{entry.name}: takes_task must say whether the node declares a task parameter"


@pytest.mark.parametrize("name", bringup.profile_names())
def test_profiles_name_registry_nodes_only_and_bringup_derives_the_rest(name):
    data = yaml.safe_load((ROOT / "config" / f"{name}.yaml").read_text())
    for node in data["nodes"]:
        assert set(node) <= bringup.NODE_KEYS, f"{name}: {node['name']} repeats what the registry says"
    profile = bringup.resolve_profile(name)
    assert profile.nodes
    for spec in profile.nodes:
        entry = NODES[spec.name]
        assert (spec.package, spec.executable, spec.module, spec.class_name) == (
            "refine_ros", entry.executable, entry.module, entry.class_name)
        assert (spec.parameters.get("task") == profile.task) == entry.takes_task, (name, spec.name)
