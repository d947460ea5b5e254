"""Alias of `ros2 launch refine_ros refine.launch.py profile:=arm_real`, with the profile's own defaults."""

from refine_ros.bringup.launch_support import launch_description


def generate_launch_description():
    return launch_description("arm_real")
