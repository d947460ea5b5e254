"""What a viewer draws for the car: its odometry, wheels and planar pose (the joints of
urdf/rc_car.urdf), the centreline ahead, the car body, the tiles the policy sees, a trail
coloured by speed, and the whole track once per episode (curb tiles red); the hooks that
`refine_core.tasks.view` looks for.

The track geometry is cached by the env for the episode, so a scene costs a few hundred
microseconds, far less than a Box2D step.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from refine_core.tasks.scene import Joints, Odometry, Pose, Scene, Shape, TrailPoint

WHEEL_JOINTS = (
    "front_left_wheel_joint", "front_right_wheel_joint",
    "rear_left_wheel_joint", "rear_right_wheel_joint",
)  # fmt: skip
POSE_JOINTS = ("car_x", "car_y", "car_yaw", "front_left_steer_joint")
TRACK_AHEAD = 24  # centreline points on the path (twice the tiles the policy sees)
SEEN_TILES = 12
BODY_SIZE = (4.6, 2.0, 1.0)  # world units: about the Box2D hull's footprint
SPEED_FOR_RED = 100.0  # world units / s at the hottest trail colour
ROAD = (0.42, 0.42, 0.42, 1.0)
CURB = (0.85, 0.15, 0.15, 1.0)
CAMERA_FRAME = "camera_link"  # urdf/rc_car.urdf's camera, looking down at the car


def scene(env: Any) -> Scene:
    base = env.unwrapped
    state = base.car_state()
    geometry = base.track_geometry()
    x, y, speed = state["x"], state["y"], state["speed"]
    yaw = state["angle"] + math.pi / 2.0  # Box2D's 0 faces +y; REP 103's x is forward
    cos, sin = math.cos(yaw), math.sin(yaw)
    forward = cos * state["vx"] + sin * state["vy"]
    left = -sin * state["vx"] + cos * state["vy"]
    phases = [float(p) % (2.0 * math.pi) for p in state["wheel_phases"]]

    n = len(geometry)
    ahead = (base.track_index + np.arange(min(TRACK_AHEAD, n))) % n
    points = geometry.points[ahead]
    step = points - geometry.points[(ahead - 1) % n]
    half_yaw = np.arctan2(step[:, 1], step[:, 0]) / 2.0  # each point faces along the road
    path = tuple(
        Pose((px, py, 0.0), (0.0, 0.0, qz, qw))
        for px, py, qz, qw in zip(points[:, 0].tolist(), points[:, 1].tolist(),
                                  np.sin(half_yaw).tolist(), np.cos(half_yaw).tolist(), strict=True)
    )
    seen = points[:SEEN_TILES].tolist()
    return Scene(
        odometry={"odom": Odometry(Pose.planar(x, y, yaw), (forward, left, 0.0),
                                   (0.0, 0.0, state["angular_velocity"]))},
        joint_sets={"wheel_speeds": Joints(WHEEL_JOINTS, velocities=tuple(state["wheel_omegas"]))},
        paths={"track_ahead": path},
        # Box2D's wheel joint angle is counter-clockwise positive, as the URDF's steer joint
        joints=Joints((*POSE_JOINTS, *WHEEL_JOINTS), (x, y, yaw, state["steer"], *phases)),
        shapes=(
            Shape("car", "box", Pose.planar(x, y, yaw, z=0.5), BODY_SIZE, (0.8, 0.1, 0.1, 1.0)),
            Shape("seen_tiles", "sphere_list", scale=(0.8, 0.8, 0.8), colour=(0.2, 0.8, 1.0, 0.9),
                  points=tuple((px, py, 0.2) for px, py in seen)),
        ),
        trail=TrailPoint((x, y, 0.1), value=speed, width=0.6, hot=SPEED_FOR_RED),
    )


def static_shapes(env: Any) -> tuple[Shape, ...]:
    """The whole track as two triangles per tile."""
    geometry = env.unwrapped.track_geometry()
    points: list[tuple[float, float, float]] = []
    colours: list[tuple[float, float, float, float]] = []
    for polygon, border in zip(geometry.polygons, geometry.border, strict=True):
        a, b, c, d = ((float(p[0]), float(p[1]), 0.0) for p in polygon)
        points.extend((a, b, c, a, c, d))
        colours.extend(((CURB if border > 0.5 else ROAD),) * 6)
    return (Shape("track", "triangle_list", points=tuple(points), colours=tuple(colours)),)
