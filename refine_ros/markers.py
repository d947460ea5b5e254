"""RViz markers for the two scenes: what a person watching a rollout needs to see at a glance.

Door: the door panel, its handle, the target the handle should reach, the gripper (open or
closed), and the gripper's trail. Car: the track tiles (curb tiles red), the tiles the policy
sees, the car, and its trail coloured by speed (blue slow -> red fast).

Builders are pure functions from a scene (refine_ros.adapters) to a MarkerArray; the sim node
or a bridge decides how often to publish. Markers never expire (lifetime 0) and are replaced
by id, so a best-effort drop only delays the picture.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from refine_ros.adapters import CarScene, DoorScene, point, wxyz_quaternion, yaw_quaternion

TRAIL_POINTS = 2000
DOOR_AXIS_OFFSET = np.array([-0.185, -0.1, 0.0])  # hinge axis from the door's position
DOOR_PANEL_HALF = 0.185  # half the panel's width, from the axis to its middle
SPEED_FOR_RED = 100.0  # world units / s mapped to the hottest trail colour


class Trail:
    """The recent path of the gripper or car, bounded so a long episode stays cheap to draw."""

    def __init__(self, maxlen: int = TRAIL_POINTS) -> None:
        self.points: deque[tuple[float, float, float]] = deque(maxlen=maxlen)
        self.speeds: deque[float] = deque(maxlen=maxlen)

    def add(self, xyz: Sequence[float], speed: float = 0.0) -> None:
        self.points.append((float(xyz[0]), float(xyz[1]), float(xyz[2]) if len(xyz) > 2 else 0.0))
        self.speeds.append(float(speed))

    def clear(self) -> None:
        self.points.clear()
        self.speeds.clear()

    def __len__(self) -> int:
        return len(self.points)


def rgba(r: float, g: float, b: float, a: float = 1.0) -> ColorRGBA:
    return ColorRGBA(r=float(r), g=float(g), b=float(b), a=float(a))


def speed_colour(speed: float, hottest: float = SPEED_FOR_RED) -> ColorRGBA:
    """Blue (stopped) through green to red (at `hottest` and above)."""
    s = min(max(speed / hottest, 0.0), 1.0)
    return rgba(min(1.0, 2.0 * s), 1.0 - abs(2.0 * s - 1.0), min(1.0, 2.0 * (1.0 - s)))


def _marker(header: Header, ns: str, mid: int, kind: int, colour: ColorRGBA,
            scale: Sequence[float], pose: Pose | None = None) -> Marker:
    m = Marker(header=header, ns=ns, id=mid, type=kind, action=Marker.ADD)
    m.pose = pose or Pose(orientation=Quaternion(w=1.0))
    m.scale = Vector3(x=float(scale[0]), y=float(scale[1]), z=float(scale[2]))
    m.color = colour
    m.frame_locked = False
    return m


def _trail_marker(header: Header, ns: str, trail: Trail, width: float,
                  colour: ColorRGBA | None = None) -> Marker:
    m = _marker(header, ns, 0, Marker.LINE_STRIP, colour or rgba(1.0, 1.0, 0.2), (width, 0.0, 0.0))
    m.points = [Point(x=p[0], y=p[1], z=p[2]) for p in trail.points]
    if colour is None:
        m.colors = [speed_colour(s) for s in trail.speeds]
    if len(m.points) < 2:  # RViz rejects a strip with fewer than two points
        m.action = Marker.DELETE
        m.points = []
        m.colors = []
    return m


def door_markers(scene: DoorScene, trail: Trail, stamp: Time, frame_id: str = "world") -> MarkerArray:
    header = Header(stamp=stamp, frame_id=frame_id)
    markers = []
    # Meta-World's door: the panel turns about an axis offset from the door's position.
    axis = np.asarray(scene.hinge, float) + DOOR_AXIS_OFFSET
    angle = float(scene.door_angle)
    centre = axis + DOOR_PANEL_HALF * np.array([math.cos(angle), math.sin(angle), 0.0])
    panel_pose = Pose(position=point(centre), orientation=yaw_quaternion(angle))
    markers.append(_marker(header, "door", 0, Marker.CUBE, rgba(0.62, 0.45, 0.28, 0.8),
                           (2 * DOOR_PANEL_HALF, 0.02, 0.246), panel_pose))
    handle = np.asarray(scene.handle, float)
    markers.append(_marker(header, "handle", 0, Marker.CUBE, rgba(0.85, 0.7, 0.25),
                           (0.03, 0.06, 0.03),
                           Pose(position=point(handle), orientation=wxyz_quaternion(scene.door_quat_wxyz))))
    markers.append(_marker(header, "target", 0, Marker.SPHERE, rgba(0.1, 0.9, 0.2, 0.7),
                           (0.04, 0.04, 0.04), Pose(position=point(scene.target), orientation=Quaternion(w=1.0))))
    opening = 0.02 + 0.06 * scene.gripper_open
    grip_colour = rgba(0.2, 0.5, 1.0) if scene.gripper_open > 0.5 else rgba(1.0, 0.3, 0.1)
    markers.append(_marker(header, "gripper", 0, Marker.CUBE, grip_colour, (0.03, opening, 0.05),
                           Pose(position=point(scene.gripper), orientation=Quaternion(w=1.0))))
    link = _marker(header, "handle_to_target", 0, Marker.ARROW, rgba(0.1, 0.9, 0.2, 0.5), (0.005, 0.01, 0.01))
    link.points = [point(handle), point(scene.target)]
    markers.append(link)
    markers.append(_trail_marker(header, "trail", trail, 0.004, rgba(1.0, 1.0, 0.2, 0.9)))
    return MarkerArray(markers=markers)


def track_markers(polygons: np.ndarray, borders: np.ndarray, stamp: Time,
                  frame_id: str = "world") -> MarkerArray:
    """The whole track as two triangles per tile; fixed for an episode, so sent now and then."""
    header = Header(stamp=stamp, frame_id=frame_id)
    m = _marker(header, "track", 0, Marker.TRIANGLE_LIST, rgba(1, 1, 1), (1.0, 1.0, 1.0))
    road, curb = rgba(0.42, 0.42, 0.42), rgba(0.85, 0.15, 0.15)
    for poly, border in zip(polygons, borders, strict=True):
        a, b, c, d = (Point(x=float(p[0]), y=float(p[1]), z=0.0) for p in poly)
        colour = curb if border > 0.5 else road
        m.points.extend((a, b, c, a, c, d))
        m.colors.extend((colour,) * 6)
    return MarkerArray(markers=[m])


def car_markers(scene: CarScene, trail: Trail, stamp: Time, frame_id: str = "world",
                seen_tiles: int = 12) -> MarkerArray:
    header = Header(stamp=stamp, frame_id=frame_id)
    body = _marker(header, "car", 0, Marker.CUBE, rgba(0.8, 0.1, 0.1), (4.6, 2.0, 1.0),
                   Pose(position=Point(x=scene.x, y=scene.y, z=0.5), orientation=yaw_quaternion(scene.yaw)))
    markers = [body]
    n = len(scene.centreline)
    if n:
        idx = (scene.track_index + np.arange(min(seen_tiles, n))) % n
        seen = _marker(header, "seen_tiles", 0, Marker.SPHERE_LIST, rgba(0.2, 0.8, 1.0, 0.9), (0.8, 0.8, 0.8))
        seen.points = [Point(x=float(p[0]), y=float(p[1]), z=0.2) for p in scene.centreline[idx]]
        markers.append(seen)
    markers.append(_trail_marker(header, "trail", trail, 0.6))
    return MarkerArray(markers=markers)
