"""Pendulum swing-up in simulation (Gymnasium Pendulum-v1 physics, semantic observation).

`ros2 launch refine_ros pendulum_sim.launch.py [rviz:=false] [rounds:=N] ...` — the node set,
parameters and remappings come from config/pendulum_sim.yaml through refine_ros.bringup, the
same source `refine up pendulum_sim` uses, so the two cannot drift apart.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("pendulum_sim")
