"""What a viewer draws for the door: gripper, handle and target poses, the arm, claw and door
joints of urdf/door_scene.urdf, the door panel, handle, target and gripper as shapes (the
gripper blue when open, red when closed), an arrow from the handle to the target, and the
gripper's trail.

From a logged observation alone (no simulator) only the gripper, handle and target poses are
known; `scene_from_observation` gives those. These are the hooks `refine_core.tasks.view` looks
for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from refine_core.tasks.door_open.env import ARM_JOINTS, CLAW_JOINTS
from refine_core.tasks.scene import (
    Joints,
    Pose,
    Scene,
    Shape,
    TrailPoint,
    normalised,
    vec3,
    yaw_quaternion,
)

DOOR_JOINTS = ("door_x", "door_y", "door_z", "door_hinge")
DOOR_AXIS_OFFSET = (-0.185, -0.1, 0.0)  # hinge axis from the door's position
DOOR_PANEL_HALF = 0.185  # half the panel's width, from the axis to its middle
FINGER_GAP_FULL = 0.1  # m between the claws when fully open (Meta-World's normaliser)
GREEN = (0.1, 0.9, 0.2)


def _xyzw(wxyz) -> tuple[float, float, float, float]:
    w, x, y, z = (float(v) for v in wxyz)
    return normalised((x, y, z, w))


def scene(env: Any) -> Scene:
    base = env.unwrapped
    gripper = vec3(base.gripper_position())
    handle = vec3(base.handle_position())
    target = vec3(base.target_position())
    door_quat = _xyzw(base.door_quaternion())
    hinge = vec3(base.door_configuration()[:3])
    angle = base.door_angle()
    right, left = base.finger_positions()
    opening = min(math.dist(right, left) / FINGER_GAP_FULL, 1.0)

    axis = (hinge[0] + DOOR_AXIS_OFFSET[0], hinge[1] + DOOR_AXIS_OFFSET[1], hinge[2] + DOOR_AXIS_OFFSET[2])
    centre = (axis[0] + DOOR_PANEL_HALF * math.cos(angle), axis[1] + DOOR_PANEL_HALF * math.sin(angle), axis[2])
    grip_colour = (0.2, 0.5, 1.0, 1.0) if opening > 0.5 else (1.0, 0.3, 0.1, 1.0)
    joints = Joints(
        (*ARM_JOINTS, *CLAW_JOINTS, *DOOR_JOINTS),
        (*base.arm_joint_positions().tolist(), *base.claw_joint_positions().tolist(), *hinge, float(angle)),
    )
    return Scene(
        poses={"gripper_pose": Pose(gripper), "handle_pose": Pose(handle, door_quat),
               "target_pose": Pose(target)},
        joints=joints,
        shapes=(
            Shape("door", "box", Pose(centre, yaw_quaternion(angle)),
                  (2 * DOOR_PANEL_HALF, 0.02, 0.246), (0.62, 0.45, 0.28, 0.8)),
            Shape("handle", "box", Pose(handle, door_quat), (0.03, 0.06, 0.03), (0.85, 0.7, 0.25, 1.0)),
            Shape("target", "sphere", Pose(target), (0.04, 0.04, 0.04), (*GREEN, 0.7)),
            Shape("gripper", "box", Pose(gripper), (0.03, 0.02 + 0.06 * opening, 0.05), grip_colour),
            Shape("handle_to_target", "arrow", scale=(0.005, 0.01, 0.01), colour=(*GREEN, 0.5),
                  points=(handle, target)),
        ),
        trail=TrailPoint(gripper, width=0.004, colour=(1.0, 1.0, 0.2, 0.9)),
    )


def scene_from_observation(row: Mapping[str, float]) -> Scene | None:
    """Gripper, handle (oriented by the door quaternion) and target poses from a logged row;
    a pose whose coordinates are missing or not finite is left out."""

    def point(prefix: str) -> tuple[float, float, float] | None:
        values = [row.get(f"{prefix}_{axis}") for axis in "xyz"]
        if all(v is not None and math.isfinite(v) for v in values):
            return vec3(values)
        return None

    poses: dict[str, Pose] = {}
    for name, prefix in (("gripper_pose", "gripper"), ("handle_pose", "handle"), ("target_pose", "target")):
        xyz = point(prefix)
        if xyz is None:
            continue
        orientation = (0.0, 0.0, 0.0, 1.0)
        if name == "handle_pose":
            orientation = normalised([row.get(f"door_q{a}", math.nan) for a in "xyzw"])
        poses[name] = Pose(xyz, orientation)
    return Scene(poses=poses) if poses else None


def camera_env(width: int, height: int) -> Any:
    """MuJoCo renders at the requested size; "corner" frames the arm and the door."""
    import gymnasium as gym

    from refine_core.tasks.door_open import ENTRY

    return gym.make(ENTRY.env_id, render_mode="rgb_array", width=width, height=height, camera_name="corner")
