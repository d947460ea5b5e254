"""How an operator drives the car (plain data that `refine_ros.teleop.maps` reads by task name):
per action, the gamepad axis (game_controller_node's layout, named in `refine_ros.teleop.maps.AXES`),
the scale and offset of `action = offset + scale * axis`, and the keys."""

# steer: left stick (negative steer is left, the stick's left is +1); gas: right trigger;
# brake: left trigger (triggers read 0 released, -1 pressed)
GAMEPAD = {
    "steer": ("left_x", -1.0, 0.0),
    "gas": ("trigger_right", -1.0, 0.0),
    "brake": ("trigger_left", -1.0, 0.0),
}
KEYS = {"a": ("steer", -1.0), "d": ("steer", 1.0), "w": ("gas", 1.0), "s": ("brake", 1.0)}
KEYS_HELP = "a/d: steer left/right   w: gas   s: brake"
