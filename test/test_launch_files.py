"""Each launch file imports, declares its arguments and, evaluated in a launch context, yields
the profile's nodes plus robot_state_publisher and (when rviz:=true) rviz2. Needs the real
`launch` / `launch_ros` packages, which exist in a ROS 2 install but not as PyPI wheels."""

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

from launch.actions import DeclareLaunchArgument, OpaqueFunction  # noqa: E402
from launch_ros.actions import Node  # noqa: E402

from refine_ros.bringup import resolve_profile  # noqa: E402

LAUNCH_DIR = Path(__file__).resolve().parents[1] / "launch"
PROFILES = ("door_sim", "car_sim", "pendulum_sim", "arm_real", "rc_car_real")


def _load(profile: str):
    path = LAUNCH_DIR / f"{profile}.launch.py"
    spec = importlib.util.spec_from_file_location(f"launch_{profile}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _evaluate(description, overrides: dict[str, str]):
    context = launch.LaunchContext()
    for entity in description.entities:
        if isinstance(entity, DeclareLaunchArgument):
            entity.visit(context)  # sets the default
    context.launch_configurations.update(overrides)
    opaque = [e for e in description.entities if isinstance(e, OpaqueFunction)]
    assert len(opaque) == 1
    return context, opaque[0].execute(context)


@pytest.mark.parametrize("profile", PROFILES)
def test_launch_file_builds_the_profile_node_set(profile):
    description = _load(profile).generate_launch_description()
    assert isinstance(description, launch.LaunchDescription)
    declared = {e.name for e in description.entities if isinstance(e, DeclareLaunchArgument)}
    required = {"analyst", "run_dir", "rounds", "rviz", "episodes"}
    if profile.endswith("_real"):
        required.add("dry_run")
    assert required <= declared

    overrides = {"rounds": "5", "rviz": "false"}
    context, actions = _evaluate(description, overrides)
    assert all(isinstance(a, Node) for a in actions)
    expected = resolve_profile(profile, overrides)
    executables = [a.node_executable for a in actions]
    assert executables[: len(expected.nodes)] == [n.executable for n in expected.nodes]
    assert "robot_state_publisher" in executables
    rviz = [a for a in actions if a.node_executable == "rviz2"]
    assert len(rviz) == 1 and rviz[0].condition.evaluate(context) is False

    context.launch_configurations["rviz"] = "true"
    assert rviz[0].condition.evaluate(context) is True
