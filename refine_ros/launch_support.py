"""The one piece of launch-API code the four launch files share.

Imported only by launch files (it needs ROS 2's `launch` / `launch_ros`, which are not on PyPI);
everything a profile means is decided by `bringup`, which is importable and tested anywhere.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.launch_description import LaunchDescription
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from refine_ros import bringup


def _profile_nodes(context, profile_name: str):
    names = [arg.name for arg in bringup.launch_arguments(profile_name)]
    overrides = {name: LaunchConfiguration(name).perform(context) for name in names}
    profile = bringup.resolve_profile(profile_name, overrides)
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


def launch_description(profile_name: str) -> LaunchDescription:
    """The launch description of one profile: its arguments, then its nodes resolved at launch
    time (so argument values given on the command line reach the profile)."""
    declared = [
        DeclareLaunchArgument(arg.name, default_value=arg.default_text, description=arg.description)
        for arg in bringup.launch_arguments(profile_name)
    ]
    return LaunchDescription([*declared, OpaqueFunction(function=_profile_nodes, args=[profile_name])])
