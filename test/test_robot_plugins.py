"""A new robot is one folder, one registry line and its profiles: nothing else in refine_ros
names a robot, and the benchmarks, the fault matrix, `driver:=twin` and the rehearsal tool take
a robot as its descriptor describes it.

Two proofs, as test_new_task.py gives for tasks. No code of refine_ros outside
refine_ros/robots/ names a robot (string constants; docstrings aside). And a toy robot kept
outside refine_ros (test/toy_robot/: a base that only turns in place, behind
diff_drive_controller's interfaces with its stock command timeout, running the pendulum task)
is copied into a temporary folder and installed there as pip and colcon install a package of
their own (a distribution whose entry point `refine.robots` names the folder; an ament prefix
with the package's executables and its profiles in `share/<package>/config/`). Every reader of
robots then finds it, and the fault matrix (`python -m refine_ros.bench.faults --robot
spinner`) and the rehearsal tool (`tools/rehearse_twin.py --robot spinner`: a take on its twin,
the fit, a round of live episodes) run it, each a process of its own with every node in a
process of its own.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOY = Path(__file__).resolve().parent / "toy_robot"
PACKAGE = "toy_spinner"
TOY_NODES = ("spinner_bridge", "spinner_twin")


def _install_toy(tmp: Path) -> dict[str, str]:
    """The toy robot installed into `tmp` as a package of its own; the environment that sees it."""
    from refine_ros.bench import ros_env

    site, prefix = tmp / "site", tmp / "prefix"
    shutil.copytree(TOY / PACKAGE, site / PACKAGE)
    dist = site / f"{PACKAGE}-0.1.dist-info"  # what pip writes: the entry point is the registry line
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[refine.robots]\nspinner = {PACKAGE}\n")
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"  # what colcon lays out
    index.mkdir(parents=True)
    (index / PACKAGE).write_text("")
    shutil.copytree(TOY / "config", prefix / "share" / PACKAGE / "config")
    executables = prefix / "lib" / PACKAGE
    executables.mkdir(parents=True)
    for node in TOY_NODES:
        script = executables / node
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom {PACKAGE}.{node} import main\nsys.exit(main())\n")
        script.chmod(0o755)

    def prepend(name: str, path: Path) -> str:
        return os.pathsep.join([str(path), *filter(None, [os.environ.get(name)])])

    return {**ros_env(), "PYTHONUNBUFFERED": "1", "PYTHONPATH": prepend("PYTHONPATH", site),
            "AMENT_PREFIX_PATH": prepend("AMENT_PREFIX_PATH", prefix)}


def _run(env: dict[str, str], args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


# ---- nothing outside robots/ names a robot ---------------------------------------------------------
def _string_constants(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module except docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _robot_words() -> tuple[set[str], set[str]]:
    """What names a robot: its profiles and nodes, its fake driver's module (anywhere in a
    string), its short name (a whole string)."""
    from refine_ros.robots.registry import robots

    inside, whole = set(), set()
    for robot in robots().values():
        inside |= {robot.profile, robot.record_profile, robot.bridge, robot.twin, *robot.rig_nodes,
                   robot.fake_driver.partition(":")[0]}
        whole.add(robot.name)
    return inside, whole


def _mentions(path: Path) -> list[str]:
    inside, whole = _robot_words()
    return [f"{path.relative_to(path.parents[2]) if len(path.parents) > 2 else path}:{line} {text!r}"
            for line, text in _string_constants(path) if text in whole or any(w in text for w in inside)]


def test_no_code_outside_the_robot_folders_names_a_robot(tmp_path):
    robots_dir = ROOT / "refine_ros" / "robots"
    found = [hit for path in sorted((ROOT / "refine_ros").rglob("*.py")) if robots_dir not in path.parents
             for hit in _mentions(path)]
    assert not found, "robot names outside refine_ros/robots/:\n" + "\n".join(found)
    # the check can fail: a bench that names a bridge, or a robot, is reported (docstrings are not)
    probe = tmp_path / "a" / "b" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text('"""Runs the arm_bridge."""\nBRIDGE = "arm_bridge"\nROBOT = "car"\nWORD = "arm"\n')
    assert len(_mentions(probe)) == 3


# ---- a robot from a temporary folder ---------------------------------------------------------------
def test_every_reader_of_robots_finds_a_robot_installed_from_a_temporary_folder(tmp_path):
    from refine_ros.robots.registry import robot_names

    assert "spinner" not in robot_names(), "the toy is a plug-in only where it is installed"
    env = _install_toy(tmp_path)
    code = """if True:
        import json
        from refine_ros.bench.faults import FAULTS, ROBOTS, applies
        from refine_ros.bringup import launch_plan, profile_names, resolve_profile
        from refine_ros.nodes.registry import NODES, console_scripts
        twin = resolve_profile("spinner_real", {"driver": "twin", "dry_run": False})
        print(json.dumps({
            "nodes": {n: [NODES[n].module, NODES[n].class_name, NODES[n].package]
                      for n in ("spinner_bridge", "spinner_twin")},
            "scripts": [s for s in console_scripts() if "spinner" in s],
            "robots": list(ROBOTS),
            "profiles": [p for p in profile_names() if p.startswith("spinner")],
            "twin_nodes": [n.name for n in twin.nodes],
            "executables": {n.name: str(n.executable) for n in launch_plan(twin).nodes},
            "cells": [f for f in FAULTS if applies("spinner", f)],
            "bridge": resolve_profile("spinner_real").node("spinner_bridge").parameters,
        }))
    """
    done = _run(env, ["-c", code], 120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["nodes"] == {"spinner_bridge": ["toy_spinner.spinner_bridge", "SpinnerBridge", PACKAGE],
                             "spinner_twin": ["toy_spinner.spinner_twin", "SpinnerTwin", PACKAGE]}
    assert seen["scripts"] == [], "refine_ros installs its own executables only; the plug-in's are its package's"
    assert seen["robots"] == ["arm", "car", "spinner"]
    assert seen["profiles"] == ["spinner_real", "spinner_real_record_demo"]
    assert seen["twin_nodes"] == ["spinner_twin", "spinner_bridge", "safety_node", "learner_node", "rollout_logger",
                                  "analysis_node"], "driver:=twin puts the robot's twin before its profile"
    for node in TOY_NODES:  # found where colcon puts a package's executables
        assert seen["executables"][node] == str(tmp_path / "prefix" / "lib" / PACKAGE / node)
    assert Path(seen["executables"]["safety_node"]).parent == Path(sys.executable).parent
    # a one-sensor robot: no sensor to go stale apart from the driver, and no Servo to refuse
    assert seen["cells"] == ["driver_loss", "estop", "estop_heartbeat", "deadman_release", "sigint", "sigterm",
                             "nan_burst", "param_change"]
    assert seen["bridge"] == {"max_speed": 2.0}


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_fault_matrix_runs_a_robot_installed_from_a_temporary_folder(tmp_path):
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")
    env = _install_toy(tmp_path)
    done = _run(env, ["-m", "refine_ros.bench.faults", "--robot", "spinner"], 1100)
    assert done.stdout.strip(), done.stderr[-3000:]
    result = json.loads(done.stdout[done.stdout.index("{"):])
    assert result["faults_cells"] == 8 and not result["faults_errors"], result["faults_errors"]
    assert result["faults_unsafe_commands"] == 0, json.dumps(result["faults_matrix"], indent=1)
    for fault, row in result["faults_matrix"].items():
        if not row:  # not a fault of this robot
            continue
        cell = row["spinner"]
        if fault == "param_change":
            assert cell["commands"] > 0
            continue
        assert cell["last_command"] == [0.0, 0.0], (fault, cell)  # the exact stop on /diff_drive_controller/cmd_vel
        assert cell["stop_latency_s"] is not None and not cell["resumed_without_confirmation"], (fault, cell)
    assert done.returncode == 0


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_rehearsal_tool_runs_a_robot_installed_from_a_temporary_folder(tmp_path):
    """The rehearsal tool's whole workflow on the toy's twin: a take with the stick held (torque
    +1 through the safety node), the fit, one round of live episodes, each confirmed."""
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")
    env = _install_toy(tmp_path)
    run = tmp_path / "run"
    done = _run(env, ["tools/rehearse_twin.py", "--robot", "spinner", "--run", str(run), "--takes", "1",
                      "--take-seconds", "3", "--rounds", "1", "--episodes", "1", "--max-steps", "10"], 1100)
    logs = " | ".join(f"{p.name}: {p.read_text()[-1500:]}" for p in sorted(run.glob("*.log")))
    assert done.returncode == 0, done.stderr[-2000:] + logs
    result = json.loads(done.stdout[done.stdout.index("{"):])
    assert result["profile"] == "spinner_real" and result["refine_exit_code"] == 0
    (take,) = result["takes"]
    assert take["source"] == "teleop (spinner_real)" and take["steps"] >= 20, take
    (round0,) = result["rounds"]
    assert round0["status"] == "committed" and round0["fit_steps"] == take["steps"], round0
    assert sorted((e["kind"], e["steps"]) for e in round0["episodes"]) == [("diagnostic", 10), ("selection", 10)]
    assert round0["steps_with_a_safe_command"] >= 0.8, round0  # live on the twin, through the safety node
