"""How an operator drives the pendulum's motor (plain data that `refine_ros.teleop.maps` reads by
task name): the gamepad axis (game_controller_node's layout, named in `refine_ros.teleop.maps.AXES`),
the scale and offset of `action = offset + scale * axis`, and the keys."""

# torque: left stick, full deflection = the task's largest torque
GAMEPAD = {"torque": ("left_x", -2.0, 0.0)}
KEYS = {"a": ("torque", -2.0), "d": ("torque", 2.0)}
KEYS_HELP = "a/d: torque -/+"
