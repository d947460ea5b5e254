"""Per-task observation adapters, shared by the sim node, the learner and the real-robot side.

Two directions, both pure functions:
- the task observation <-> the values of a counted vector, in `spec.observation_columns`
  order (what travels on `refine/observation`), so a policy sees the same numbers whether they
  came from MuJoCo, Box2D or a robot's driver topics;
- a *scene* (the geometry a person wants to see: gripper, handle, target and arm joints; or
  the car pose, wheel speeds and the track) -> typed ROS messages (PoseStamped, JointState,
  Odometry, Path). A scene is read from a simulator's privileged state here, or assembled
  from driver topics by a hardware bridge.

Typed topics (all STATE QoS, frame `world` unless the node says otherwise):
door: `refine/gripper_pose`, `refine/handle_pose`, `refine/target_pose` (PoseStamped),
`joint_states` (arm joints, fingers and the door hinge: drives robot_state_publisher);
car: `refine/odom` (Odometry), `refine/wheel_speeds` (JointState velocities, rad/s),
`refine/track_ahead` (Path of the next tile centres), `joint_states` (the planar pose joints
and wheels of urdf/rc_car.urdf).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point, Pose, PoseStamped, Quaternion
from nav_msgs.msg import Odometry, Path
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from refine_core.tasks.spec import TaskSpec

DOOR_TOPICS = ("refine/gripper_pose", "refine/handle_pose", "refine/target_pose", "joint_states")
CAR_TOPICS = ("refine/odom", "refine/wheel_speeds", "refine/track_ahead", "joint_states")
WHEEL_JOINTS = (
    "front_left_wheel_joint", "front_right_wheel_joint",
    "rear_left_wheel_joint", "rear_right_wheel_joint",
)  # fmt: skip
FINGER_JOINTS = ("r_close", "l_close")  # Meta-World's claw joints (urdf/door_scene.urdf)
FINGER_CLOSED = (0.04, -0.03)  # their positions when fully closed; 0 is open
DOOR_JOINTS = ("door_x", "door_y", "door_z", "door_hinge")
TRACK_AHEAD = 24  # tile centres on refine/track_ahead (twice what the policy sees)


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


# -- scenes -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DoorScene:
    gripper: np.ndarray  # (3,) tool centre, world frame
    gripper_open: float  # 0 closed .. 1 open
    handle: np.ndarray  # (3,)
    target: np.ndarray  # (3,)
    door_quat_wxyz: np.ndarray  # (4,) door body orientation
    hinge: np.ndarray  # (3,) where the door stands (its configuration)
    door_angle: float
    joint_names: tuple[str, ...]
    joint_positions: np.ndarray
    finger_positions: tuple[float, float] | None = None  # r_close, l_close if known

    def fingers(self) -> tuple[float, float]:
        """Claw joint positions: measured when the source knows them, else from the opening."""
        if self.finger_positions is not None:
            return self.finger_positions
        closed = 1.0 - self.gripper_open
        return FINGER_CLOSED[0] * closed, FINGER_CLOSED[1] * closed


@dataclass(frozen=True)
class CarScene:
    x: float
    y: float
    angle: float  # CarRacing convention: 0 faces +y
    vx: float
    vy: float
    speed: float
    angular_velocity: float
    steer: float
    wheel_omegas: np.ndarray  # (4,) rad/s: fl, fr, rl, rr
    track_index: int  # first tile ahead
    centreline: np.ndarray  # (N, 2)
    polygons: np.ndarray  # (N, 4, 2)
    borders: np.ndarray  # (N,)

    @property
    def yaw(self) -> float:
        """Heading in the REP-103 convention (x forward): CarRacing's angle + pi/2."""
        return self.angle + math.pi / 2.0


def door_scene(env: Any, observation: np.ndarray) -> DoorScene:
    base = env.unwrapped
    return DoorScene(
        gripper=base.gripper_position(),
        gripper_open=float(np.clip(observation[3], 0.0, 1.0)),
        handle=base.handle_position(),
        target=base.target_position(),
        door_quat_wxyz=base.door_quaternion(),
        hinge=base.door_configuration()[:3],
        door_angle=base.door_angle(),
        joint_names=tuple(base.arm_joint_names()),
        joint_positions=base.arm_joint_positions(),
        finger_positions=_claw_joints(base),
    )


def _claw_joints(base: Any) -> tuple[float, float] | None:
    try:
        data = base.raw.data
        return tuple(float(data.joint(name).qpos.item()) for name in FINGER_JOINTS)
    except (AttributeError, KeyError, ValueError):
        return None


def car_scene(env: Any, track_geometry: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> CarScene:
    """`track_geometry` (centreline, polygons, borders) can be passed in: it is fixed for an
    episode, and copying it every step would cost more than the step."""
    base = env.unwrapped
    state = base.car_state()
    if track_geometry is None:
        track_geometry = car_track(env)
    centreline, polygons, borders = track_geometry
    return CarScene(
        x=state["x"], y=state["y"], angle=state["angle"], vx=state["vx"], vy=state["vy"],
        speed=state["speed"], angular_velocity=state["angular_velocity"],
        steer=state.get("steer", 0.0), wheel_omegas=np.asarray(state["wheel_omegas"], float),
        track_index=int(base.track_index), centreline=centreline, polygons=polygons,
        borders=borders,
    )


def car_track(env: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    base = env.unwrapped
    return base.track_centreline(), base.tile_polygons(), base.border_flags()


# -- typed messages ---------------------------------------------------------------------------
def yaw_quaternion(yaw: float) -> Quaternion:
    return Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2.0), w=math.cos(yaw / 2.0))


def wxyz_quaternion(q: Sequence[float]) -> Quaternion:
    w, x, y, z = (float(v) for v in q)
    norm = math.sqrt(w * w + x * x + y * y + z * z) or 1.0
    return Quaternion(x=x / norm, y=y / norm, z=z / norm, w=w / norm)


def point(xyz: Sequence[float]) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]) if len(xyz) > 2 else 0.0)


def pose_stamped(header: Header, xyz: Sequence[float], orientation: Quaternion | None = None) -> PoseStamped:
    return PoseStamped(
        header=header, pose=Pose(position=point(xyz), orientation=orientation or Quaternion(w=1.0))
    )


def door_messages(scene: DoorScene, stamp: Time, frame_id: str = "world") -> dict[str, Any]:
    header = Header(stamp=stamp, frame_id=frame_id)
    joints = JointState(header=header)
    joints.name = [*scene.joint_names, *FINGER_JOINTS, *DOOR_JOINTS]
    joints.position = [
        *(float(v) for v in scene.joint_positions), *scene.fingers(),
        *(float(v) for v in scene.hinge[:3]), float(scene.door_angle),
    ]
    return {
        "refine/gripper_pose": pose_stamped(header, scene.gripper),
        "refine/handle_pose": pose_stamped(header, scene.handle, wxyz_quaternion(scene.door_quat_wxyz)),
        "refine/target_pose": pose_stamped(header, scene.target),
        "joint_states": joints,
    }


def car_messages(
    scene: CarScene, stamp: Time, frame_id: str = "world", wheel_angles: Sequence[float] | None = None
) -> dict[str, Any]:
    """`wheel_angles` (integrated by the caller) turn the wheels in RViz; zeros otherwise."""
    header = Header(stamp=stamp, frame_id=frame_id)
    yaw = scene.yaw
    odom = Odometry(header=header, child_frame_id="base_link")
    odom.pose.pose = Pose(position=Point(x=scene.x, y=scene.y, z=0.0), orientation=yaw_quaternion(yaw))
    cos, sin = math.cos(yaw), math.sin(yaw)
    odom.twist.twist.linear.x = cos * scene.vx + sin * scene.vy  # body frame: forward
    odom.twist.twist.linear.y = -sin * scene.vx + cos * scene.vy  # body frame: left
    odom.twist.twist.angular.z = scene.angular_velocity

    wheels = JointState(header=header, name=list(WHEEL_JOINTS))
    wheels.velocity = [float(w) for w in scene.wheel_omegas]

    path = Path(header=header)
    n = len(scene.centreline)
    if n:
        idx = (scene.track_index + np.arange(min(TRACK_AHEAD, n))) % n
        pts = scene.centreline[idx]
        prev = scene.centreline[(idx - 1) % n]
        for p, q in zip(pts, prev, strict=True):
            heading = math.atan2(p[1] - q[1], p[0] - q[0])
            path.poses.append(pose_stamped(header, (p[0], p[1], 0.0), yaw_quaternion(heading)))

    angles = list(wheel_angles) if wheel_angles is not None else [0.0] * 4
    joints = JointState(header=header)
    joints.name = ["car_x", "car_y", "car_yaw", "front_left_steer_joint", *WHEEL_JOINTS]
    # Box2D's wheel joint angle is counter-clockwise positive, as the URDF's steer joint
    joints.position = [scene.x, scene.y, yaw, scene.steer, *map(float, angles)]
    return {"refine/odom": odom, "refine/wheel_speeds": wheels, "refine/track_ahead": path,
            "joint_states": joints}


def typed_topics(task_name: str) -> tuple[str, ...]:
    return DOOR_TOPICS if task_name == "door_open" else CAR_TOPICS if task_name == "car_racing" else ()
