"""How a task's scene (refine_core.tasks.scene) becomes ROS topics: one naming rule, with no
knowledge of any task.

- each named pose -> `refine/<name>` (geometry_msgs/PoseStamped);
- the robot model's joints -> `joint_states` (sensor_msgs/JointState, for
  robot_state_publisher and the URDF);
- each named joint set -> `refine/<name>` (sensor_msgs/JointState);
- each named odometry -> `refine/<name>` (nav_msgs/Odometry, twist in the body frame);
- each named path -> `refine/<name>` (nav_msgs/Path);
- shapes and the trail -> `refine/markers` (visualization_msgs/MarkerArray, refine_ros.viewers.markers).

This module is ROS-free on purpose: the live sim node builds rclpy messages from the same names
(refine_ros.wire.adapters), and the MCAP export writes the plain-dict messages below without rclpy.
"""

from __future__ import annotations

from typing import Any

from refine_core.tasks.scene import Joints, Odometry, Pose, Scene, Shape

PREFIX = "refine/"
JOINT_STATES = "joint_states"
MARKERS = "refine/markers"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
JOINT_STATE = "sensor_msgs/msg/JointState"
ODOMETRY = "nav_msgs/msg/Odometry"
PATH = "nav_msgs/msg/Path"
MARKER_ARRAY = "visualization_msgs/msg/MarkerArray"

# visualization_msgs/Marker type and action codes
MARKER_TYPES = {"arrow": 0, "box": 1, "sphere": 2, "cylinder": 3, "line_strip": 4, "sphere_list": 7,
                "triangle_list": 11}
MARKER_ADD, MARKER_DELETE = 0, 2


class SceneTopicError(ValueError):
    """Two primitives of one scene would publish on the same topic."""


def scene_topics(scene: Scene) -> dict[str, str]:
    """{topic: ROS datatype} of the typed (non-marker) topics a scene feeds."""
    topics: dict[str, str] = {}

    def add(topic: str, datatype: str) -> None:
        if topic in topics:
            raise SceneTopicError(f"two scene primitives publish on {topic!r}")
        topics[topic] = datatype

    for name in scene.poses:
        add(PREFIX + name, POSE_STAMPED)
    if scene.joints is not None:
        add(JOINT_STATES, JOINT_STATE)
    for name in scene.joint_sets:
        add(PREFIX + name, JOINT_STATE)
    for name in scene.odometry:
        add(PREFIX + name, ODOMETRY)
    for name in scene.paths:
        add(PREFIX + name, PATH)
    return topics


# -- plain-dict messages (what mcap_ros2's writer serialises) ---------------------------------
def stamp(ns: int) -> dict:
    return {"sec": ns // 1_000_000_000, "nanosec": ns % 1_000_000_000}


def header(ns: int, frame_id: str) -> dict:
    return {"stamp": stamp(ns), "frame_id": frame_id}


def point(xyz) -> dict:
    return {"x": float(xyz[0]), "y": float(xyz[1]), "z": float(xyz[2])}


def pose(p: Pose) -> dict:
    x, y, z, w = p.orientation
    return {"position": point(p.position), "orientation": {"x": x, "y": y, "z": z, "w": w}}


def pose_stamped(p: Pose, ns: int, frame_id: str) -> dict:
    return {"header": header(ns, frame_id), "pose": pose(p)}


def joint_state(joints: Joints, ns: int, frame_id: str) -> dict:
    return {"header": header(ns, frame_id), "name": list(joints.names),
            "position": [float(v) for v in joints.positions],
            "velocity": [float(v) for v in joints.velocities], "effort": []}


def odometry(odom: Odometry, ns: int, frame_id: str) -> dict:
    return {"header": header(ns, frame_id), "child_frame_id": odom.child_frame,
            "pose": {"pose": pose(odom.pose)},
            "twist": {"twist": {"linear": point(odom.linear), "angular": point(odom.angular)}}}


def path(poses: tuple[Pose, ...], ns: int, frame_id: str) -> dict:
    return {"header": header(ns, frame_id), "poses": [pose_stamped(p, ns, frame_id) for p in poses]}


def colour(rgba) -> dict:
    r, g, b, a = (float(v) for v in rgba)
    return {"r": r, "g": g, "b": b, "a": a}


def marker(shape: Shape, ns: int, frame_id: str) -> dict:
    return {"header": header(ns, frame_id), "ns": shape.ns, "id": shape.id,
            "type": MARKER_TYPES[shape.kind], "action": MARKER_ADD, "pose": pose(shape.pose),
            "scale": point(shape.scale), "color": colour(shape.colour),
            "points": [point(p) for p in shape.points], "colors": [colour(c) for c in shape.colours]}


def message_dicts(scene: Scene, ns: int, frame_id: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """{topic: (datatype, message as a dict)} for every typed topic of `scene`, plus
    `refine/markers` when it has shapes (the trail needs history and is left to the caller)."""
    topics = scene_topics(scene)
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, p in scene.poses.items():
        out[PREFIX + name] = (topics[PREFIX + name], pose_stamped(p, ns, frame_id))
    if scene.joints is not None:
        out[JOINT_STATES] = (JOINT_STATE, joint_state(scene.joints, ns, frame_id))
    for name, joints in scene.joint_sets.items():
        out[PREFIX + name] = (JOINT_STATE, joint_state(joints, ns, frame_id))
    for name, odom in scene.odometry.items():
        out[PREFIX + name] = (ODOMETRY, odometry(odom, ns, frame_id))
    for name, poses in scene.paths.items():
        out[PREFIX + name] = (PATH, path(poses, ns, frame_id))
    if scene.shapes:
        out[MARKERS] = (MARKER_ARRAY, {"markers": [marker(s, ns, frame_id) for s in scene.shapes]})
    return out
