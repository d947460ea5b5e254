"""Arm twin: the MuJoCo door scene in real time behind the interfaces a servoed arm's stack
exposes, so `arm_real` (bridge, safety node, learner) runs against physics with nothing of
ours in between. It stands where the arm's drivers, MoveIt Servo, the gripper driver and the
marker tracker would be; the physics and the tracker are refine_ros/robots/arm/twin.py and marker.py.

Interfaces (defaults are what config/arm_real.yaml's bridge expects of a UR5e with a Robotiq
2F-85 behind MoveIt Servo as of Jazzy):
- MoveIt Servo under `servo_node` (/servo_node): geometry_msgs/TwistStamped on
  `delta_twist_cmds` (base frame, m/s), taken only once switched to TWIST
  (`switch_command_type`, moveit_msgs/srv/ServoCommandType) and while not paused
  (`pause_servo`, std_srvs/SetBool); moveit_msgs/ServoStatus on `status` at `rate`. As of
  Humble (`servo_interface: servo_humble`): `start_servo`, `pause_servo`, `unpause_servo`
  (std_srvs/Trigger) and std_msgs/Int8 status. No twist for `incoming_command_timeout`: the
  hand halts, as Servo does.
- A control_msgs GripperCommand action (`gripper_action`): the goal's position in the
  driver's units, mapped linearly from `gripper_open_position` (fully open) to
  `gripper_closed_position` (closed) onto the fingers' opening; the result comes when the
  fingers reach the goal or stall on an object (a grasp), or after `gripper_goal_timeout`.
- /joint_states (sensor_msgs/JointState): the seven arm joints and the fingers, plus
  `gripper_joint` reading the opening in the same units as the goals (a Robotiq knuckle).
- /tf: the arm's chain from `base_frame` to the tool frame `ee_frame`, stamped with the
  joint states; the marker tracker's camera -> `handle_frame` only while the tracker sees the
  marker (the gripper hides it near the grasp); /tf_static: base -> the door scene's frame
  (`base_position`, `base_yaw`: the scene placed where arm_real's workspace box expects a
  UR5e's work) and the tracker's camera; `target_topic` (/door_target): the door's target in
  the base frame, which the bridge reads under `driver:=twin`.

Faults: per-sensor dropout windows and random dropouts (`dropouts.<joints|marker>.*`), sensor
noise, a command latency, and `~/silence_joints` / `~/silence_marker` (std_srvs/SetBool) for an
operator to pull a sensor's plug during a rehearsal. `~/reset` (std_srvs/Trigger) puts the
door back closed and the arm home, what the operator does by hand between real episodes.

QoS: commands are read reliable with a short queue (the newest twist counts, as Servo's
SystemDefaultsQoS subscription); /tf reliable depth 100 and /tf_static reliable transient
local, as tf2_ros's broadcasters; joint states and status reliable depth 10.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from geometry_msgs.msg import PointStamped, TwistStamped
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Int8
from std_srvs.srv import SetBool, Trigger

from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.robots._twin.frames import Pose, Transform
from refine_ros.robots._twin.node import (
    COMMAND_QOS,
    STATE_QOS,
    TF_QOS,
    TF_STATIC_QOS,
    SilenceLever,
    dropout_parameters,
    dropout_plans,
    now_s,
    stamp,
    transform_message,
)

SENSORS = ("joints", "marker")  # refine_ros.robots.arm.twin.ARM_SENSORS, without importing MuJoCo here
SERVO_INTERFACES = ("servo_jazzy", "servo_humble")
SERVO_TWIST = 1  # moveit_msgs/srv/ServoCommandType TWIST

PARAMETERS: dict[str, Param] = {
    "rate": Param(50.0, "Hz of the twin's tick: physics caught up to the wall clock, joint states, /tf and "
                  "Servo's status", (1.0, 500.0)),
    "marker_rate": Param(30.0, "Hz of the marker tracker (an AprilTag detector's frame rate)", (1.0, 200.0)),
    "door_seed": Param(0, "where the door stands (the door task's seed)", (0, 2**31 - 1)),
    "seed": Param(0, "seed of the sensor noise and of the random dropouts", (0, 2**31 - 1)),
    "command_latency": Param(0.0, "s: a command takes effect this long after it arrives (the robot's own control "
                             "delay, beyond what DDS adds)", (0.0, 2.0)),
    "max_linear_speed": Param(0.5, "m/s: faster twists are scaled down, like Servo's velocity limit", (0.01, 5.0)),
    "servo_interface": Param("servo_jazzy", "'servo_jazzy' or 'servo_humble': which MoveIt Servo to be"),
    "servo_node": Param("/servo_node", "namespace of Servo's topics and services"),
    "incoming_command_timeout": Param(0.1, "s without a twist after which the hand halts (Servo's parameter)",
                                      (0.0, 10.0)),
    "base_frame": Param("base_link", "the arm's base frame: twists and poses are in it"),
    "base_position": Param([0.0, 0.15, 0.0], "m: where base_frame stands in the door scene (Meta-World's world "
                           "frame); the default puts the arm's home, the handle and the door's target inside "
                           "arm_real's workspace box"),
    "base_yaw": Param(1.5708, "rad: base_frame's heading in the door scene (pi/2: x towards the door)",
                      (-3.1416, 3.1416)),
    "scene_frame": Param("right_arm_base_link", "the door scene's frame (the simulated arm's own base, at "
                         "Meta-World's origin), published under base_frame"),
    "target_topic": Param("/door_target", "geometry_msgs/PointStamped: where the door's handle must go, in "
                          "base_frame (the bridge's target_mode topic), at 5 Hz"),
    "ee_frame": Param("tool0", "the tool frame published at the hand (UR: tool0)"),
    "handle_frame": Param("door_handle", "the marker's frame (the tracker's tag frame) on the door handle"),
    "camera_frame": Param("marker_camera_optical_frame", "the tracker camera's optical frame"),
    "gripper_action": Param("/robotiq_gripper_controller/gripper_cmd", "control_msgs GripperCommand action"),
    "gripper_joint": Param("robotiq_85_left_knuckle_joint", "joint state that reads the opening in the goals' units"),
    "gripper_open_position": Param(0.0, "goal position meaning fully open (Robotiq knuckle: 0.0 rad)"),
    "gripper_closed_position": Param(0.8, "goal position meaning closed (Robotiq knuckle: 0.8 rad)"),
    "gripper_max_effort": Param(0.0, "N: force cap for goals that give none (0: full force)", (0.0, 1000.0)),
    "gripper_goal_timeout": Param(2.0, "s: a goal neither reached nor stalled by then ends unreached",
                                  (0.1, 30.0)),
    "joint_position_noise": Param(1e-4, "rad: std of the joint encoders' noise", (0.0, 1.0)),
    "marker_position_noise": Param(0.002, "m: std of the tracker's position noise", (0.0, 1.0)),
    "marker_rotation_noise": Param(0.01, "rad: std of the tracker's rotation noise", (0.0, 1.0)),
    **dropout_parameters(SENSORS),
}



def base_placement(position: Any, yaw: float) -> Pose:
    """The robot's base frame in the door scene: a position and a heading about z."""
    c, s = np.cos(yaw), np.sin(yaw)
    return Pose.of(position, np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]))


class ArmTwinNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("arm_twin", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            self.servo = str(p["servo_interface"])
            if self.servo not in SERVO_INTERFACES:
                raise StartRefused(f"arm_twin: servo_interface must be one of {SERVO_INTERFACES}, got {self.servo!r}")
            if p["gripper_open_position"] == p["gripper_closed_position"]:
                raise StartRefused("arm_twin: gripper_open_position and gripper_closed_position must differ")
            try:
                plans = dropout_plans(p, SENSORS)
            except ValueError as exc:
                raise StartRefused(f"arm_twin: {exc}") from None
            servo_types = self._servo_types()
            from control_msgs.action import GripperCommand
            from tf2_msgs.msg import TFMessage

        from refine_ros.robots.arm.twin import OPEN_GAP_M, ArmTwin, ArmTwinConfig

        self.open_gap = OPEN_GAP_M
        self.base, self.ee, self.handle_frame, self.camera = (str(p[k]) for k in ("base_frame", "ee_frame",
                                                                            "handle_frame", "camera_frame"))
        self.config = ArmTwinConfig(
            door_seed=int(p["door_seed"]), seed=int(p["seed"]), rate_hz=float(p["rate"]),
            marker_rate_hz=float(p["marker_rate"]), max_linear_speed_mps=float(p["max_linear_speed"]),
            command_latency_s=float(p["command_latency"]), twist_timeout_s=float(p["incoming_command_timeout"]),
            joint_position_std_rad=float(p["joint_position_noise"]),
            marker_position_std_m=float(p["marker_position_noise"]),
            marker_rotation_std_rad=float(p["marker_rotation_noise"]), dropouts=plans,
            base_frame=str(p["scene_frame"]), camera_frame=self.camera, marker_frame=self.handle_frame)  # fmt: skip
        self.placement = base_placement(p["base_position"], float(p["base_yaw"]))
        self.lock = threading.Lock()  # one executor thread now; the lock keeps the twin safe under any executor
        self.twin = ArmTwin(self.config, start=now_s(self))
        self.gripper_open, self.gripper_closed = float(p["gripper_open_position"]), float(p["gripper_closed_position"])
        self.gripper_joint = str(p["gripper_joint"])
        self.default_effort = float(p["gripper_max_effort"])
        self.goal_timeout = float(p["gripper_goal_timeout"])
        self.silence = SilenceLever(self, SENSORS)
        self.counts = {"twists": 0, "ignored_twists": 0, "gripper_goals": 0}
        self._goal_generation = 0
        self._tick_waiters: list[Future] = []

        self.TFMessage, self.GripperCommand = TFMessage, GripperCommand
        self.pub_tf = self.create_publisher(TFMessage, "/tf", TF_QOS)
        self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self.pub_joints = self.create_publisher(JointState, "/joint_states", STATE_QOS)
        self.pub_target = self.create_publisher(PointStamped, str(p["target_topic"]), STATE_QOS)
        self._ticks = 0
        self._servo_interfaces(str(p["servo_node"]).rstrip("/"), servo_types)
        self._gripper = ActionServer(
            self, GripperCommand, str(p["gripper_action"]), self._execute_grip,
            goal_callback=lambda _goal: GoalResponse.ACCEPT, cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup())  # goals overlap: a new one preempts the old
        self.create_service(Trigger, "~/reset", self._on_reset)
        self._publish_static()
        self.create_timer(1.0 / self.config.rate_hz, self._tick)
        self.get_logger().info(f"arm twin up: door seed {self.config.door_seed}, {self.config.rate_hz:g} Hz, "
                               f"{self.servo} at {p['servo_node']}")

    # ---- MoveIt Servo ---------------------------------------------------------------------
    def _servo_types(self) -> tuple[Any, Any]:
        if self.servo == "servo_humble":
            return Int8, None
        try:
            from moveit_msgs.msg import ServoStatus
            from moveit_msgs.srv import ServoCommandType
        except ImportError:
            raise StartRefused("arm_twin: servo_jazzy needs the moveit_msgs interfaces") from None
        return ServoStatus, ServoCommandType

    def _servo_interfaces(self, ns: str, types: tuple[Any, Any]) -> None:
        status_type, command_type = types
        self.status_type = status_type
        self.pub_status = self.create_publisher(status_type, f"{ns}/status", STATE_QOS)
        self.create_subscription(TwistStamped, f"{ns}/delta_twist_cmds", self._on_twist, COMMAND_QOS)
        if self.servo == "servo_jazzy":
            self.command_type, self.paused, self.running = -1, False, True
            self.create_service(command_type, f"{ns}/switch_command_type", self._on_switch)
            self.create_service(SetBool, f"{ns}/pause_servo", self._on_pause)
        else:
            self.command_type, self.paused, self.running = SERVO_TWIST, False, False
            for name, running, paused in (("start_servo", True, False), ("pause_servo", None, True),
                                          ("unpause_servo", None, False)):  # fmt: skip
                self.create_service(Trigger, f"{ns}/{name}",
                                    lambda _req, res, r=running, pa=paused: self._on_trigger(r, pa, res))

    def _on_switch(self, request: Any, response: Any) -> Any:
        response.success = int(request.command_type) in (0, 1, 2)
        if response.success:
            self.command_type = int(request.command_type)
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.paused = bool(request.data)
        response.success, response.message = True, "paused" if self.paused else "unpaused"
        return response

    def _on_trigger(self, running: bool | None, paused: bool, response: Trigger.Response) -> Trigger.Response:
        self.running = self.running if running is None else running
        self.paused = paused
        response.success = True
        return response

    def takes_twists(self) -> bool:
        return self.running and not self.paused and self.command_type == SERVO_TWIST

    def _on_twist(self, msg: TwistStamped) -> None:
        from refine_ros.robots.arm.twin import TwistCommand

        if not self.takes_twists() or msg.header.frame_id.lstrip("/") != self.base:
            self.counts["ignored_twists"] += 1
            state = "takes twists" if self.takes_twists() else "is not switched to twists or is paused"
            self.get_logger().warning(f"twist ignored: Servo {state}; frame {msg.header.frame_id!r} (expects "
                                      f"{self.base!r})", throttle_duration_sec=2.0)
            return
        v, w = msg.twist.linear, msg.twist.angular
        rotation = self.placement.rotation()  # base frame -> scene frame
        linear, angular = rotation @ np.array([v.x, v.y, v.z]), rotation @ np.array([w.x, w.y, w.z])
        with self.lock:
            self.twin.twist(TwistCommand(tuple(linear), tuple(angular)), now_s(self))
        self.counts["twists"] += 1

    def _publish_status(self) -> None:
        if not self.running or self.paused:
            return
        if self.servo == "servo_jazzy":
            self.pub_status.publish(self.status_type(code=0, message=""))
        else:
            self.pub_status.publish(Int8(data=0))

    # ---- gripper --------------------------------------------------------------------------
    def opening_of(self, position: float) -> float:
        """A goal position (driver units) -> the fingers' opening (m)."""
        share = (position - self.gripper_closed) / (self.gripper_open - self.gripper_closed)
        return min(max(share, 0.0), 1.0) * self.open_gap

    def position_of(self, opening: float) -> float:
        """The fingers' opening (m) -> the driver's units."""
        share = min(max(opening / self.open_gap, 0.0), 1.0)
        return self.gripper_closed + share * (self.gripper_open - self.gripper_closed)

    async def _execute_grip(self, goal_handle: Any) -> Any:
        """Waits for the fingers as a driver does, tick by tick without blocking the executor
        (a coroutine awaiting the physics' next tick), ending early when a newer goal
        replaces this one."""
        from refine_ros.robots.arm.twin import GripperGoal

        command = goal_handle.request.command
        effort = float(command.max_effort) if command.max_effort > 0 else self.default_effort
        with self.lock:
            self._goal_generation += 1
            mine = self._goal_generation
            self.twin.grip(GripperGoal(self.opening_of(float(command.position)), effort), now_s(self))
        self.counts["gripper_goals"] += 1
        deadline = time.monotonic() + self.goal_timeout
        settle = time.monotonic() + 0.05  # let the fingers start moving before judging a stall
        feedback = self.GripperCommand.Feedback()
        while True:
            await self._next_tick()
            with self.lock:
                state = self.twin.gripper_state(now_s(self))
            feedback.position, feedback.effort = self.position_of(state.position), state.effort
            feedback.stalled, feedback.reached_goal = state.stalled, state.reached_goal
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                break
            if mine != self._goal_generation or not self.context.ok():
                goal_handle.abort()
                break
            if time.monotonic() > deadline or (time.monotonic() > settle and (state.reached_goal or state.stalled)):
                goal_handle.succeed()
                break
            goal_handle.publish_feedback(feedback)
        result = self.GripperCommand.Result()
        result.position, result.effort = feedback.position, feedback.effort
        result.stalled, result.reached_goal = feedback.stalled, feedback.reached_goal
        return result

    def _next_tick(self) -> Future:
        """Done at the next tick of the physics."""
        future = Future()
        self._tick_waiters.append(future)
        return future

    # ---- time -----------------------------------------------------------------------------
    def _publish_static(self) -> None:
        with self.lock:
            mount = next(t for t in self.twin.transforms() if t.child == self.camera)
        scene = Transform(self.base, self.config.base_frame, self.placement.inverse())
        self.pub_tf_static.publish(self.TFMessage(transforms=[transform_message(scene, now_s(self)),
                                                              transform_message(mount, now_s(self))]))

    def _tick(self) -> None:
        now = now_s(self)
        with self.lock:
            readings = self.twin.tick(now)
            opening = self.twin.opening() if readings.joints is not None else 0.0
        waiters, self._tick_waiters = self._tick_waiters, []
        for future in waiters:
            future.set_result(None)
        self._publish_status()
        self._ticks += 1
        if self._ticks % max(1, int(self.config.rate_hz / 5)) == 1:
            self._publish_target(now)
        if readings.joints is not None and not self.silence("joints"):
            js = readings.joints
            msg = JointState(name=[*js.name, self.gripper_joint], position=[*js.position, self.position_of(opening)],
                             velocity=[*js.velocity, 0.0])  # fmt: skip
            msg.header.stamp = stamp(js.stamp)
            self.pub_joints.publish(msg)
            edges = [transform_message(t, js.stamp) for t in readings.transforms or () if t.child != self.camera]
            if self.ee != "hand":  # the tool frame sits at Meta-World's hand point
                edges.append(transform_message(Transform("hand", self.ee, Pose((0.0, 0.0, 0.0))), js.stamp))
            self.pub_tf.publish(self.TFMessage(transforms=edges))
        sighting = readings.marker
        if sighting is not None and sighting.visible and not self.silence("marker"):
            with self.lock:
                edge = self.twin.marker_transform(sighting)
            self.pub_tf.publish(self.TFMessage(transforms=[transform_message(edge, readings.marker_stamp)]))

    def _publish_target(self, now: float) -> None:
        with self.lock:
            scene_target = self.twin.target_position.copy()
        x, y, z = (self.placement.inverse() * Pose(tuple(scene_target))).position
        msg = PointStamped()
        msg.header.stamp, msg.header.frame_id = stamp(now), self.base
        msg.point.x, msg.point.y, msg.point.z = x, y, z
        self.pub_target.publish(msg)

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self.lock:
            self.twin.reset(now=now_s(self))
        response.success, response.message = True, f"door {self.config.door_seed} closed, arm home"
        return response

    def destroy_node(self) -> None:
        """The twin stops with the node: no tick runs after this, so the hand stays where it
        is (a halted arm); the simulator is closed."""
        twin = getattr(self, "twin", None)
        super().destroy_node()
        if twin is not None:
            with self.lock:
                twin.close()


def main(args: list[str] | None = None) -> None:
    run_node(ArmTwinNode, args)


if __name__ == "__main__":
    main()
