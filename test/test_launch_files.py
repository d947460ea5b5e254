"""Each launch file imports, declares its arguments and, evaluated in a launch context, yields
the profile's nodes (at the executables bringup found), robot_state_publisher and rviz2 when
installed and wanted, and the exit handlers that end the launch with the run. Needs the real
`launch` / `launch_ros` packages, which exist in a ROS 2 install but not as PyPI wheels; the
same plan is covered without them by test_bringup.py and test_ros_multiprocess.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

launch = pytest.importorskip(
    "launch", reason="the ROS 2 'launch' package is not installed (it ships with ROS 2, not PyPI)"
)
if not hasattr(launch, "LaunchDescription"):  # only this repo's launch/ folder, as a namespace
    pytest.skip("the ROS 2 'launch' package is not installed (it ships with ROS 2, not PyPI)",
                allow_module_level=True)
pytest.importorskip(
    "launch_ros", reason="the ROS 2 'launch_ros' package is not installed (it ships with ROS 2, not PyPI)"
)

from launch.actions import DeclareLaunchArgument, OpaqueFunction, RegisterEventHandler  # noqa: E402
from launch_ros.actions import Node  # noqa: E402

from refine_ros import bringup  # noqa: E402
from refine_ros.bringup import resolve_profile  # noqa: E402

LAUNCH_DIR = Path(__file__).resolve().parents[1] / "launch"
PROFILES = ("door_sim", "car_sim", "pendulum_sim", "arm_real", "rc_car_real")
RECORD_PROFILES = tuple(f"{p}_record_demo" for p in ("door_sim", "car_sim", "arm_real", "rc_car_real"))
ALL_PROFILES = (*PROFILES, *RECORD_PROFILES)


def _load(profile: str):
    path = LAUNCH_DIR / f"{profile}.launch.py"
    spec = importlib.util.spec_from_file_location(f"launch_{profile}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _evaluate(description, overrides: dict[str, str]):
    context = launch.LaunchContext()
    context.launch_configurations.update(overrides)  # the command line's, as ros2 launch sets them first
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            entity.visit(context)  # sets the default of what was not given; a missing required one raises
    opaque = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    assert len(opaque) == 1
    return context, opaque[0].execute(context)


def _fake_install(tmp_path, monkeypatch, *, missing=()):
    """Every executable present except `missing` (rviz2 and robot_state_publisher included)."""
    def finder(package, executable):
        if executable in missing:
            return None
        path = tmp_path / "lib" / package / executable
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
        return path

    monkeypatch.setattr(bringup, "find_executable", finder)
    real = bringup.launch_plan
    monkeypatch.setattr(bringup, "launch_plan", lambda profile, **kw: real(profile, **{"finder": finder, **kw}))


def _expected_executables(profile: str, overrides: dict[str, str]) -> list[str]:
    """The profile's nodes, then robot_state_publisher unless it is off (real profiles: off by
    default, the robot runs its own) and rviz2 when asked."""
    resolved = resolve_profile(profile, {k: v for k, v in overrides.items() if k != "profile"})
    extra = [n for n in ("robot_state_publisher", "rviz") if resolved.arguments[n]]
    return [n.executable for n in resolved.nodes] + [{"rviz": "rviz2"}.get(n, n) for n in extra]


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_one_launch_file_runs_every_profile_and_the_aliases_run_the_same(profile, tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch)
    generic = _load("refine").generate_launch_description()
    alias = _load(profile).generate_launch_description()
    overrides = {"rviz": "false", "run_dir": "/tmp/launched"}
    _context, via_generic = _evaluate(generic, {"profile": profile, **overrides})
    _context, via_alias = _evaluate(alias, overrides)
    for actions in (via_generic, via_alias):
        nodes = [a for a in actions if isinstance(a, Node)]
        assert [Path(a.node_executable).name for a in nodes] == _expected_executables(profile, overrides)
    assert [Path(a.node_executable).name for a in via_generic if isinstance(a, Node)] == \
        [Path(a.node_executable).name for a in via_alias if isinstance(a, Node)]


def test_the_generic_launch_file_declares_every_profile_argument_and_needs_a_profile(tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch)
    description = _load("refine").generate_launch_description()
    declared = {e.name: e for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    every = {a.name for name in ALL_PROFILES for a in bringup.launch_arguments(name)}
    assert set(declared) == {"profile", *every}
    assert declared["profile"].choices == sorted(ALL_PROFILES)
    assert declared["profile"].default_value is None, "no default: ros2 launch asks for the profile"
    assert all(declared[n].default_value is not None for n in every), "'' = the chosen profile's default"
    assert "profiles arm_real" in declared["dry_run"].description
    with pytest.raises(RuntimeError, match='launch argument "profile"'):
        _evaluate(description, {})


def test_arguments_the_profile_lacks_are_reported_and_ignored(tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch)
    generic = _load("refine").generate_launch_description()
    _context, actions = _evaluate(generic, {"profile": "car_sim", "dry_run": "false", "rviz": "false"})
    assert [Path(a.node_executable).name for a in actions if isinstance(a, Node)] == \
        _expected_executables("car_sim", {"rviz": "false"})
    overrides, ignored = bringup.launch_overrides("car_sim", {"profile": "car_sim", "dry_run": "false", "rviz": ""})
    assert overrides == {} and ignored == ["dry_run"]
    with pytest.raises(bringup.ProfileError, match="unknown driver 'nope'"):  # passed through to bringup
        _evaluate(generic, {"profile": "car_sim", "driver": "nope"})


@pytest.mark.parametrize("profile", PROFILES)
def test_launch_file_builds_the_profile_node_set(profile, tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch)
    description = _load(profile).generate_launch_description()
    assert isinstance(description, launch.LaunchDescription)
    declared = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    required = {"analyst", "run_dir", "max_rounds", "diagnostic_episodes", "max_steps", "rviz", "robot_state_publisher",
                "keep_alive"}
    if profile.endswith("_real"):
        required.add("dry_run")
    assert required <= declared

    overrides = {"max_rounds": "5", "rviz": "false"}
    context, actions = _evaluate(description, overrides)
    nodes = [a for a in actions if isinstance(a, Node)]
    handlers = [a for a in actions if isinstance(a, RegisterEventHandler)]
    expected = resolve_profile(profile, overrides)
    executables = [Path(a.node_executable).name for a in nodes]
    assert executables == _expected_executables(profile, overrides)
    assert all(Path(a.node_executable).is_absolute() for a in nodes), "found and checked before the launch"
    # every required node ends the launch when it exits; robot_state_publisher does not
    assert len(handlers) == len(expected.nodes)

    context.launch_configurations.update({"rviz": "true", "keep_alive": "true"})
    opaque = [e for e in description.entities if isinstance(e, OpaqueFunction)][0]
    actions = opaque.execute(context)
    assert "rviz2" in [Path(a.node_executable).name for a in actions if isinstance(a, Node)]
    assert len([a for a in actions if isinstance(a, RegisterEventHandler)]) == len(expected.nodes) - 1, \
        "keep_alive: the analysis node's exit no longer ends the launch"


def test_missing_optional_nodes_are_skipped_and_missing_required_ones_start_nothing(tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch, missing=("rviz2", "robot_state_publisher"))
    _context, actions = _evaluate(_load("car_sim").generate_launch_description(), {})
    names = [Path(a.node_executable).name for a in actions if isinstance(a, Node)]
    assert names == ["sim_node", "learner_node", "rollout_logger", "analysis_node"]

    _fake_install(tmp_path, monkeypatch, missing=("learner_node",))
    with pytest.raises(bringup.LaunchCheckError, match="nothing was started"):
        _evaluate(_load("car_sim").generate_launch_description(), {})


@pytest.mark.parametrize("profile", RECORD_PROFILES)
def test_record_demo_launch_files_build_and_end_with_the_recorder(profile, tmp_path, monkeypatch):
    _fake_install(tmp_path, monkeypatch)
    description = _load(profile).generate_launch_description()
    declared = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    assert {"run_dir", "rviz", "robot_state_publisher", "keep_alive"} <= declared
    _context, actions = _evaluate(description, {"rviz": "false"})
    names = [Path(a.node_executable).name for a in actions if isinstance(a, Node)]
    assert "demo_recorder" in names and "safety_node" in names
    ours = [n for n in names if n != "robot_state_publisher"]
    assert len([a for a in actions if isinstance(a, RegisterEventHandler)]) == len(ours), \
        "every node but robot_state_publisher ends the launch when it exits (the recorder: when it is done)"
