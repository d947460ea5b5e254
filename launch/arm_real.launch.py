"""Door opening on a real arm (safety on, dry_run:=true by default).

`ros2 launch refine_ros arm_real.launch.py [rviz:=false] [rounds:=N] ...` — the node set,
parameters and remappings come from config/arm_real.yaml through refine_ros.bringup, the same
source `refine up arm_real` uses, so the two cannot drift apart.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("arm_real")
