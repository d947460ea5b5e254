"""How an operator drives the door's arm (plain data that `refine_ros.teleop.maps` reads by task
name): per action, the gamepad axis (game_controller_node's layout, named in
`refine_ros.teleop.maps.AXES`), the scale and offset of `action = offset + scale * axis`, and the
keys; the gripper's keys latch (it stays open or closed after the key is let go)."""

# dx: left stick right, dy: left stick forward, dz: right stick up; the gripper follows the
# right trigger: released 1 (open), pressed 0 (closed)
GAMEPAD = {
    "dx": ("left_x", -1.0, 0.0),
    "dy": ("left_y", 1.0, 0.0),
    "dz": ("right_y", 1.0, 0.0),
    "gripper": ("trigger_right", 1.0, 1.0),
}
KEYS = {"d": ("dx", 1.0), "a": ("dx", -1.0), "w": ("dy", 1.0), "s": ("dy", -1.0), "r": ("dz", 1.0),
        "f": ("dz", -1.0)}
LATCHED_KEYS = {"o": ("gripper", 1.0), "c": ("gripper", 0.0)}
REST = {"gripper": 1.0}
"""The command with no key held (actions not named rest at 0)."""
KEYS_HELP = "a/d: -x/+x   w/s: +y/-y (away/toward)   r/f: up/down   o/c: open/close the gripper"
