"""Adapters between refine_core's task data and ROS messages, shared by the sim node, the
learner and the real-robot side. Nothing here knows a particular task.

Two directions, both pure functions:
- the task observation <-> the values of a counted vector, in `spec.observation_columns`
  order (what travels on `refine/observation`), so a policy sees the same numbers whether they
  came from MuJoCo, Box2D or a robot's driver topics;
- a task's *scene* (`TaskView.scene(env)`: named poses, joints, odometry, paths) -> typed ROS
  messages (PoseStamped, JointState, Odometry, Path) on the topics refine_ros.viewers.scene_topics
  names (docs/ROS_INTERFACES.md lists what each bundled task publishes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Pose, PoseStamped
from nav_msgs.msg import Odometry, Path
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from refine_core.tasks import scene as sc
from refine_core.tasks.spec import TaskSpec
from refine_ros.viewers import scene_topics

MESSAGE_TYPES: dict[str, type] = {
    scene_topics.POSE_STAMPED: PoseStamped,
    scene_topics.JOINT_STATE: JointState,
    scene_topics.ODOMETRY: Odometry,
    scene_topics.PATH: Path,
}


class ObservationSizeError(ValueError):
    """A counted vector whose length does not match the task's observation columns."""


# -- observation <-> counted vector values ----------------------------------------------------
def observation_values(spec: TaskSpec, parts: dict[str, Any]) -> list[float]:
    """`task.split_observation(obs)` -> flat values in `spec.observation_columns` order."""
    out: list[float] = []
    for inp in spec.inputs:
        out.extend(np.asarray(parts[inp.name], dtype=np.float64).ravel().tolist())
    return out


def observation_from_values(spec: TaskSpec, values: Sequence[float]) -> Any:
    """The inverse: counted values -> the env observation the task's code expects (one array
    for a single-input task such as door_open, else a dict of arrays keyed by input name)."""
    flat = np.asarray(values, dtype=np.float32)
    expected = len(spec.observation_columns)
    if flat.shape != (expected,):
        raise ObservationSizeError(
            f"{spec.name}: {flat.size} observation values, expected {expected}"
        )
    parts: dict[str, np.ndarray] = {}
    offset = 0
    for inp in spec.inputs:
        size = len(inp.columns)
        parts[inp.name] = flat[offset : offset + size].reshape(inp.shape)
        offset += size
    if len(spec.inputs) == 1:
        return parts[spec.inputs[0].name]
    return parts


# -- scenes -> typed messages -----------------------------------------------------------------
def topic_types(scene: sc.Scene) -> dict[str, type]:
    """{topic: message class} of the typed topics `scene` feeds."""
    return {topic: MESSAGE_TYPES[datatype] for topic, datatype in scene_topics.scene_topics(scene).items()}


def fill_pose(target: Pose, p: sc.Pose) -> Pose:
    """Write `p` into an existing Pose: filling the defaults a message already holds is about
    twice as fast as building nested messages (rclpy builds every default on construction)."""
    position, orientation = target.position, target.orientation
    position.x, position.y, position.z = (float(v) for v in p.position)
    orientation.x, orientation.y, orientation.z, orientation.w = (float(v) for v in p.orientation)
    return target


def pose(p: sc.Pose) -> Pose:
    return fill_pose(Pose(), p)


def pose_stamped(header: Header, p: sc.Pose) -> PoseStamped:
    msg = PoseStamped(header=header)
    fill_pose(msg.pose, p)
    return msg


def joint_state(header: Header, joints: sc.Joints) -> JointState:
    msg = JointState(header=header, name=list(joints.names))
    msg.position = [float(v) for v in joints.positions]
    msg.velocity = [float(v) for v in joints.velocities]
    return msg


def odometry(header: Header, odom: sc.Odometry) -> Odometry:
    msg = Odometry(header=header, child_frame_id=odom.child_frame)
    fill_pose(msg.pose.pose, odom.pose)
    linear, angular = msg.twist.twist.linear, msg.twist.twist.angular
    linear.x, linear.y, linear.z = (float(v) for v in odom.linear)
    angular.x, angular.y, angular.z = (float(v) for v in odom.angular)
    return msg


def path(header: Header, poses: Sequence[sc.Pose]) -> Path:
    return Path(header=header, poses=[pose_stamped(header, p) for p in poses])


def scene_messages(scene: sc.Scene, stamp: Time, frame_id: str = "world") -> dict[str, Any]:
    """{topic: message} for every typed topic of `scene` (names from refine_ros.viewers.scene_topics)."""
    header = Header(stamp=stamp, frame_id=frame_id)
    prefix = scene_topics.PREFIX
    out: dict[str, Any] = {}
    for name, p in scene.poses.items():
        out[prefix + name] = pose_stamped(header, p)
    if scene.joints is not None:
        out[scene_topics.JOINT_STATES] = joint_state(header, scene.joints)
    for name, joints in scene.joint_sets.items():
        out[prefix + name] = joint_state(header, joints)
    for name, odom in scene.odometry.items():
        out[prefix + name] = odometry(header, odom)
    for name, poses in scene.paths.items():
        out[prefix + name] = path(header, poses)
    return out
