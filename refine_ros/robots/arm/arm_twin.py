"""Arm twin: the MuJoCo door scene in real time behind the interfaces a servoed arm's stack
exposes, so `arm_real` (bridge, safety node, learner) runs against physics with nothing of
ours in between. It stands where the arm's drivers, MoveIt Servo, the gripper driver and the
marker tracker would be; the physics and the tracker are refine_ros/robots/arm/twin.py and marker.py.

Interfaces (defaults are what config/arm_real.yaml's bridge expects of a UR5e with a Robotiq
2F-85 behind MoveIt Servo as of Jazzy):
- MoveIt Servo as a node of its own, `servo_node` (/servo_node), with the rules of the stock
  node (refine_ros/robots/arm/servo_stack.py): geometry_msgs/TwistStamped on
  `delta_twist_cmds` (base frame), taken only once switched to TWIST (`switch_command_type`,
  moveit_msgs/srv/ServoCommandType) and while not paused (`pause_servo`, std_srvs/SetBool);
  moveit_msgs/ServoStatus on `status` at `rate`, none while paused. As of Humble
  (`command_interface: servo_humble`): `start_servo`, `pause_servo`, `unpause_servo`
  (std_srvs/Trigger) and std_msgs/Int8 status, also while paused. A twist is stale when
  Servo's clock minus its STAMP reaches `incoming_command_timeout`; `command_in_type` unitless
  (Servo's default) scales it by `scale_linear`; both are Servo's own parameters
  (`moveit_servo.command_in_type`, `moveit_servo.scale.linear`,
  `moveit_servo.incoming_command_timeout` on /servo_node), as a bridge reads them.
- Or a ros2_control forward velocity controller (`command_interface: forward_velocity`):
  std_msgs/Float64MultiArray joint velocities on `velocity_command_topic` (the seven arm joints
  right_j0 .. right_j6, in that order), HELD until the next message (no timeout, as
  forward_controllers_base.cpp); the tool moves at the URDF's Jacobian times them, with the URDF
  (the door scene's arm under `base_frame`, `ee_frame` at the hand) latched on
  `robot_description_topic`.
- The gripper's action (`gripper_action`): control_msgs ParallelGripperCommand
  (`gripper_action_type: parallel_gripper_command`, what ros2_robotiq_gripper serves on Jazzy
  and later: one joint's position; any other number of positions is rejected) or GripperCommand
  (`gripper_command`); the goal's position in the driver's units, mapped linearly from
  `gripper_open_position` (fully open) to `gripper_closed_position` (closed, the fingers at the
  end of their travel) onto the fingers' opening; the result comes when the fingers reach the
  goal or stall on an object (a grasp), or after `gripper_goal_timeout`.
- /joint_states (sensor_msgs/JointState): the seven arm joints and the fingers, plus
  `gripper_joint` reading the opening in the same units as the goals (a Robotiq knuckle).
- /tf: the arm's chain from `base_frame` to the tool frame `ee_frame`, stamped with the
  joint states, at most `tf_rate` (20 Hz: robot_state_publisher's publish_frequency); the
  marker tracker's camera -> `handle_frame` only while the tracker sees the marker (the gripper
  hides it near the grasp), stamped with the camera frame's capture time and published
  `detection_latency` later (an AprilTag detector's); /tf_static: base -> the door scene's frame
  (`base_position`, `base_yaw`: the scene placed where arm_real's workspace box expects a
  UR5e's work) and the tracker's camera; `target_topic` (/door_target): the door's target in
  the base frame, which the bridge reads under `driver:=twin`.

Ground truth: `~/ground_truth` (std_msgs/Float64MultiArray, every tick: [time, tool x, y, z in
`base_frame`, tool speed m/s, the tool speed the arm is commanded]); no node of the robot's
graph reads it (the fault matrix measures how far the arm moved with it).

Transport: the twin's participant sends over UDP only (config/fastdds_udp.xml, or its
LOCALHOST variant). ros2_control takes commands in its executor while its broadcasters' own
threads publish, so a subscriber that freezes (a bridge under SIGSTOP) never delays a command
there. This twin is one Python process: a Fast DDS send over shared memory to the frozen bridge
blocked on the bridge's port and held the GIL, and for 1 to 2 s the twin applied no command, a
stall the stack it stands in for does not have. Not emulated: MoveIt Servo's own loop, which
publishes its status to the bridge, held the same way by a frozen bridge.

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
from std_msgs.msg import Float64MultiArray, Int8
from std_srvs.srv import SetBool, Trigger

from refine_ros.bringup.spin import destroy_actions
from refine_ros.nodes._main import run_node, without_shared_memory
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
from refine_ros.robots._twin.scene import SceneChannel
from refine_ros.robots.arm.truth import arm_scene

SENSORS = ("joints", "marker")  # refine_ros.robots.arm.twin.ARM_SENSORS, without importing MuJoCo here
COMMAND_INTERFACES = ("servo_jazzy", "servo_humble", "forward_velocity")
GRIPPER_ACTION_TYPES = {"parallel_gripper_command": "ParallelGripperCommand", "gripper_command": "GripperCommand"}
ARM_JOINTS = ("right_j0", "right_j1", "right_j2", "right_j3", "right_j4", "right_j5", "right_j6")

PARAMETERS: dict[str, Param] = {
    "rate": Param(50.0, "Hz of the twin's tick: physics caught up to the wall clock, joint states and Servo's "
                  "status", (1.0, 500.0)),
    "tf_rate": Param(20.0, "Hz at most of the arm's /tf (robot_state_publisher's publish_frequency: 20)",
                     (1.0, 500.0)),
    "marker_rate": Param(30.0, "Hz of the marker tracker (an AprilTag detector's camera frame rate)", (1.0, 200.0)),
    "detection_latency": Param(0.05, "s from a camera frame's capture (its stamp) to its tag pose on /tf",
                               (0.0, 2.0)),
    "door_seed": Param(0, "where the door stands (the door task's seed)", (0, 2**31 - 1)),
    "seed": Param(0, "seed of the sensor noise and of the random dropouts", (0, 2**31 - 1)),
    "command_latency": Param(0.0, "s: a command takes effect this long after it arrives (the robot's own control "
                             "delay, beyond what DDS adds)", (0.0, 2.0)),
    "max_linear_speed": Param(0.5, "m/s: the arm's own speed limit (its joints'); faster is scaled down",
                              (0.01, 5.0)),
    "command_interface": Param("servo_jazzy", "what commands the arm: 'servo_jazzy' / 'servo_humble' (MoveIt "
                               "Servo) or 'forward_velocity' (a ros2_control forward velocity controller)",
                               aliases=("servo_interface",)),
    "servo_node": Param("/servo_node", "MoveIt Servo's node (its topics, services and parameters)"),
    "incoming_command_timeout": Param(0.1, "s after a twist's stamp when Servo halts (its parameter)",
                                      (0.0, 10.0)),
    "command_in_type": Param("unitless", "'unitless' (Servo's default: a twist is scaled by scale_linear) or "
                             "'speed_units' (m/s)"),
    "scale_linear": Param(0.4, "Servo's scale.linear: the unitless factor, or the speed_units cap (Jazzy), m/s",
                          (0.0, 10.0)),
    "velocity_command_topic": Param("/forward_velocity_controller/commands", "joint velocities "
                                    "(forward_velocity)"),
    "robot_description_topic": Param("/robot_description", "the arm's URDF (forward_velocity), latched"),
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
    "gripper_action": Param("/robotiq_gripper_controller/gripper_cmd", "the gripper's action server"),
    "gripper_action_type": Param("parallel_gripper_command", "'parallel_gripper_command' (control_msgs "
                                 "ParallelGripperCommand: ros2_robotiq_gripper on Jazzy and later) or 'gripper_command' "
                                 "(GripperCommand: Humble, Franka)"),
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


def arm_description(urdf: str, base_frame: str, scene_frame: str, placement: Pose, ee_frame: str) -> str:
    """The twin's arm as its robot_state_publisher would publish it: the door scene's URDF with
    `base_frame` as the root above the arm's own base (at `placement`'s inverse) and the tool
    frame at the hand, so a chain `base_frame` -> `ee_frame` is the arm the twin moves."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(urdf)
    for joint in root.findall("joint"):
        if joint.find("child").get("link") == scene_frame:
            root.remove(joint)
    inverse = placement.inverse()
    rotation = inverse.rotation()
    yaw = float(np.arctan2(rotation[1, 0], rotation[0, 0]))
    ET.SubElement(root, "link", name=base_frame)
    mount = ET.SubElement(root, "joint", name=f"{base_frame}_to_{scene_frame}", type="fixed")
    ET.SubElement(mount, "parent", link=base_frame)
    ET.SubElement(mount, "child", link=scene_frame)
    ET.SubElement(mount, "origin", xyz=" ".join(f"{v:.9g}" for v in inverse.position), rpy=f"0 0 {yaw:.9g}")
    if ee_frame != "hand":
        ET.SubElement(root, "link", name=ee_frame)
        tool = ET.SubElement(root, "joint", name=f"hand_to_{ee_frame}", type="fixed")
        ET.SubElement(tool, "parent", link="hand")
        ET.SubElement(tool, "child", link=ee_frame)
    return ET.tostring(root, encoding="unicode")


class ArmTwinNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("arm_twin", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            self.interface = str(p["command_interface"])
            if self.interface not in COMMAND_INTERFACES:
                raise StartRefused(f"arm_twin: command_interface must be one of {COMMAND_INTERFACES}, "
                                   f"got {self.interface!r}")
            if p["gripper_open_position"] == p["gripper_closed_position"]:
                raise StartRefused("arm_twin: gripper_open_position and gripper_closed_position must differ")
            if str(p["gripper_action_type"]) not in GRIPPER_ACTION_TYPES:
                raise StartRefused(f"arm_twin: gripper_action_type must be one of {tuple(GRIPPER_ACTION_TYPES)}")
            from refine_ros.robots.arm.servo_stack import ServoConfig

            try:
                plans = dropout_plans(p, SENSORS)
                self.servo_config = ServoConfig(
                    release=self.interface.removeprefix("servo_") if self.interface != "forward_velocity" else "jazzy",
                    incoming_command_timeout=float(p["incoming_command_timeout"]),
                    command_in_type=str(p["command_in_type"]), scale_linear=float(p["scale_linear"]))
            except ValueError as exc:
                raise StartRefused(f"arm_twin: {exc}") from None
            servo_types = self._servo_types()
            import control_msgs.action
            from tf2_msgs.msg import TFMessage

            gripper_type = getattr(control_msgs.action, GRIPPER_ACTION_TYPES[str(p["gripper_action_type"])])

        from refine_ros.robots.arm.servo_stack import Detections, RobotStatePublisher, Servo
        from refine_ros.robots.arm.twin import CLOSED_GAP_M, OPEN_GAP_M, ArmTwin, ArmTwinConfig

        self.open_gap, self.closed_gap = OPEN_GAP_M, CLOSED_GAP_M
        self.base, self.ee, self.handle_frame, self.camera = (str(p[k]) for k in ("base_frame", "ee_frame",
                                                                            "handle_frame", "camera_frame"))
        # the twin core only executes the velocity the arm is commanded: Servo's timeout, pause
        # and scaling, or the controller's holding, are this node's (servo_stack.Servo)
        self.config = ArmTwinConfig(
            door_seed=int(p["door_seed"]), seed=int(p["seed"]), rate_hz=float(p["rate"]),
            marker_rate_hz=float(p["marker_rate"]), max_linear_speed_mps=float(p["max_linear_speed"]),
            command_latency_s=float(p["command_latency"]), twist_timeout_s=0.0,
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
        self.counts = {"twists": 0, "ignored_twists": 0, "gripper_goals": 0, "rejected_goals": 0,
                       "velocity_commands": 0}
        self._goal_generation = 0
        self._tick_waiters: list[Future] = []
        self.rsp = RobotStatePublisher(float(p["tf_rate"]))
        self.detections = Detections(float(p["detection_latency"]))
        self.servo = Servo(self.servo_config)
        self._last_tool: tuple[float, np.ndarray] | None = None

        self.TFMessage, self.GripperCommand = TFMessage, gripper_type
        self.parallel = gripper_type.__name__ == "ParallelGripperCommand"
        self.pub_tf = self.create_publisher(TFMessage, "/tf", TF_QOS)
        self.pub_tf_static = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        self.pub_joints = self.create_publisher(JointState, "/joint_states", STATE_QOS)
        self.pub_target = self.create_publisher(PointStamped, str(p["target_topic"]), STATE_QOS)
        self.pub_truth = self.create_publisher(Float64MultiArray, "~/ground_truth", STATE_QOS)
        self._ticks = 0
        self.companion_nodes: tuple[Node, ...] = ()
        if self.interface == "forward_velocity":
            self._forward_velocity(p)
        else:
            self._servo_node(str(p["servo_node"]), servo_types)
        self._gripper = ActionServer(
            self, gripper_type, str(p["gripper_action"]), self._execute_grip,
            goal_callback=self._accept_goal, cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=ReentrantCallbackGroup())  # goals overlap: a new one preempts the old
        self.create_service(Trigger, "~/reset", self._on_reset)
        # what a person at the arm sees, for a teleoperator and the live episodes' ground truth
        # (refine_ros/robots/_twin/scene.py); no node of the robot's graph reads it
        self.scene = SceneChannel(self, lambda: arm_scene(self.twin, self.placement))
        self._publish_static()
        self.create_timer(1.0 / self.config.rate_hz, self._tick)
        self.get_logger().info(f"arm twin up: door seed {self.config.door_seed}, {self.config.rate_hz:g} Hz, "
                               f"{self.interface}" + (f" at {p['servo_node']} ({self.servo_config.command_in_type})"
                                                      if self.interface != "forward_velocity" else ""))

    # ---- MoveIt Servo, a node of its own ------------------------------------------------------
    def _servo_types(self) -> tuple[Any, Any]:
        if self.interface != "servo_jazzy":
            return Int8, None
        try:
            from moveit_msgs.msg import ServoStatus
            from moveit_msgs.srv import ServoCommandType
        except ImportError:
            raise StartRefused("arm_twin: servo_jazzy needs the moveit_msgs interfaces") from None
        return ServoStatus, ServoCommandType

    def _servo_node(self, full_name: str, types: tuple[Any, Any]) -> None:
        """Servo under its own name (/servo_node): its topics, services and parameters, so a
        client reads `ros2 param get /servo_node moveit_servo.command_in_type` from it."""
        from rclpy.parameter import Parameter

        namespace, _, name = full_name.rstrip("/").rpartition("/")
        params = [Parameter(k, value=v) for k, v in self.servo.parameters().items()]
        # not the process's command line: a launch's `-r __node:=arm_twin` would rename Servo too
        node = Node(name, namespace=namespace or "/", context=self.context, parameter_overrides=params,
                    automatically_declare_parameters_from_overrides=True, use_global_arguments=False)
        self.servo_ros = node
        self.companion_nodes = (node,)
        status_type, command_type = types
        self.status_type = status_type
        self.pub_status = node.create_publisher(status_type, "~/status", STATE_QOS)
        node.create_subscription(TwistStamped, "~/delta_twist_cmds", self._on_twist, COMMAND_QOS)
        if self.interface == "servo_jazzy":
            node.create_service(command_type, "~/switch_command_type", self._on_switch)
            node.create_service(SetBool, "~/pause_servo", self._on_pause)
        else:
            node.create_service(Trigger, "~/start_servo", lambda _q, res: self._on_trigger(self.servo.start, res))
            node.create_service(Trigger, "~/pause_servo",
                                lambda _q, res: self._on_trigger(lambda: self.servo.set_paused(True), res))
            node.create_service(Trigger, "~/unpause_servo",
                                lambda _q, res: self._on_trigger(lambda: self.servo.set_paused(False), res))

    def _on_switch(self, request: Any, response: Any) -> Any:
        with self.lock:
            response.success = self.servo.switch_command_type(int(request.command_type))
        return response

    def _on_pause(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self.lock:
            self.servo.set_paused(bool(request.data))
        response.success, response.message = True, "Servoing disabled" if request.data else "Servoing enabled"
        return response

    def _on_trigger(self, action: Any, response: Trigger.Response) -> Trigger.Response:
        with self.lock:
            action()
        response.success = True
        return response

    def takes_twists(self) -> bool:
        return self.servo.running and not self.servo.paused and self.servo.command_type == 1

    def _on_twist(self, msg: TwistStamped) -> None:
        v = msg.twist.linear
        seconds = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        if msg.header.frame_id.lstrip("/") != self.base:
            self.counts["ignored_twists"] += 1
            self.get_logger().warning(f"twist ignored: frame {msg.header.frame_id!r} (expects {self.base!r})",
                                      throttle_duration_sec=2.0)
            return
        with self.lock:
            why = self.servo.twist((v.x, v.y, v.z), seconds)
        if why is not None:
            self.counts["ignored_twists"] += 1
            self.get_logger().warning(f"twist ignored: Servo {why}", throttle_duration_sec=2.0)
            return
        if any((msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z)):
            self.twin.unexecuted_angular += 1
        self.counts["twists"] += 1

    def _publish_status(self) -> None:
        code = self.servo.status()
        if code is None:
            return
        if self.interface == "servo_jazzy":
            self.pub_status.publish(self.status_type(code=code, message=""))
        else:
            self.pub_status.publish(Int8(data=code))

    # ---- a forward velocity controller ------------------------------------------------------
    def _forward_velocity(self, p: dict[str, Any]) -> None:
        """Joint velocities held until the next message; the URDF it is computed with goes
        out latched, as the robot's robot_state_publisher publishes it."""
        from std_msgs.msg import String

        from refine_ros.bringup import share_dirs
        from refine_ros.robots.arm.kinematics import Chain
        from refine_ros.wire import qos

        urdf = next(d / "urdf" / "door_scene.urdf" for d in share_dirs() if (d / "urdf" / "door_scene.urdf").is_file())
        self.description = arm_description(urdf.read_text(), self.base, self.config.base_frame, self.placement, self.ee)
        self.chain = Chain(self.description, self.base, self.ee)
        self.joint_velocity = np.zeros(len(ARM_JOINTS))
        pub = self.create_publisher(String, str(p["robot_description_topic"]), qos.LATCHED)
        pub.publish(String(data=self.description))
        self._description_pub = pub
        self.create_subscription(Float64MultiArray, str(p["velocity_command_topic"]), self._on_joint_velocities,
                                 COMMAND_QOS)

    def _on_joint_velocities(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != len(ARM_JOINTS) or not np.all(np.isfinite(msg.data)):
            self.get_logger().error(f"command size ({len(msg.data)}) does not match number of interfaces "
                                    f"({len(ARM_JOINTS)}), or not finite: ignored", throttle_duration_sec=1.0)
            return
        with self.lock:
            self.joint_velocity = np.asarray(msg.data, dtype=float)
        self.counts["velocity_commands"] += 1

    def _commanded_velocity(self, now: float) -> np.ndarray:
        """The tool velocity (m/s, base frame) the arm's controller commands at `now`."""
        if self.interface != "forward_velocity":
            return self.servo.velocity(now)
        if not np.any(self.joint_velocity):
            return np.zeros(3)
        q = self.twin.data.qpos[self.twin._qpos[:len(ARM_JOINTS)]]
        jac = self.chain.jacobian(dict(zip(ARM_JOINTS, (float(x) for x in q), strict=True)))
        by_name = dict(zip(ARM_JOINTS, self.joint_velocity, strict=True))
        return jac[:3] @ np.array([by_name[n] for n in self.chain.joint_names])

    # ---- gripper --------------------------------------------------------------------------
    def opening_of(self, position: float) -> float:
        """A goal position (driver units) -> the fingers' opening (m). The driver's closed limit
        is the fingers' travel's end (`CLOSED_GAP_M`), as a Robotiq's 0.8 rad is pads touching:
        closed on nothing the joint reads closed, not a fifth open."""
        share = (position - self.gripper_closed) / (self.gripper_open - self.gripper_closed)
        return self.closed_gap + min(max(share, 0.0), 1.0) * (self.open_gap - self.closed_gap)

    def position_of(self, opening: float) -> float:
        """The fingers' opening (m) -> the driver's units."""
        share = min(max((opening - self.closed_gap) / (self.open_gap - self.closed_gap), 0.0), 1.0)
        return self.gripper_closed + share * (self.gripper_open - self.gripper_closed)

    def _accept_goal(self, goal: Any) -> GoalResponse:
        """The parallel gripper controller takes exactly one joint's position."""
        if self.parallel and len(goal.command.position) != 1:
            self.counts["rejected_goals"] += 1
            self.get_logger().error("Received action goal with wrong number of position values, expects 1, got "
                                    f"{len(goal.command.position)}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute_grip(self, goal_handle: Any) -> Any:
        """Waits for the fingers as a driver does, tick by tick without blocking the executor
        (a coroutine awaiting the physics' next tick), ending early when a newer goal
        replaces this one."""
        from refine_ros.robots.arm.twin import GripperGoal

        command = goal_handle.request.command
        if self.parallel:
            position = float(command.position[0])
            effort = float(command.effort[0]) if len(command.effort) and command.effort[0] > 0 else self.default_effort
        else:
            position = float(command.position)
            effort = float(command.max_effort) if command.max_effort > 0 else self.default_effort
        with self.lock:
            self._goal_generation += 1
            mine = self._goal_generation
            self.twin.grip(GripperGoal(self.opening_of(position), effort), now_s(self))
        self.counts["gripper_goals"] += 1
        deadline = time.monotonic() + self.goal_timeout
        settle = time.monotonic() + 0.05  # let the fingers start moving before judging a stall
        state = None
        while True:
            await self._next_tick()
            with self.lock:
                state = self.twin.gripper_state(now_s(self))
            if goal_handle.is_cancel_requested:
                goal_handle.canceled()
                break
            if mine != self._goal_generation or not self.context.ok():
                goal_handle.abort()
                break
            if time.monotonic() > deadline or (time.monotonic() > settle and (state.reached_goal or state.stalled)):
                goal_handle.succeed()
                break
            goal_handle.publish_feedback(self._gripper_message(self.GripperCommand.Feedback(), state))
        return self._gripper_message(self.GripperCommand.Result(), state)

    def _gripper_message(self, out: Any, state: Any) -> Any:
        """A Feedback or Result of the gripper's action type from the twin's gripper state."""
        if self.parallel:
            out.state = JointState(name=[self.gripper_joint], position=[self.position_of(state.position)],
                                   effort=[state.effort])
        else:
            out.position, out.effort = self.position_of(state.position), state.effort
        if hasattr(out, "stalled"):
            out.stalled, out.reached_goal = state.stalled, state.reached_goal
        return out

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
        from refine_ros.robots.arm.twin import TwistCommand

        now = now_s(self)
        with self.lock:
            commanded = self._commanded_velocity(now)
            self.twin.twist(TwistCommand(tuple(self.placement.rotation() @ commanded)), now)
            readings = self.twin.tick(now)
            opening = self.twin.opening() if readings.joints is not None else 0.0
            tool = self.placement.inverse() * self.twin.tool_pose()
            self.scene.publish(now)
        waiters, self._tick_waiters = self._tick_waiters, []
        for future in waiters:
            future.set_result(None)
        if self.interface != "forward_velocity":
            self._publish_status()
        self._publish_truth(now, np.asarray(tool.position, dtype=float), commanded)
        self._ticks += 1
        if self._ticks % max(1, int(self.config.rate_hz / 5)) == 1:
            self._publish_target(now)
        if readings.joints is not None and not self.silence("joints"):
            js = readings.joints
            msg = JointState(name=[*js.name, self.gripper_joint], position=[*js.position, self.position_of(opening)],
                             velocity=[*js.velocity, 0.0])  # fmt: skip
            msg.header.stamp = stamp(js.stamp)
            self.pub_joints.publish(msg)
            if self.rsp.due(js.stamp):  # robot_state_publisher: /tf at most every 1 / tf_rate s
                edges = [transform_message(t, js.stamp) for t in readings.transforms or () if t.child != self.camera]
                if self.ee != "hand":  # the tool frame sits at Meta-World's hand point
                    edges.append(transform_message(Transform("hand", self.ee, Pose((0.0, 0.0, 0.0))), js.stamp))
                self.pub_tf.publish(self.TFMessage(transforms=edges))
        sighting = readings.marker
        if sighting is not None and sighting.visible and not self.silence("marker"):
            with self.lock:
                edge = self.twin.marker_transform(sighting)
            self.detections.push(readings.marker_stamp, edge)  # stamped at capture, out after the detection
        for captured, edge in self.detections.due(now):
            self.pub_tf.publish(self.TFMessage(transforms=[transform_message(edge, captured)]))

    def _publish_truth(self, now: float, tool: np.ndarray, commanded: np.ndarray) -> None:
        speed = 0.0
        if self._last_tool is not None and now > self._last_tool[0]:
            speed = float(np.linalg.norm(tool - self._last_tool[1]) / (now - self._last_tool[0]))
        self._last_tool = (now, tool)
        self.pub_truth.publish(Float64MultiArray(data=[now, *map(float, tool), speed,
                                                       float(np.linalg.norm(commanded))]))

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
            self.detections.clear()
            if self.interface == "forward_velocity":
                self.joint_velocity = np.zeros(len(ARM_JOINTS))
        response.success, response.message = True, f"door {self.config.door_seed} closed, arm home"
        return response

    def destroy_node(self) -> None:
        """The twin stops with the node: no tick runs after this, so the hand stays where it
        is (a halted arm); the simulator is closed."""
        twin = getattr(self, "twin", None)
        for node in getattr(self, "companion_nodes", ()):
            node.destroy_node()
        destroy_actions(self)
        super().destroy_node()
        if twin is not None:
            with self.lock:
                twin.close()


def main(args: list[str] | None = None) -> None:
    without_shared_memory("arm_twin", args)  # see "Transport" above
    run_node(ArmTwinNode, args)


if __name__ == "__main__":
    main()
