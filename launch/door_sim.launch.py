"""Door opening in simulation (Meta-World door-open-v3, MuJoCo).

`ros2 launch refine_ros door_sim.launch.py [rviz:=false] [rounds:=N] ...` — the node set,
parameters and remappings come from config/door_sim.yaml through refine_ros.bringup, the same
source `refine up door_sim` uses, so the two cannot drift apart.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("door_sim")
