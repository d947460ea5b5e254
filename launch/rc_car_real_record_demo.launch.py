"""Record a teleoperated demonstration for rc_car_real (config/rc_car_real_record_demo.yaml).

`ros2 launch refine_ros rc_car_real_record_demo.launch.py [run_dir:=DIR] dry_run:=false ...` — drive on
refine/teleop_action (a gamepad through `ros2 run joy game_controller_node`, or
`ros2 run refine_ros keyboard_teleop --ros-args -p task:=...` in a terminal of its own), then
call demo/start, demo/stop and demo/keep. The node set comes from the profile through
refine_ros.bringup, the same source `refine up rc_car_real_record_demo` uses.
"""

from refine_ros.launch_support import launch_description


def generate_launch_description():
    return launch_description("rc_car_real_record_demo")
