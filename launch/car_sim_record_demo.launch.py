"""Record a teleoperated demonstration for car_sim (config/car_sim_record_demo.yaml).

`ros2 launch refine_ros car_sim_record_demo.launch.py [run_dir:=DIR] ...` — drive on
refine/teleop_action (a gamepad through `ros2 run joy game_controller_node`, or
`ros2 run refine_ros keyboard_teleop --ros-args -p task:=...` in a terminal of its own), then
call demo/start, demo/stop and demo/keep. The node set comes from the profile through
refine_ros.bringup, the same source `refine up car_sim_record_demo` uses.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("car_sim_record_demo")
