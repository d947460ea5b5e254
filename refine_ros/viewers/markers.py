"""RViz markers from a task's scene shapes: what a person watching a rollout needs to see at a
glance, drawn the same way for every task.

Each `refine_core.tasks.scene.Shape` becomes one Marker (same namespace and id, so a shape
replaces its previous self); the scene's trail point is accumulated in a `Trail` and drawn as a
line strip in its colour or coloured by its value (blue -> red). Builders are pure functions;
the sim node decides how often to publish. Markers never expire (lifetime 0), so a best-effort
drop only delays the picture.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Vector3
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from refine_core.tasks.scene import RGBA, Scene, Shape, TrailPoint
from refine_ros.viewers.scene_topics import MARKER_TYPES
from refine_ros.wire.adapters import pose

TRAIL_POINTS = 2000
TRAIL_NS = "trail"


class Trail:
    """The recent path of the followed point, bounded so a long episode stays cheap to draw;
    it keeps the style of the latest trail point."""

    def __init__(self, maxlen: int = TRAIL_POINTS) -> None:
        self.points: deque[tuple[float, float, float]] = deque(maxlen=maxlen)
        self.values: deque[float] = deque(maxlen=maxlen)
        self.style: TrailPoint | None = None

    def add(self, point: TrailPoint) -> None:
        self.points.append(tuple(float(v) for v in point.position))
        self.values.append(float(point.value))
        self.style = point

    def clear(self) -> None:
        self.points.clear()
        self.values.clear()

    def __len__(self) -> int:
        return len(self.points)


def rgba(colour: RGBA) -> ColorRGBA:
    r, g, b, a = (float(v) for v in colour)
    return ColorRGBA(r=r, g=g, b=b, a=a)


def value_colour(value: float, hot: float) -> ColorRGBA:
    """Blue (0) through green to red (at `hot` and above)."""
    s = min(max(value / hot, 0.0), 1.0) if hot > 0 else 0.0
    return ColorRGBA(r=min(1.0, 2.0 * s), g=1.0 - abs(2.0 * s - 1.0), b=min(1.0, 2.0 * (1.0 - s)), a=1.0)


def _points(points: Iterable) -> list[Point]:
    return [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in points]


def shape_marker(header: Header, shape: Shape) -> Marker:
    m = Marker(header=header, ns=shape.ns, id=shape.id, type=MARKER_TYPES[shape.kind], action=Marker.ADD)
    m.pose = pose(shape.pose)
    m.scale = Vector3(x=float(shape.scale[0]), y=float(shape.scale[1]), z=float(shape.scale[2]))
    m.color = rgba(shape.colour)
    m.points = _points(shape.points)
    m.colors = [rgba(c) for c in shape.colours]
    m.frame_locked = False
    return m


def trail_marker(header: Header, trail: Trail) -> Marker:
    style = trail.style or TrailPoint((0.0, 0.0, 0.0))
    m = Marker(header=header, ns=TRAIL_NS, id=0, type=Marker.LINE_STRIP, action=Marker.ADD)
    m.pose.orientation.w = 1.0
    m.scale = Vector3(x=float(style.width), y=0.0, z=0.0)
    m.color = rgba(style.colour or (1.0, 1.0, 1.0, 1.0))
    m.points = _points(trail.points)
    if style.colour is None:
        m.colors = [value_colour(v, style.hot) for v in trail.values]
    if len(m.points) < 2:  # RViz rejects a strip with fewer than two points
        m.action = Marker.DELETE
        m.points = []
        m.colors = []
    return m


def scene_markers(scene: Scene, trail: Trail | None, stamp: Time, frame_id: str = "world") -> MarkerArray:
    """The scene's shapes, plus the trail when the scene follows a point."""
    header = Header(stamp=stamp, frame_id=frame_id)
    markers = [shape_marker(header, s) for s in scene.shapes]
    if trail is not None and scene.trail is not None:
        markers.append(trail_marker(header, trail))
    return MarkerArray(markers=markers)


def shape_markers(shapes: Iterable[Shape], stamp: Time, frame_id: str = "world") -> MarkerArray:
    """Shapes alone, e.g. a task's static shapes (the car track), sent now and then."""
    header = Header(stamp=stamp, frame_id=frame_id)
    return MarkerArray(markers=[shape_marker(header, s) for s in shapes])
