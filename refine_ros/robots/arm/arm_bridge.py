"""Arm bridge: safe door-task actions to an arm's standard interfaces, the arm's TF and joint
states to the door task's 39-value observation. The mappings are refine_ros/robots/arm/interface.py,
refine_ros/robots/arm/kinematics.py and refine_ros/robots/arm/tf_buffer.py (plain Python, tested without DDS); this
node wires them to the robot's topics, services and actions.

Motion (`command_interface`): MoveIt Servo as of Jazzy (default) or Humble, a plain TwistStamped
topic, or a ros2_control forward velocity controller (joint velocities from the arm's own URDF).
Gripper (`gripper_interface`): the control_msgs GripperCommand or ParallelGripperCommand action,
a std_msgs/Float64 topic, or none. Poses: from TF (`/tf`, `/tf_static`): the tool frame and the
door handle's frame (e.g. an AprilTag detector's) in the arm's base frame, each fresh while its
transforms' stamps are younger than its own timeout, set after its publisher's rate
(`ee_timeout`: robot_state_publisher, 20 Hz; `handle_timeout`: a camera frame plus the
detector's latency; `sensor_timeout`: joint states). Observations go out at `observation_rate`
only while every input is fresh, so a dead sensor silences the heartbeat and the safety
watchdog stops the arm. One exception, `handle_hold`: a tag the gripper hides near the handle
publishes no detection, so the handle's last sighting is repeated for that long past its
timeout; without it, a hand that hides the tag silences the observations, the safety node
holds the arm, and the arm can never be moved out of the camera's way.

Loud, not silent: a step is reported executed (refine/command_result) only when the command
path could act on it. MoveIt Servo not yet switched to twists / started and unpaused, a Jazzy
Servo that publishes no status (paused: it executes nothing), Servo's own parameters not read
yet, a gripper goal with no server to take it, a forward velocity controller without the
command guard: each makes the step rejected, and a server that has not answered
`server_timeout` s after the start is an error naming it. Servo's `command_in_type` and
`scale.linear` are read from Servo itself (`<servo_node>/get_parameters`): unitless twists are
scaled so the arm moves at the m/s the limits allow, or refused when that cannot be done.

The last hop (refine_ros/nodes/_bridge.py): the bridge's own command watchdog
(`command_timeout`); a forward velocity controller holds its last command with no timeout, so
through it the bridge moves the arm only while `command_guard` (a process of its own,
refine_ros/nodes/command_guard.py) reads the controller's topic: killed, the bridge leaves the
arm stopped by the guard.

The message packages each setting needs (moveit_msgs for servo_jazzy, control_msgs for the
gripper action, tf2_msgs for TF) are imported only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
from geometry_msgs.msg import PointStamped, TwistStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64, Float64MultiArray, Int8, String
from std_srvs.srv import SetBool, Trigger

from refine_core.tasks.registry import get_task
from refine_ros.bringup.spin import destroy_actions
from refine_ros.nodes._bridge import BridgeNode
from refine_ros.nodes._main import run_node
from refine_ros.params import (
    Param,
    Required,
    StartRefused,
    Unset,
    declare_parameters,
    refusing,
    values,
)
from refine_ros.robots.arm import interface as arm
from refine_ros.robots.arm.kinematics import Chain, KinematicsError, joint_velocities
from refine_ros.robots.arm.tf_buffer import TfBuffer
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_json, pack_step
from refine_ros_interfaces.msg import Step

# The simulator's column order is the contract the fitted programs were trained on, so the
# bridge takes it from the task spec instead of spelling it again.
COLUMNS: tuple[str, ...] = get_task("door_open").spec.observation_columns
ACTION_AXES = 4

# Every parameter is read-only: the limits must not change under a running arm, and the rest
# shapes the node's interfaces. The arm's own values have no code default: the profile sets them.
PARAMETERS: dict[str, Param] = {
    "command_interface": Param("servo_jazzy", "'servo_jazzy', 'servo_humble' (MoveIt Servo), 'twist' (a plain "
                               "TwistStamped topic) or 'forward_velocity' (ros2_control joint velocities)"),
    "servo_topic": Param("/servo_node/delta_twist_cmds", "geometry_msgs/TwistStamped command topic (servo_*, twist)"),
    "servo_node": Param("/servo_node", "MoveIt Servo's node: its switch_command_type / pause_servo (Jazzy) or "
                        "start_servo / pause_servo / unpause_servo (Humble) services"),
    "servo_status_topic": Param("/servo_node/status", "Servo's status: moveit_msgs/ServoStatus (Jazzy), "
                                "std_msgs/Int8 (Humble)"),
    "servo_status_timeout": Param(0.5, "seconds a Servo status stays the one in force (none that young: Servo "
                                  "is paused or gone, and the step is rejected)", (0.01, 10.0)),
    "velocity_command_topic": Param("/forward_velocity_controller/commands", "std_msgs/Float64MultiArray of joint "
                                    "velocities (forward_velocity)"),
    "arm_joints": Param(Unset("string_array"), "the forward velocity controller's joints, in its order "
                        "(forward_velocity: required)"),
    "robot_description_topic": Param("/robot_description", "std_msgs/String URDF the robot's own "
                                     "robot_state_publisher publishes (forward_velocity: the kinematics)"),
    "ik_damping": Param(0.02, "damped-least-squares damping (forward_velocity): larger is calmer near "
                        "singularities, less exact", (0.0, 1.0)),
    "base_frame": Param("base_link", "the arm's base frame: commands and poses are in it, and so is the safety "
                        "node's workspace box"),
    "ee_frame": Param("tool0", "the tool frame whose position is the gripper's (e.g. UR: tool0, Franka: "
                      "fr3_hand_tcp); forward_velocity: the chain's tip link"),
    "handle_frame": Param("door_handle", "TF frame of the door handle (e.g. an AprilTag detector's tag frame); its "
                          "orientation is the door quaternion"),
    "max_speed": Param(Required("double"), "m/s per axis for a unit action delta (the arm's profile sets it)",
                       (0.0, 1.0)),
    "gripper_interface": Param("action", "'action' (control_msgs/action/GripperCommand), 'parallel_action' "
                               "(control_msgs/action/ParallelGripperCommand: ros2_controllers' parallel gripper "
                               "controller, Robotiq on Jazzy and later), 'topic' (std_msgs/Float64) or 'none'"),
    "gripper_action": Param("/gripper_controller/gripper_cmd", "the gripper's action server (action, parallel_action)"),
    "gripper_topic": Param("/gripper_command", "std_msgs/Float64 gripper command topic"),
    "gripper_open_position": Param(Unset("double"), "gripper position command for open (Franka: 0.04 m per "
                                   "finger; Robotiq 2F-85 knuckle: 0.0 rad); required unless gripper_interface is none"),
    "gripper_closed_position": Param(Unset("double"), "gripper position command for closed (Franka: 0.0; Robotiq: "
                                     "0.8); required unless gripper_interface is none"),
    "gripper_max_effort": Param(0.0, "max_effort of each GripperCommand goal (N; 0: the driver's default)",
                                (0.0, 1000.0)),
    "gripper_deadband": Param(0.05, "a new gripper goal only when the target moved by more than this share of "
                              "the open-closed range", (0.0, 1.0)),
    "joint_states_topic": Param("/joint_states", "sensor_msgs/JointState of the arm and gripper: the driver's "
                                "heartbeat"),
    "gripper_joints": Param(["finger_joint_1", "finger_joint_2"], "joints whose summed positions give the opening"),
    "gripper_joint_open": Param(0.08, "summed gripper joint positions when fully open"),
    "gripper_joint_closed": Param(0.0, "summed gripper joint positions when closed (Robotiq knuckle: 0.8, above "
                                  "open)"),
    "target_mode": Param("fixed", "'fixed' (target_position) or 'topic' (geometry_msgs/PointStamped on "
                         "target_topic)"),
    "target_position": Param([0.45, 0.2, 0.2], "target xyz of the handle in base_frame, m, when target_mode is "
                             "fixed"),
    "target_topic": Param("/door_target", "target topic when target_mode is topic"),
    "observation_rate": Param(50.0, "Hz of refine/observation (the control rate)", (1.0, 1000.0)),
    "sensor_timeout": Param(0.1, "seconds: a joint state (the gripper's opening) stamped older is stale",
                            (0.001, 5.0)),
    "ee_timeout": Param(Required("double"), "seconds: the tool pose is stale when its transforms are stamped older; "
                        "set after the publisher's rate (robot_state_publisher: 20 Hz, 50 to 67 ms apart)",
                        (0.001, 5.0)),
    "handle_timeout": Param(Required("double"), "seconds: the handle pose is stale when its transform is stamped "
                            "older; set after the detector's (a tag detector stamps the camera frame: its period "
                            "plus the detection time)", (0.001, 5.0)),
    "handle_hold": Param(0.0, "seconds past handle_timeout for which the handle's last sighting is repeated while "
                         "the tag is not seen (the gripper hides it near the handle); 0: never", (0.0, 10.0)),
    "driver_timeout": Param(0.2, "seconds without joint states after which the driver counts as lost: the bridge "
                            "sends the stop itself, every tick, until it is back", (0.001, 5.0)),
    "command_timeout": Param(0.1, "seconds without a safe command after the arm was commanded (the safety node "
                             "gone): the bridge sends the stop itself, every tick, until they are back", (0.01, 5.0)),
    "startup_grace": Param(10.0, "seconds after start before a driver never heard counts as lost", (0.0, 600.0)),
    "server_timeout": Param(10.0, "seconds after start within which MoveIt Servo and the gripper's action server "
                            "must answer; later, each missing one is an error naming it", (0.1, 600.0)),
    "command_guard": Param("command_guard", "the command_guard node that must read the forward velocity "
                           "controller's topic before the bridge moves the arm through it (forward_velocity)"),
}


def _interface(module: str, name: str, why: str) -> Any:
    """A class of an optional interface package, or StartRefused saying what to install."""
    package = module.split(".")[0]
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError:
        raise StartRefused(f"arm_bridge: {why} needs the {package} interfaces; install "
                           f"ros-$ROS_DISTRO-{package.replace('_', '-')} (rosdep installs it)") from None


class ArmBridge(BridgeNode):
    axes = ACTION_AXES

    def __init__(self, **kwargs) -> None:
        super().__init__("arm_bridge", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)  # refuses to start without the arm's own values
            self.interface, self.gripper_interface = str(p["command_interface"]), str(p["gripper_interface"])
            self._check(p)
            tf_message = _interface("tf2_msgs.msg", "TFMessage", "poses from TF")
            servo_status = (_interface("moveit_msgs.msg", "ServoStatus", "servo_jazzy")
                            if self.interface == "servo_jazzy" else Int8)
            command_type = (_interface("moveit_msgs.srv", "ServoCommandType", "servo_jazzy")
                            if self.interface == "servo_jazzy" else None)
            gripper_action = (_interface("control_msgs.action", arm.GRIPPER_ACTION_TYPES[self.gripper_interface],
                                         f"gripper_interface {self.gripper_interface}")
                              if self.gripper_interface in arm.GRIPPER_ACTION_TYPES else None)
        self.max_speed = float(p["max_speed"])
        self.base_frame, self.ee_frame, self.handle_frame = (str(p[k]) for k in ("base_frame", "ee_frame",
                                                                                  "handle_frame"))
        self.sensor_timeout = float(p["sensor_timeout"])
        self.ee_timeout, self.handle_timeout = float(p["ee_timeout"]), float(p["handle_timeout"])
        self.handle_hold = float(p["handle_hold"])
        self.status_timeout = float(p["servo_status_timeout"])
        self.server_timeout = float(p["server_timeout"])
        self.guard_name = str(p["command_guard"])
        self.velocity_topic = str(p["velocity_command_topic"])
        self._guard_seen: tuple[float, bool] = (-1.0, False)
        self._said: set[str] = set()
        self._created = self.get_clock().now().nanoseconds * 1e-9
        self.gripper_joints = [str(n) for n in p["gripper_joints"]]
        self.joint_open, self.joint_closed = float(p["gripper_joint_open"]), float(p["gripper_joint_closed"])
        self.arm_joints = [str(n) for n in p["arm_joints"] or ()]
        self.damping = float(p["ik_damping"])
        self.tf = TfBuffer()
        self.chain: Chain | None = None
        self.servo_status: tuple[float, int, str] | None = None  # time, code, message
        self._positions: dict[str, float] = {}

        # motion
        if self.interface == "forward_velocity":
            self._motion_pub = self.create_publisher(Float64MultiArray, p["velocity_command_topic"], qos.COMMAND)
            self.create_subscription(String, p["robot_description_topic"], self._on_description, qos.LATCHED)
        else:
            self._motion_pub = self.create_publisher(TwistStamped, p["servo_topic"], qos.COMMAND)
        self.twist_factor, self.servo_problem = 1.0, None
        if self.interface.startswith("servo_"):
            self.create_subscription(servo_status, p["servo_status_topic"], self._on_servo_status, qos.STATE)
            self._servo_setup(str(p["servo_node"]).rstrip("/"), command_type)
        # gripper
        self.goals = arm.GripperGoals(float(p["gripper_open_position"] or 0.0),
                                      float(p["gripper_closed_position"] or 0.0), float(p["gripper_deadband"]))
        self.gripper_max_effort = float(p["gripper_max_effort"])
        self._gripper_pub = self._gripper_client = None
        if self.gripper_interface == "topic":
            self._gripper_pub = self.create_publisher(Float64, p["gripper_topic"], qos.COMMAND)
        elif gripper_action is not None:
            from refine_ros.bringup.spin import action_client

            self._gripper_action = gripper_action
            self.gripper_action_name = str(p["gripper_action"])
            self._gripper_client = action_client(self, gripper_action, self.gripper_action_name)
        # observations
        self._obs_pub = self.create_publisher(Step, "refine/observation", qos.CONTROL)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._columns_pub.publish(pack_json(list(COLUMNS)))
        self.create_subscription(tf_message, "/tf", lambda m: self._on_tf(m, static=False), qos.TF)
        self.create_subscription(tf_message, "/tf_static", lambda m: self._on_tf(m, static=True), qos.TF_STATIC)
        self.create_subscription(JointState, p["joint_states_topic"], self._on_joints, qos.SENSOR)
        if p["target_mode"] == "topic":
            self.create_subscription(PointStamped, p["target_topic"], self._on_target, qos.SENSOR)
            self._target: np.ndarray | None = None
        else:
            self._target = np.asarray(p["target_position"], dtype=float)
        self._opening: tuple[float, float] | None = None
        self._previous: np.ndarray | None = None
        self._start_bridge(float(p["driver_timeout"]), float(p["command_timeout"]), float(p["startup_grace"]))
        self.create_timer(1.0 / float(p["observation_rate"]), self._tick)

    def _check(self, p: dict[str, Any]) -> None:
        if self.interface not in arm.COMMAND_INTERFACES:
            raise StartRefused(f"arm_bridge: command_interface must be one of {', '.join(arm.COMMAND_INTERFACES)}, "
                               f"got {self.interface!r}")
        if self.gripper_interface not in arm.GRIPPER_INTERFACES:
            raise StartRefused(f"arm_bridge: gripper_interface must be one of {', '.join(arm.GRIPPER_INTERFACES)}, "
                               f"got {self.gripper_interface!r}")
        opened, closed = p["gripper_open_position"], p["gripper_closed_position"]
        if self.gripper_interface != "none" and (opened is None or closed is None or opened == closed):
            raise StartRefused("arm_bridge: set gripper_open_position and gripper_closed_position (the gripper's "
                               "position commands for open and closed, different), or gripper_interface: none")
        if self.interface == "forward_velocity" and not p["arm_joints"]:
            raise StartRefused("arm_bridge: forward_velocity needs arm_joints, the controller's joints in its order")
        if self.interface == "forward_velocity" and not str(p["command_guard"]):
            raise StartRefused("arm_bridge: a forward velocity controller holds its last command with no timeout; "
                               "forward_velocity needs command_guard, the command_guard node beside the bridge that "
                               "stops the arm if the bridge dies")
        if p["target_mode"] not in ("fixed", "topic"):
            raise StartRefused(f"arm_bridge: target_mode must be 'fixed' or 'topic', got {p['target_mode']!r}")
        if len(p["target_position"]) != 3:
            raise StartRefused("arm_bridge: target_position needs 3 values (m, in base_frame)")
        if not p["gripper_joints"] or p["gripper_joint_open"] == p["gripper_joint_closed"]:
            raise StartRefused("arm_bridge: gripper_joints needs a name, and gripper_joint_open must differ from "
                               "gripper_joint_closed")

    # ---- MoveIt Servo -------------------------------------------------------------------
    def _servo_setup(self, node: str, command_type: Any) -> None:
        """Servo's own parameters are read first (how it reads a twist), then it is told to take
        twists (Jazzy) or started (Humble) and unpaused; the calls are retried until they
        succeed, since Servo may come up after the bridge, and a Servo that has not answered
        `server_timeout` after the start is an error naming what is missing."""
        from rcl_interfaces.srv import GetParameters

        self.servo_node = node
        self._get_parameters = self.create_client(GetParameters, f"{node}/get_parameters")
        names = ["moveit_servo.command_in_type", "moveit_servo.scale.linear"]
        self._servo_parameters_step = (self._get_parameters, lambda: GetParameters.Request(names=names))
        if self.interface == "servo_jazzy":
            self._command_type = command_type
            self._switch = self.create_client(command_type, f"{node}/switch_command_type")
            self._pause = self.create_client(SetBool, f"{node}/pause_servo")
            self._setup_steps = [(self._switch, lambda: command_type.Request(command_type=arm.SERVO_TWIST_COMMAND)),
                                 (self._pause, lambda: SetBool.Request(data=False))]
        else:
            self._start = self.create_client(Trigger, f"{node}/start_servo")
            self._pause = self.create_client(Trigger, f"{node}/pause_servo")
            self._unpause = self.create_client(Trigger, f"{node}/unpause_servo")
            self._setup_steps = [(self._start, Trigger.Request), (self._unpause, Trigger.Request)]
        self._setup_steps.insert(0, self._servo_parameters_step)
        self.servo_ready = False
        self._pending = None
        self._setup_timer = self.create_timer(0.2, self._servo_setup_step)

    def _servo_setup_step(self) -> None:
        if self._pending is not None and not self._pending.done():
            self._servo_late("answer")
            return
        if self._pending is not None:
            response = self._pending.result()
            self._pending = None
            step = self._setup_steps[0]
            if step is self._servo_parameters_step:
                if response is not None and self._take_servo_parameters(response):
                    self._setup_steps.pop(0)
            elif response is not None and getattr(response, "success", False):
                self._setup_steps.pop(0)
            else:
                self._say("servo refused", "error", f"MoveIt Servo at {self.servo_node} refused "
                          f"{step[0].srv_name}: {getattr(response, 'message', '') or 'success false'}")
        if not self._setup_steps:
            self.servo_ready = True
            self._setup_timer.cancel()
            self.get_logger().info(f"MoveIt Servo ({self.interface}) takes twist commands"
                                   + (f" (unitless: each twist x {self.twist_factor:g})" if self.twist_factor != 1.0
                                      else ""))
            return
        client, request = self._setup_steps[0]
        if client.service_is_ready():
            self._pending = client.call_async(request())
        else:
            self._servo_late("offer")

    def _servo_late(self, what: str) -> None:
        if self._now() - self._created > self.server_timeout:
            client = self._setup_steps[0][0]
            self._say(f"servo {client.srv_name}", "error",
                      f"MoveIt Servo ({self.interface}) at {self.servo_node} does not {what} {client.srv_name} "
                      f"{self.server_timeout:g} s after the start: the arm does not move (is Servo running, under "
                      "that name?)")

    def _take_servo_parameters(self, response: Any) -> bool:
        """Servo's command_in_type and scale.linear, as Servo itself holds them."""
        from rclpy.parameter import parameter_value_to_python

        got = [parameter_value_to_python(v) for v in response.values]
        if len(got) != 2 or not isinstance(got[0], str) or not isinstance(got[1], (int, float)):
            self._say("servo parameters", "error", f"MoveIt Servo at {self.servo_node} has no moveit_servo."
                      "command_in_type / moveit_servo.scale.linear parameters: the arm does not move")
            return False
        command_in_type, scale = got[0], float(got[1])
        self.twist_factor, self.servo_problem = arm.servo_twist_factor(command_in_type, scale, self.max_speed)
        if self.servo_problem is not None:
            self.get_logger().error(f"arm_bridge: {self.servo_problem}; every step is rejected")
        elif command_in_type == "unitless":
            self.get_logger().warning(
                f"MoveIt Servo reads twists as unitless with scale.linear {scale:g} m/s: the bridge sends each "
                f"velocity divided by {scale:g}, so the arm moves at the m/s the limits allow (set command_in_type: "
                "speed_units in Servo's parameters to send m/s as they are)")
        return True

    def _say(self, key: str, level: str, text: str) -> None:
        """A log line once per key (a state that persists is reported once, not 50 times a second)."""
        if key not in self._said:
            self._said.add(key)
            getattr(self.get_logger(), level)(text)

    def _on_servo_status(self, msg: Any) -> None:
        code = int(msg.data) if isinstance(msg, Int8) else int(msg.code)
        self.servo_status = (self._now(), code, getattr(msg, "message", ""))

    def _servo_refusal(self) -> str | None:
        if self.servo_problem is not None:
            return self.servo_problem
        if not self.servo_ready:
            return (f"MoveIt Servo at {self.servo_node} not ready yet (parameters read, switched to twists / "
                    "started, unpaused)")
        if self.servo_status is None or self._now() - self.servo_status[0] > self.status_timeout:
            self._say("servo silent", "error", f"MoveIt Servo at {self.servo_node} publishes no status: paused "
                      "(Jazzy executes nothing while paused) or gone; steps are rejected until it reports again")
            return f"MoveIt Servo at {self.servo_node} publishes no status (paused or gone)"
        self._said.discard("servo silent")
        _, code, message = self.servo_status
        why = arm.servo_rejection(self.interface, code)
        return None if why is None else f"MoveIt Servo status {code} ({why}){': ' + message if message else ''}"

    # ---- commands -----------------------------------------------------------------------
    def command_publishers(self) -> list[Any]:
        return [self._motion_pub]

    def _publish_motion(self, linear: np.ndarray) -> str | None:
        if self.interface == "forward_velocity":
            refused = None if not np.any(linear) else self._guard_refusal()
            velocities, why = self._joint_velocities(np.zeros(3) if refused else linear)
            self._motion_pub.publish(Float64MultiArray(data=[float(v) for v in velocities]))
            return refused or why
        twist = TwistStamped()
        twist.header.stamp = self.get_clock().now().to_msg()
        twist.header.frame_id = self.base_frame
        twist.twist.linear.x, twist.twist.linear.y, twist.twist.linear.z = (float(v) * self.twist_factor
                                                                             for v in linear)
        self._motion_pub.publish(twist)
        return self._servo_refusal() if self.interface.startswith("servo_") else None

    def _guard_refusal(self) -> str | None:
        """Why the forward velocity controller must not be given motion now: the command guard
        does not read its topic (checked at most every 0.5 s: a graph query)."""
        now = self._now()
        checked, present = self._guard_seen
        if now - checked > 0.5:
            present = any(info.node_name == self.guard_name
                          for info in self.get_subscriptions_info_by_topic(self.velocity_topic))
            self._guard_seen = (now, present)
        if present:
            self._said.discard("no guard")
            return None
        self._say("no guard", "error", f"no {self.guard_name} reads {self.velocity_topic}: a forward velocity "
                  "controller holds its last command, so the bridge does not move the arm without the guard that "
                  "stops it if the bridge dies (start command_guard with command_type joint_velocities)")
        return f"no {self.guard_name} on {self.velocity_topic}"

    def _joint_velocities(self, linear: np.ndarray) -> tuple[np.ndarray, str | None]:
        """Joint velocities in the controller's order; zero (and why) when they cannot be
        computed: no URDF yet, joint states missing, or a chain that is not the controller's."""
        zero = np.zeros(len(self.arm_joints))
        if not np.any(linear):
            return zero, None
        if self.chain is None:
            return zero, "no robot_description received yet"
        if set(self.chain.joint_names) != set(self.arm_joints):
            return zero, (f"the URDF chain {self.base_frame} -> {self.ee_frame} has joints "
                          f"{list(self.chain.joint_names)}, the controller {self.arm_joints}")
        if not all(n in self._positions for n in self.arm_joints):
            return zero, "no joint state for every arm joint"
        qdot = joint_velocities(self.chain, self._positions, linear, self.damping)
        by_name = dict(zip(self.chain.joint_names, qdot, strict=True))
        return np.array([by_name[n] for n in self.arm_joints]), None

    def send_command(self, values: np.ndarray) -> str | None:
        refused = self._publish_motion(arm.cartesian_velocity(values, self.max_speed))
        target = self.goals.next_goal(float(values[3]))
        gripper = self._send_gripper(target) if target is not None else None
        return refused or gripper

    def _send_gripper(self, position: float) -> str | None:
        """Send a gripper goal; why it could not go out (None: it went)."""
        if self._gripper_pub is not None:
            self._gripper_pub.publish(Float64(data=position))
            return None
        if self._gripper_client is None:
            return None
        kind = f"control_msgs/action/{self._gripper_action.__name__}"
        if not self._gripper_client.server_is_ready():
            self.goals.last = None  # not sent: try again with the next command
            if self._now() - self._created > self.server_timeout:
                self._say("no gripper", "error", f"no {kind} server at {self.gripper_action_name} "
                          f"{self.server_timeout:g} s after the start: the gripper does not move (is its controller "
                          "running? ros2_robotiq_gripper serves ParallelGripperCommand on Jazzy and later, "
                          "GripperCommand on Humble: gripper_interface parallel_action / action)")
            return f"no gripper action server at {self.gripper_action_name}"
        self._said.discard("no gripper")
        goal = self._gripper_action.Goal()
        if self.gripper_interface == "parallel_action":
            goal.command.name = [self.gripper_joints[0]]
            goal.command.position = [float(position)]
            if self.gripper_max_effort > 0:
                goal.command.effort = [self.gripper_max_effort]
        else:
            goal.command.position, goal.command.max_effort = position, self.gripper_max_effort
        future = self._gripper_client.send_goal_async(goal)
        future.add_done_callback(lambda f, target=position: self._on_gripper_goal(f, target, kind))
        return None

    def _on_gripper_goal(self, future: Any, target: float, kind: str) -> None:
        handle = future.result()
        if handle is None or not handle.accepted:
            self.goals.last = None  # ask again with the next command
            self.get_logger().error(f"the {kind} server at {self.gripper_action_name} rejected the goal "
                                    f"{target:g}", throttle_duration_sec=2.0)

    def send_stop(self) -> None:
        """No motion; the gripper keeps its position (no new goal)."""
        self._publish_motion(np.zeros(3))

    def destroy_node(self) -> None:
        """Also pause Servo (fire and forget: the executor no longer spins to see an answer)."""
        if self._started and self.commanded and self.context.ok() and self.interface.startswith("servo_"):
            try:
                request = SetBool.Request(data=True) if self.interface == "servo_jazzy" else Trigger.Request()
                if self._pause.service_is_ready():
                    self._pause.call_async(request)
            except Exception as exc:  # noqa: BLE001 - shutting down: report, never mask the exit
                self.get_logger().warning(f"could not pause MoveIt Servo: {exc}")
        destroy_actions(self)
        super().destroy_node()

    # ---- observations -------------------------------------------------------------------
    def _on_description(self, msg: String) -> None:
        try:
            self.chain = Chain(msg.data, self.base_frame, self.ee_frame)
        except KinematicsError as exc:
            self.chain = None
            self.get_logger().error(f"forward_velocity: {exc}")

    def _on_tf(self, msg: Any, static: bool) -> None:
        for t in msg.transforms:
            stamp = None if static else t.header.stamp.sec + t.header.stamp.nanosec * 1e-9
            tr, q = t.transform.translation, t.transform.rotation
            self.tf.set_transform(t.header.frame_id, t.child_frame_id, (tr.x, tr.y, tr.z), (q.x, q.y, q.z, q.w), stamp)

    def _on_joints(self, msg: JointState) -> None:
        now = self._now()
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        measured = stamp if stamp > 0 else now  # an unstamped driver: judged by arrival
        for name, position in zip(msg.name, msg.position, strict=False):
            self._positions[name] = float(position)
        self.note_driver(now)
        index = {n: i for i, n in enumerate(msg.name)}
        if all(n in index and index[n] < len(msg.position) for n in self.gripper_joints):
            total = sum(msg.position[index[n]] for n in self.gripper_joints)
            self._opening = (measured, arm.gripper_opening(total, self.joint_open, self.joint_closed))

    def _on_target(self, msg: PointStamped) -> None:
        self._target = np.array([msg.point.x, msg.point.y, msg.point.z])

    def _on_start(self) -> None:
        self._previous = None  # the first observation's "previous" half is itself

    @staticmethod
    def _fresh(stamp: float | None, now: float, timeout: float) -> bool:
        return stamp is None or abs(now - stamp) <= timeout

    def _tick(self) -> None:
        now = self._now()
        if not self.check_driver(now):
            self.observed(now, "driver", self.driver_silence(now))
            return
        ee = self.tf.lookup(self.base_frame, self.ee_frame)
        handle = self.tf.lookup(self.base_frame, self.handle_frame)
        # (input, what it is, whether it came, its stamp (None: a static transform), how old it may be)
        readings = (
            ("target", "the door's target", self._target is not None, None, 0.0),
            ("tool", f"TF {self.base_frame} -> {self.ee_frame} (the tool)", ee is not None, ee and ee.stamp,
             self.ee_timeout),
            ("handle", f"TF {self.base_frame} -> {self.handle_frame} (the handle's tag)", handle is not None,
             handle and handle.stamp, self.handle_timeout + self.handle_hold),
            ("gripper", "the gripper's joint state", self._opening is not None, self._opening and self._opening[0],
             self.sensor_timeout))
        for key, what, came, stamp, limit in readings:
            if not came:
                self.observed(now, key, f"no {what} yet")
                return
            if not self._fresh(stamp, now, limit):
                self.observed(now, key, f"{what} stamped {now - stamp:.2f} s ago (limit {limit:g} s)")
                return
        current = arm.door_step_values(ee.transform.translation, self._opening[1], handle.transform.translation,
                                       handle.transform.rotation)
        if not np.all(np.isfinite(current)):
            self.observed(now, "non-finite", "a reading is NaN or infinite")
            return
        previous = current if self._previous is None else self._previous
        obs = arm.door_observation(current, previous, self._target)
        self._obs_pub.publish(pack_step(self.episode, self.step, COLUMNS, obs, self.get_clock().now().to_msg()))
        self._previous, self.step = current, self.step + 1
        self.observed(now)


def main(args: list[str] | None = None) -> None:
    run_node(ArmBridge, args)


if __name__ == "__main__":
    main()
