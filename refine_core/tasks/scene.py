"""What a person watching a task should see, as plain data: the vocabulary of `Task.scene`.

Why: the ROS sim node, the MCAP export and any other viewer draw every task from these few
primitives, so a new task brings its own picture without a line changing in them. Nothing here
knows ROS; `refine_ros` turns a scene into messages by one naming rule (each named primitive
becomes the topic ``refine/<name>``; the robot model's joints go to ``joint_states``).

Conventions: world units are the simulator's (metres for MuJoCo), in a right-handed frame with
z up; orientations are unit quaternions in (x, y, z, w) order; colours are (r, g, b, a) in
[0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

Vec3 = tuple[float, float, float]
Quat = tuple[float, float, float, float]
RGBA = tuple[float, float, float, float]

IDENTITY: Quat = (0.0, 0.0, 0.0, 1.0)
ShapeKind = Literal["box", "sphere", "cylinder", "arrow", "line_strip", "sphere_list", "triangle_list"]
SHAPE_KINDS: tuple[str, ...] = ("box", "sphere", "cylinder", "arrow", "line_strip", "sphere_list",
                                "triangle_list")


def vec3(values) -> Vec3:
    """Any 2- or 3-sequence of numbers (a NumPy array too) as a float triple (z = 0 for
    planar points)."""
    v = values.tolist() if hasattr(values, "tolist") else list(values)
    if len(v) == 2:
        return (float(v[0]), float(v[1]), 0.0)
    if len(v) != 3:
        raise ValueError(f"a point needs 2 or 3 coordinates, got {len(v)}")
    return (float(v[0]), float(v[1]), float(v[2]))


def yaw_quaternion(yaw: float) -> Quat:
    """Rotation by `yaw` radians about +z."""
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


def axis_quaternion(axis, angle: float) -> Quat:
    """Rotation by `angle` radians about the unit vector `axis`."""
    x, y, z = vec3(axis)
    s = math.sin(angle / 2.0)
    return (x * s, y * s, z * s, math.cos(angle / 2.0))


def normalised(q) -> Quat:
    """`q` scaled to unit length (identity for a zero or non-finite quaternion)."""
    x, y, z, w = (float(v) for v in q)
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(norm) or norm == 0.0:
        return IDENTITY
    return (x / norm, y / norm, z / norm, w / norm)


@dataclass(frozen=True)
class Pose:
    position: Vec3
    orientation: Quat = IDENTITY

    @classmethod
    def planar(cls, x: float, y: float, yaw: float, z: float = 0.0) -> Pose:
        return cls((float(x), float(y), float(z)), yaw_quaternion(yaw))


ORIGIN = Pose((0.0, 0.0, 0.0))


@dataclass(frozen=True)
class Joints:
    """Named joints with positions (rad or m) and, where known, velocities (rad/s or m/s).
    An empty `positions` or `velocities` means "not reported", never zeros."""

    names: tuple[str, ...]
    positions: tuple[float, ...] = ()
    velocities: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        for label, values in (("positions", self.positions), ("velocities", self.velocities)):
            if values and len(values) != len(self.names):
                raise ValueError(f"{len(values)} joint {label} for {len(self.names)} joint names")


@dataclass(frozen=True)
class Odometry:
    """A moving body: its pose in the world and its velocity in its own frame (x forward)."""

    pose: Pose
    linear: Vec3 = (0.0, 0.0, 0.0)
    angular: Vec3 = (0.0, 0.0, 0.0)
    child_frame: str = "base_link"


@dataclass(frozen=True)
class Shape:
    """One drawable thing. `box`, `sphere`, `cylinder`: `pose` places it, `scale` is its full
    size (x, y, z); `arrow`: from `points[0]` to `points[1]`, `scale` = (shaft diameter, head
    diameter, head length); `line_strip`: `points` joined, `scale[0]` = line width;
    `sphere_list`: one sphere of size `scale` per point; `triangle_list`: each three points a
    triangle. `colours`, if given, colour the points one by one. Shapes with the same `ns` and
    `id` replace each other from one scene to the next."""

    ns: str
    kind: ShapeKind
    pose: Pose = ORIGIN
    scale: Vec3 = (1.0, 1.0, 1.0)
    colour: RGBA = (1.0, 1.0, 1.0, 1.0)
    points: tuple[Vec3, ...] = ()
    colours: tuple[RGBA, ...] = ()
    id: int = 0

    def __post_init__(self) -> None:
        if self.kind not in SHAPE_KINDS:
            raise ValueError(f"shape kind {self.kind!r} not one of {', '.join(SHAPE_KINDS)}")
        if self.colours and len(self.colours) != len(self.points):
            raise ValueError(f"{len(self.colours)} colours for {len(self.points)} points")


@dataclass(frozen=True)
class TrailPoint:
    """Where the thing worth following is now (gripper, car, pendulum tip). A viewer joins
    successive points into a trail `width` wide, in `colour`, or, when `colour` is None,
    coloured by `value` from blue (0) to red (`hot` and above)."""

    position: Vec3
    value: float = 0.0
    width: float = 0.01
    colour: RGBA | None = None
    hot: float = 1.0


@dataclass(frozen=True)
class Scene:
    """One moment of a task as a viewer sees it. Every field is optional; a task fills what
    it has, and fills the same fields at every step (a viewer may set up its outputs from the
    first scene of an episode)."""

    poses: Mapping[str, Pose] = field(default_factory=dict)
    joints: Joints | None = None
    """The robot model's joint state (drives a URDF)."""
    joint_sets: Mapping[str, Joints] = field(default_factory=dict)
    """Other named joint readings, e.g. wheel speeds."""
    odometry: Mapping[str, Odometry] = field(default_factory=dict)
    paths: Mapping[str, tuple[Pose, ...]] = field(default_factory=dict)
    shapes: tuple[Shape, ...] = ()
    trail: TrailPoint | None = None
