"""What a person standing by the track sees, and the car task's figures, from the twin's ground
truth (no ROS): published by `car_twin` on `~/scene` (the car now) and `~/scene_layout` (the
track, once per reset) for a teleoperator and for the evaluation of live episodes, and read by
no node of the robot's graph (its bridge sees the odometry, the ERPM and the detector's tiles).

Poses are metres and radians in the `odom` frame (the car's pose on the start line: x forward,
y left, counter-clockwise positive), exact; the track is its centre line in that frame, in
driving order from the start line."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def _odom(twin: Any, world_x: float, world_y: float) -> tuple[float, float]:
    """A simulator world point in the odom frame, metres (as `CarTwin.pose` maps the car)."""
    x0, y0, a0 = twin._origin
    dx, dy = world_x - x0, world_y - y0
    fx, fy = -math.sin(a0), math.cos(a0)
    m = twin.metres_per_unit
    return (dx * fx + dy * fy) * m, (-dx * fy + dy * fx) * m


def _distance_to_loop(points: np.ndarray, here: np.ndarray) -> float:
    """Distance from `here` to the closed polyline through `points`."""
    a, b = points, np.roll(points, -1, axis=0)
    ab = b - a
    t = np.clip(np.einsum("ij,ij->i", here - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-12), 0.0, 1.0)
    return float(np.min(np.linalg.norm(a + t[:, None] * ab - here, axis=1)))


def car_layout(twin: Any) -> dict[str, Any]:
    """The track as a person sees it: the centre line (odom frame, m) and the road's width."""
    centre = [[round(v, 4) for v in _odom(twin, float(t[2]), float(t[3]))] for t in twin.env.track]
    return {"centre_line": centre, "road_width": twin.config.road_width_m, "tiles": len(twin.env.track)}


def car_scene(twin: Any) -> dict[str, Any]:
    """The car now: pose and forward speed, the tiles visited of the track's, whether the lap
    closed or the car left the playfield since the last reset, and its distance from the centre
    line (m; beyond half the road's width it is on the grass)."""
    x, y, yaw = twin.pose()
    status = twin.status()
    hull = twin.env.car.hull
    here = np.array([float(hull.position[0]), float(hull.position[1])])
    track = np.array([(float(t[2]), float(t[3])) for t in twin.env.track])
    off = _distance_to_loop(track, here) * twin.metres_per_unit
    return {"pose": [round(x, 4), round(y, 4), round(yaw, 4)], "speed": round(twin.forward_speed(), 4),
            "tiles_visited": int(status["tiles_visited"]), "tiles": int(status["track_tiles"]),
            "lap": bool(status["lap_completed"]), "left_playfield": bool(status["left_playfield"]),
            "off_centre": round(off, 4)}
