"""Car racing in simulation (Gymnasium CarRacing physics, Box2D).

`ros2 launch refine_ros car_sim.launch.py [rviz:=false] [rounds:=N] ...` — the node set,
parameters and remappings come from config/car_sim.yaml through refine_ros.bringup, the same
source `refine up car_sim` uses, so the two cannot drift apart.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("car_sim")
