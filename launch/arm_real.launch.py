"""Door opening on a real arm (safety on, dry_run:=true by default).

`ros2 launch refine_ros arm_real.launch.py [rviz:=false] ...`.

Thin on purpose: the node set, parameters and remappings come from config/arm_real.yaml via
refine_ros.bringup, the same source `refine up arm_real` uses, so the two cannot drift apart.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from refine_ros import bringup

PROFILE = "arm_real"


def _profile_nodes(context, *args, **kwargs):
    names = [arg.name for arg in bringup.launch_arguments(PROFILE)]
    overrides = {name: LaunchConfiguration(name).perform(context) for name in names}
    profile = bringup.resolve_profile(PROFILE, overrides)
    actions = [
        Node(
            package=spec.package,
            executable=spec.executable,
            name=spec.name,
            parameters=[spec.parameters],
            remappings=list(spec.remappings),
            output="screen",
        )
        for spec in profile.nodes
    ]
    if profile.urdf is not None:
        actions.append(
            Node(
                package="robot_state_publisher",
                executable="robot_state_publisher",
                name="robot_state_publisher",
                parameters=[{"robot_description": profile.robot_description()}],
                output="screen",
            )
        )
    actions.append(
        Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            arguments=["-d", str(profile.rviz_config)],
            condition=IfCondition(LaunchConfiguration("rviz")),
            output="log",
        )
    )
    return actions


def generate_launch_description() -> LaunchDescription:
    declared = [
        DeclareLaunchArgument(arg.name, default_value=arg.default_text, description=arg.description)
        for arg in bringup.launch_arguments(PROFILE)
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=_profile_nodes)])
