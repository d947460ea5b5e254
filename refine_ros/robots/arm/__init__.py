"""An arm that opens the door (task door_open) through MoveIt Servo (Jazzy or Humble) or a
ros2_control forward velocity controller, a Robotiq gripper action and a fiducial marker on the
handle: its units and mappings (`interface`), kinematics for joint-velocity control
(`kinematics`, `tf_buffer`), the bridge and twin nodes (`arm_bridge`, `arm_twin`), the twin's
MuJoCo core and marker tracker (`twin`, `marker`), the hardware stand-in (`fake_driver`), its
benchmark figure (`bench`) and its descriptor (`robot`)."""
