"""A toy robot kept outside refine_ros, to show that a robot is one folder: a base that only
turns in place (one axis), behind ros2_control's diff_drive_controller interfaces
(geometry_msgs/TwistStamped on /diff_drive_controller/cmd_vel, nav_msgs/Odometry on
/diff_drive_controller/odom), running the pendulum task (angle = its heading, angular
velocity = its yaw rate, torque -> a yaw-rate command). `robot` is its descriptor,
`spinner_bridge` its bridge, `spinner_twin` its twin (also its fake driver). The test copies
this folder into a temporary directory and installs it as a plug-in."""
