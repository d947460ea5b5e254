"""refine_ros/nodes/registry.py is the one list of nodes, read from the node modules (the
generic ones in refine_ros/nodes/, a robot's in its folder refine_ros/robots/<robot>/): the
installed console scripts, every profile's nodes and what bringup resolves them to all agree
with it, so adding a node (a robot's bridge) is adding its module, and its executable, module
and class are never written twice."""

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
    assert nodes == {entry.executable: f"refine_ros.nodes._start:{entry.name}" for entry in NODES.values()}


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


def test_a_new_node_module_is_a_node_and_a_module_without_main_is_refused(tmp_path):
    from refine_ros.nodes.registry import read_nodes

    (tmp_path / "_helpers.py").write_text("X = 1\n")
    (tmp_path / "boat_bridge.py").write_text(
        'PARAMETERS = {"max_speed": Param(1.0, "m/s")}\n\nclass BoatBridge:\n    pass\n\n\n'
        "def main(args=None):\n    run_node(BoatBridge, args)\n")
    (tmp_path / "boat_sim.py").write_text(
        'PARAMETERS: dict = {"task": Param("door_open", "task")}\n\n\ndef main(args=None):\n'
        "    run_node(BoatSim, args, until=lambda node: True)\n")
    assert read_nodes(tmp_path) == {
        "boat_bridge": NodeEntry("boat_bridge", "BoatBridge", False, "refine_ros.nodes.boat_bridge"),
        "boat_sim": NodeEntry("boat_sim", "BoatSim", True, "refine_ros.nodes.boat_sim")}
    assert NodeEntry("boat_bridge", "BoatBridge").console_script == \
        "boat_bridge = refine_ros.nodes._start:boat_bridge"
    (tmp_path / "notes.py").write_text("def main():\n    print('hi')\n")
    with pytest.raises(ValueError, match=r"notes.py: .* needs main\(\) calling run_node"):
        read_nodes(tmp_path)
    # a robot folder also holds its library (mappings, kinematics, a CLI): those are not nodes
    robot = read_nodes(tmp_path, "boats.robots.boat", "boats", only_nodes=False)
    assert set(robot) == {"boat_bridge", "boat_sim"}
    assert robot["boat_bridge"].console_script == "boat_bridge = refine_ros.nodes._start:boat_bridge"
    assert robot["boat_bridge"].package == "boats"


def test_every_node_module_is_registered_and_every_entry_exists():
    from refine_ros.robots.registry import ROBOT_PACKAGES

    modules = {p.stem for p in (ROOT / "refine_ros" / "nodes").glob("*.py")
               if not p.stem.startswith("_") and p.stem != "registry"}
    for package in ROBOT_PACKAGES:  # a robot's nodes: the modules of its folder that start a node
        folder = ROOT.joinpath(*package.split("."))
        modules |= {p.stem for p in folder.glob("*.py") if "\n    run_node(" in p.read_text()}
    assert {"arm_bridge", "arm_twin", "rc_car_bridge", "car_twin", "track_detector"} <= modules
    assert modules == set(NODES), "a node module outside the registry (or an entry without a module)"
    for entry in NODES.values():
        module = importlib.import_module(entry.module)
        assert callable(module.main), entry.name
        assert getattr(module, entry.class_name).__module__ == entry.module, entry.name


def test_a_node_process_finds_its_own_entry_without_reading_the_registry():
    """What a node's executable does (refine_ros/nodes/_start.py, then its DDS settings): the
    entry `find` gives is the registry's, for every node, and no module of another node is read
    on the way. A name that is no node is a KeyError, as in NODES."""
    from refine_ros.nodes.registry import find, read_all

    assert {name: find(name) for name in NODES} == read_all()
    for name in ("registry", "_start", "kinematics", "no_such_node"):
        with pytest.raises(KeyError):
            find(name)
    probe = ("import os, sys\n"
             "from refine_ros.nodes import registry\n"
             "from refine_ros.bringup.dds import udp_only_environment\n"
             "for name in ('safety_node', 'arm_bridge'):\n"
             "    __import__(registry.find(name).module)\n"
             "udp_only_environment({**os.environ, 'RMW_IMPLEMENTATION': 'rmw_fastrtps_cpp'})\n"
             "print(registry.NODES._entries is None)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stdout + done.stderr


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


def test_the_analysis_node_names_the_method_settings_as_refine_config_does():
    """One name per option: a parameter that sets a RefineConfig field is named as the field
    (and so as `refine run`'s generated flag); the rest are the node's own (where it runs)."""
    import dataclasses

    from refine_core.loop import RefineConfig
    from refine_ros.nodes.analysis_node import PARAMETERS

    fields = {f.name for f in dataclasses.fields(RefineConfig)}
    own = {"task", "run_dir", "analyst", "transcript", "replay_mode", "task_description", "start_program",
           "flush_timeout", "robot"}
    assert set(PARAMETERS) - fields == own, "a method setting under a name RefineConfig does not use"
    assert {alias for p in PARAMETERS.values() for alias in p.aliases} == {"rounds", "episodes", "sandbox_timeout"}
