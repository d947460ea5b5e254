"""Arm bridge: safe door-task actions to a Cartesian servo controller, arm sensors to the
door task's 39-d observation.

Commands: `refine/safe_action` [dx, dy, dz, gripper] -> `geometry_msgs/TwistStamped` (linear =
deltas * `max_speed`, e.g. MoveIt Servo) plus a `std_msgs/Float64` gripper command mapped
from [0 closed, 1 open] onto [`gripper_closed`, `gripper_open`].

Observations (Meta-World door schema, docs/METHOD.md): gripper xyz, gripper opening, handle
xyz, door quaternion (the handle marker's orientation), 7 unused zeros, the same 18 values at
the previous step, target xyz. Published at `observation_rate` only while every sensor is
fresh, so a dead sensor silences the heartbeat and the safety watchdog stops the arm.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import PointStamped, PoseStamped, TwistStamped
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray, String

from refine_core.tasks.registry import get_task
from refine_ros import qos
from refine_ros.messages import pack_json, pack_vector
from refine_ros.nodes._bridge import BridgeNode
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values

# The simulator's column order is the contract the fitted programs were trained on, so the
# bridge takes it from the task spec instead of spelling it again.
COLUMNS: tuple[str, ...] = get_task("door_open").spec.observation_columns
ACTION_AXES = 4


def door_step_values(
    gripper_xyz: np.ndarray, opening: float, handle_xyz: np.ndarray, handle_quat_xyzw: np.ndarray
) -> np.ndarray:
    """The 18 per-step values of the door observation (11-17 unused, zero as in Meta-World).
    Meta-World stores the handle orientation scalar-last (x, y, z, w), as ROS poses do."""
    out = np.zeros(18)
    out[0:3], out[3], out[4:7], out[7:11] = gripper_xyz, opening, handle_xyz, handle_quat_xyzw
    return out


def door_observation(current: np.ndarray, previous: np.ndarray, target_xyz: np.ndarray) -> np.ndarray:
    return np.concatenate([current, previous, np.asarray(target_xyz, dtype=float)])


# Topics, the target mode and the rate shape the node at start (read-only); the scales can be
# tuned while it runs. `max_speed` belongs to the arm: the profile sets it (no code default).
_LIVE = {"read_only": False}
PARAMETERS: dict[str, Param] = {
    "servo_topic": Param("/servo_node/delta_twist_cmds", "TwistStamped command topic of the servo controller"),
    "frame_id": Param("base_link", "frame of the twist commands and of the pose inputs", **_LIVE),
    "max_speed": Param(Required("double"), "m/s commanded for a unit action delta (the arm's profile sets it)",
                       (0.0, 1.0), **_LIVE),
    "gripper_topic": Param("/gripper_command", "std_msgs/Float64 gripper command topic"),
    "gripper_open": Param(1.0, "gripper command sent for action 1 (open)", **_LIVE),
    "gripper_closed": Param(0.0, "gripper command sent for action 0 (closed)", **_LIVE),
    "joint_states_topic": Param("/joint_states", "sensor_msgs/JointState of the arm and gripper"),
    "gripper_joints": Param(["finger_joint_1", "finger_joint_2"], "joints whose summed positions give the "
                            "opening", **_LIVE),
    "gripper_max_width": Param(0.08, "summed finger positions when fully open (opening 1)", (1e-4, 1.0), **_LIVE),
    "ee_pose_topic": Param("/ee_pose", "geometry_msgs/PoseStamped of the end effector"),
    "handle_pose_topic": Param("/handle_pose", "geometry_msgs/PoseStamped of the door handle (e.g. a fiducial)"),
    "target_mode": Param("fixed", "'fixed' (target_position) or 'topic' (geometry_msgs/PointStamped on "
                         "target_topic)"),
    "target_position": Param([0.0, 0.55, 0.15], "target xyz when target_mode is fixed", **_LIVE),
    "target_topic": Param("/door_target", "target topic when target_mode is topic"),
    "observation_rate": Param(50.0, "Hz of refine/observation (the control rate)", (1.0, 1000.0)),
    "sensor_timeout": Param(0.05, "seconds after which a pose or joint state counts as stale", (0.001, 5.0),
                            **_LIVE),
}


class ArmBridge(BridgeNode):
    axes = ACTION_AXES

    def __init__(self, **kwargs) -> None:
        super().__init__("arm_bridge", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            values(self, PARAMETERS)  # refuses to start without the arm's own values
            if self._param("target_mode") not in ("fixed", "topic"):
                raise StartRefused(f"arm_bridge: target_mode must be 'fixed' or 'topic', got {self._param('target_mode')!r}")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        p = self._param

        self._twist_pub = self.create_publisher(TwistStamped, p("servo_topic"), qos.COMMAND)
        self._gripper_pub = self.create_publisher(Float64, p("gripper_topic"), qos.COMMAND)
        self._obs_pub = self.create_publisher(Float64MultiArray, "refine/observation", qos.CONTROL)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._columns_pub.publish(pack_json(list(COLUMNS)))

        self.create_subscription(Float64MultiArray, "refine/safe_action", self._on_action, qos.COMMAND)
        self.create_subscription(JointState, p("joint_states_topic"), self._on_joints, qos.SENSOR)
        self.create_subscription(PoseStamped, p("ee_pose_topic"), self._on_ee, qos.SENSOR)
        self.create_subscription(PoseStamped, p("handle_pose_topic"), self._on_handle, qos.SENSOR)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        if p("target_mode") == "topic":
            self.create_subscription(PointStamped, p("target_topic"), self._on_target, qos.SENSOR)
            self._target: np.ndarray | None = None
        else:
            self._target = np.asarray(p("target_position"), dtype=float)

        self._ee: tuple[float, np.ndarray] | None = None
        self._handle: tuple[float, np.ndarray, np.ndarray] | None = None
        self._opening: tuple[float, float] | None = None
        self._previous: np.ndarray | None = None
        self.create_timer(1.0 / float(p("observation_rate")), self._publish_observation)

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Read-only parameters never get here; the live ones are checked as a whole."""
        for param in params:
            if param.name == "target_position":
                if len(param.value) != 3:
                    return SetParametersResult(successful=False, reason="target_position needs 3 values")
                self._target = np.asarray(param.value, dtype=float)
            if param.name == "gripper_joints" and len(param.value) == 0:
                return SetParametersResult(successful=False, reason="gripper_joints is empty")
        return SetParametersResult(successful=True)

    # ---- commands -----------------------------------------------------------------------
    def _on_action(self, msg: Float64MultiArray) -> None:
        values = self._safe_values(msg)
        if values is None:
            return
        delta = np.clip(values[:3], -1.0, 1.0) * float(self._param("max_speed"))
        twist = TwistStamped()
        twist.header.stamp = self.get_clock().now().to_msg()
        twist.header.frame_id = str(self._param("frame_id"))
        twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z = map(float, delta)
        self._twist_pub.publish(twist)
        g = float(np.clip(values[3], 0.0, 1.0))
        lo, hi = float(self._param("gripper_closed")), float(self._param("gripper_open"))
        self._gripper_pub.publish(Float64(data=lo + g * (hi - lo)))

    # ---- observations -------------------------------------------------------------------
    def _on_joints(self, msg: JointState) -> None:
        names = list(self._param("gripper_joints"))
        index = {n: i for i, n in enumerate(msg.name)}
        if not all(n in index and index[n] < len(msg.position) for n in names):
            return
        width = sum(msg.position[index[n]] for n in names)
        self._opening = (self._now(), float(np.clip(width / float(self._param("gripper_max_width")), 0.0, 1.0)))

    def _on_ee(self, msg: PoseStamped) -> None:
        p = msg.pose.position
        self._ee = (self._now(), np.array([p.x, p.y, p.z]))

    def _on_handle(self, msg: PoseStamped) -> None:
        p, q = msg.pose.position, msg.pose.orientation
        self._handle = (self._now(), np.array([p.x, p.y, p.z]), np.array([q.x, q.y, q.z, q.w]))

    def _on_target(self, msg: PointStamped) -> None:
        self._target = np.array([msg.point.x, msg.point.y, msg.point.z])

    def _on_start(self) -> None:
        self._previous = None  # the first observation's "previous" half is itself

    def _publish_observation(self) -> None:
        now, timeout = self._now(), float(self._param("sensor_timeout"))
        inputs = (self._ee, self._handle, self._opening)
        if self._target is None or any(i is None or now - i[0] > timeout for i in inputs):
            return
        current = door_step_values(self._ee[1], self._opening[1], self._handle[1], self._handle[2])
        if not np.all(np.isfinite(current)):
            return
        previous = current if self._previous is None else self._previous
        obs = door_observation(current, previous, self._target)
        self._obs_pub.publish(pack_vector(self.episode, self.step, obs))
        self._previous, self.step = current, self.step + 1


def main(args: list[str] | None = None) -> None:
    run_node(ArmBridge, args)


if __name__ == "__main__":
    main()
