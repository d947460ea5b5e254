"""Every profile through one launch file:

    ros2 launch refine_ros refine.launch.py profile:=door_sim [max_rounds:=5] [rviz:=false] ...

The profile (`config/<profile>.yaml`) gives the node set, parameters, remappings and the
arguments it takes; `--show-args` lists every profile's arguments. All the logic lives in
refine_ros.bringup (tested without `launch`); `refine up PROFILE` runs the same profile.
"""

from refine_ros.bringup.launch_support import launch_description


def generate_launch_description():
    return launch_description()
