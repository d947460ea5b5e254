"""What a person standing at the arm sees, and the door task's figures, from the twin's ground
truth (no ROS): published by `arm_twin` on `~/scene` for a teleoperator and for the evaluation
of live episodes, and read by no node of the robot's graph (its bridge sees TF and the tag).

All positions are metres in the robot's base frame (the twin's `placement` maps the door
scene onto it): the tool, the handle (the door task's features 4-6, exact), the target, the
door's hinge axis; the door's hinge angle (rad, negative while it opens) and whether the door
has opened since the last reset (the door task's success rule)."""

from __future__ import annotations

from typing import Any

import numpy as np

from refine_ros.robots._twin.frames import Pose


def _in_base(placement: Pose, point: Any) -> list[float]:
    p = Pose(tuple(float(v) for v in point), (0.0, 0.0, 0.0, 1.0))
    return [round(float(v), 5) for v in (placement.inverse() * p).position]


def arm_scene(twin: Any, placement: Pose) -> dict[str, Any]:
    """The scene now: tool, gripper opening (m between the pads), handle, target, hinge, the
    door's angle, opened, the handle-target distance (the door task's metric, m)."""
    handle = twin.env.handle_position()
    target = np.asarray(twin.target_position, dtype=float)
    hinge = twin.data.xanchor[twin.model.joint("doorjoint").id]
    return {"tool": _in_base(placement, twin.tool_pose().position), "opening": round(twin.opening(), 5),
            "handle": _in_base(placement, handle), "target": _in_base(placement, target),
            "hinge": _in_base(placement, hinge), "door_angle": round(twin.door_angle(), 5),
            "opened": bool(twin.door_opened),
            "handle_target_distance": round(float(np.linalg.norm(handle - target)), 5)}
