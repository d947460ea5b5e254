"""`driver:=twin` and `refine up --twin`: a real profile with its physics twin where the
robot's drivers would be, every other node unchanged (no ROS needed: bringup is plain Python)."""

from __future__ import annotations

import pytest

pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")

from refine_ros.bringup import ProfileError, launch_plan, resolve_profile  # noqa: E402
from refine_ros.bringup.up import UpOptions, plan_profile  # noqa: E402
from refine_ros.nodes.registry import NODES  # noqa: E402


@pytest.mark.parametrize("profile, twin, bridge", [
    ("arm_real", "arm_twin", "arm_bridge"), ("rc_car_real", "car_twin", "rc_car_bridge"),
    ("arm_real_record_demo", "arm_twin", "arm_bridge"), ("rc_car_real_record_demo", "car_twin", "rc_car_bridge"),
])
def test_driver_twin_puts_the_robots_twin_before_the_unchanged_profile(profile, twin, bridge):
    hardware = resolve_profile(profile)
    rehearsal = resolve_profile(profile, {"driver": "twin"})
    names = [n.name for n in rehearsal.nodes]
    assert names == [twin, *(n.name for n in hardware.nodes)], "the twin first, then the profile's own nodes"
    assert twin not in {n.name for n in hardware.nodes}, "the hardware default starts no twin"
    spec = rehearsal.node(twin)
    assert (spec.executable, spec.module) == (twin, NODES[twin].module) and spec.module_available()
    for node in hardware.nodes:  # every node keeps its parameters; the arm's bridge reads the twin's target
        expected = dict(node.parameters)
        if node.name == "arm_bridge":
            expected["target_mode"] = "topic"
        assert rehearsal.node(node.name).parameters == expected, node.name
    assert rehearsal.node(bridge).parameters.get("dry_run") is None


def test_driver_is_refused_where_no_hardware_stands_behind_a_bridge_and_when_unknown():
    with pytest.raises(ProfileError, match="no robot bridge"):
        resolve_profile("door_sim", {"driver": "twin"})
    with pytest.raises(ProfileError, match="unknown driver 'gazebo'"):
        resolve_profile("arm_real", {"driver": "gazebo"})


def test_refine_up_twin_is_driver_twin_and_commands_the_twin():
    profile = plan_profile("rc_car_real", UpOptions(twin=True, processes=True))
    assert profile.nodes[0].name == "car_twin"
    assert profile.arguments["driver"] == "twin"
    assert profile.node("safety_node").parameters["dry_run"] is False, "the twin takes the commands"
    plain = plan_profile("rc_car_real", UpOptions(processes=True))
    assert plain.node("safety_node").parameters["dry_run"] is True and "car_twin" not in {n.name for n in plain.nodes}
    with pytest.raises(ProfileError, match="no robot bridge"):
        plan_profile("car_sim", UpOptions(twin=True))


def test_the_launch_finds_the_twins_executable():
    plan = launch_plan(resolve_profile("arm_real", {"driver": "twin", "rviz": "false"}), check_interpreter=False)
    twin = next(n for n in plan.nodes if n.name == "arm_twin")
    assert twin.executable.name == "arm_twin" and twin.command()[-2:] == ["-r", "__node:=arm_twin"]
    assert plan.exit_reason("arm_twin") == "arm_twin exited before the run was over", "a dead twin ends the launch"
