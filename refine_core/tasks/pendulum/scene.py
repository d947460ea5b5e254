"""What a viewer draws for the pendulum: the joint of urdf/pendulum.urdf, the pivot, rod and
bob (green while balanced), an arrow at the bob for the motor torque, and the bob's trail
coloured by angular speed.

The pendulum swings in the world x-z plane about a pivot 1.2 m above the ground; the joint's
axis is -y, so a positive (counter-clockwise) angle moves the bob towards -x, as seen from -y.
Angle and velocity are the whole state, so a logged observation gives the same picture
without the torque arrow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from refine_core.tasks.pendulum.env import LENGTH, MAX_SPEED, MAX_TORQUE, UPRIGHT_ANGLE
from refine_core.tasks.scene import Joints, Pose, Scene, Shape, TrailPoint, axis_quaternion

JOINT = "pendulum_joint"
PIVOT = (0.0, 0.0, 1.2)
AXIS = (0.0, -1.0, 0.0)
TORQUE_ARROW_M = 0.4  # arrow length at full torque
BALANCED = (0.1, 0.8, 0.2, 1.0)
SWINGING = (1.0, 0.55, 0.1, 1.0)


def tip(angle: float) -> tuple[float, float, float]:
    return (PIVOT[0] - LENGTH * math.sin(angle), PIVOT[1], PIVOT[2] + LENGTH * math.cos(angle))


def pendulum_scene(angle: float, velocity: float, torque: float | None = None) -> Scene:
    end = tip(angle)
    middle = tuple((p + q) / 2.0 for p, q in zip(PIVOT, end, strict=True))
    shapes = [
        Shape("pivot", "sphere", Pose(PIVOT), (0.06, 0.06, 0.06), (0.3, 0.3, 0.3, 1.0)),
        Shape("rod", "cylinder", Pose(middle, axis_quaternion(AXIS, angle)), (0.04, 0.04, LENGTH),
              (0.7, 0.7, 0.75, 1.0)),
        Shape("bob", "sphere", Pose(end), (0.12, 0.12, 0.12),
              BALANCED if abs(angle) < UPRIGHT_ANGLE else SWINGING),
    ]
    if torque is not None:
        # a positive torque pushes the bob along the direction of increasing angle
        along = (-math.cos(angle), 0.0, -math.sin(angle))
        length = TORQUE_ARROW_M * torque / MAX_TORQUE
        head = tuple(e + length * a for e, a in zip(end, along, strict=True))
        shapes.append(Shape("torque", "arrow", scale=(0.02, 0.05, 0.05), colour=(0.9, 0.2, 0.9, 0.9),
                            points=(end, head)))
    return Scene(
        joints=Joints((JOINT,), (float(angle),), (float(velocity),)),
        shapes=tuple(shapes),
        trail=TrailPoint(end, value=abs(float(velocity)), width=0.02, hot=MAX_SPEED),
    )


def scene(env: Any) -> Scene:
    state = env.unwrapped.pendulum_state()
    return pendulum_scene(state["angle"], state["angular_velocity"], state["torque"])


def scene_from_observation(row: Mapping[str, float]) -> Scene | None:
    angle, velocity = row.get("angle"), row.get("angular_velocity")
    if angle is None or velocity is None or not (math.isfinite(angle) and math.isfinite(velocity)):
        return None
    return pendulum_scene(angle, velocity)
