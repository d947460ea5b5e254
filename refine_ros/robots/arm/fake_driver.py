"""The arm's hardware stand-in for the tests and the benchmarks (`refine bench`), run as a process
of its own: the interfaces a real arm's stack exposes, with the genuine message types, and
nothing of ours. No profile starts it; it stands where the physical arm would
(`python -m refine_ros.robots.fake_driver arm --ros-args -p interface:=servo_jazzy`).

`FakeArmDriver`:
- MoveIt Servo as of Jazzy (`interface: servo_jazzy`): TwistStamped on
  /servo_node/delta_twist_cmds, `~/switch_command_type` (moveit_msgs/srv/ServoCommandType),
  `~/pause_servo` (std_srvs/SetBool), `~/status` (moveit_msgs/ServoStatus); as of Humble
  (`servo_humble`): `~/start_servo`, `~/pause_servo`, `~/unpause_servo` (std_srvs/Trigger) and
  std_msgs/Int8 status. Like Servo it takes twists only once switched to TWIST (Jazzy) or
  started (Humble), and halts when no command came for `incoming_command_timeout`.
- A ros2_control forward velocity controller (`forward_velocity`): joint velocities on
  /forward_velocity_controller/commands, held until the next command (as the real one does),
  integrated over the URDF's chain; the URDF goes out on /robot_description.
- A Robotiq 2F-85 behind a control_msgs action on /robotiq_gripper_controller/gripper_cmd
  (knuckle 0.0 open, 0.8 closed): ParallelGripperCommand (`gripper_action_type:
  parallel_gripper_command`, ros2_robotiq_gripper on Jazzy and later: one joint's position) or
  GripperCommand (`gripper_command`, its Humble branch).
- /tf with the tool frame and a door handle marker in the base frame, /joint_states.

Faults a test injects through `fake/*` services (std_srvs/SetBool: the test's levers, not a
robot interface): `fake/driver_silent` (no joint states and no TF: the driver is gone),
`fake/handle_lost` (the marker is not seen: a stale sensor), `fake/servo_halt` (Servo reports
JOINT_BOUND and refuses motion).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from geometry_msgs.msg import TransformStamped, TwistStamped
from rclpy.action import ActionServer
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, Int8, String
from std_srvs.srv import SetBool, Trigger

from refine_ros.bringup.spin import destroy_actions
from refine_ros.robots.arm.kinematics import Chain

KNUCKLE = "robotiq_85_left_knuckle_joint"


def _default_urdf() -> Path:
    """The Sawyer-like arm of urdf/door_scene.urdf (right_arm_base_link -> hand, 7 joints)."""
    from refine_ros.bringup import share_dirs

    return next(d / "urdf" / "door_scene.urdf" for d in share_dirs() if (d / "urdf" / "door_scene.urdf").is_file())


SERVO_JOINT_BOUND = {"servo_jazzy": 6, "servo_humble": 5}
"""MoveIt Servo's JOINT_BOUND status code in each release."""
ARM_PARAMETERS = {
    "interface": "servo_jazzy", "base_frame": "base_link", "ee_frame": "tool0", "handle_frame": "door_handle",
    "start": [0.45, 0.0, 0.25], "handle": [0.55, 0.05, 0.2], "urdf": "", "incoming_command_timeout": 0.1,
    "rate": 100.0, "gripper_action_type": "gripper_command",
}
"""The fake arm's parameters: the tool's start and the handle marker in the base frame (m),
the URDF of forward_velocity ('' = urdf/door_scene.urdf), Servo's command timeout (s), Hz."""


class FakeArmDriver(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("fake_arm_driver", **kwargs)
        import control_msgs.action
        from tf2_msgs.msg import TFMessage

        p = {name: self.declare_parameter(name, default).value for name, default in ARM_PARAMETERS.items()}
        self.parallel = p["gripper_action_type"] == "parallel_gripper_command"
        self.gripper_type = getattr(control_msgs.action, "ParallelGripperCommand" if self.parallel
                                    else "GripperCommand")
        self.interface = p["interface"]
        self.base, self.ee_frame, self.handle_frame = p["base_frame"], p["ee_frame"], p["handle_frame"]
        self.ee = np.array(p["start"], dtype=float)
        self.handle_xyz = np.array(p["handle"], dtype=float)
        self.timeout = float(p["incoming_command_timeout"])
        self.period = 1.0 / float(p["rate"])
        self.velocity = np.zeros(3)
        self.last_twist = -1e9
        self.knuckle = 0.0
        self.faults = {"driver_silent": False, "handle_lost": False, "servo_halt": False}
        self.tf_message = TFMessage
        self.pub_tf = self.create_publisher(TFMessage, "/tf", QoSProfile(depth=100))
        self.pub_joints = self.create_publisher(JointState, "/joint_states", QoSProfile(depth=10))

        if self.interface == "forward_velocity":
            urdf = Path(p["urdf"] or _default_urdf()).read_text()
            self.chain = Chain(urdf, self.base, self.ee_frame)
            self.q = {name: 0.3 * (-1) ** i for i, name in enumerate(self.chain.joint_names)}
            self.qdot = np.zeros(len(self.q))
            latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.create_publisher(String, "/robot_description", latched).publish(String(data=urdf))
            self.create_subscription(Float64MultiArray, "/forward_velocity_controller/commands", self._on_velocities,
                                     QoSProfile(depth=10))
        else:
            self._servo_interfaces()
        self._gripper = ActionServer(self, self.gripper_type, "/robotiq_gripper_controller/gripper_cmd",
                                     self._on_gripper_goal)
        for name in self.faults:
            self.create_service(SetBool, f"fake/{name}", lambda req, res, n=name: self._fault(n, req, res))
        self._ticked_at: float | None = None
        self._overruns: list[float] = []
        self._overrun_said = -1e9
        self.create_timer(self.period, self._tick)

    def destroy_node(self) -> None:
        destroy_actions(self)  # the gripper server, which rclpy's destroy_node leaves in the graph
        super().destroy_node()

    # ---- MoveIt Servo -------------------------------------------------------------------
    def _servo_interfaces(self) -> None:
        from rcl_interfaces.srv import GetParameters

        self.create_subscription(TwistStamped, "/servo_node/delta_twist_cmds", self._on_twist, QoSProfile(depth=10))
        # Servo's own parameters as a client reads them: speed_units, as UR's ur_servo.yaml sets
        self.create_service(GetParameters, "/servo_node/get_parameters", self._on_get_parameters)
        if self.interface == "servo_jazzy":
            from moveit_msgs.msg import ServoStatus
            from moveit_msgs.srv import ServoCommandType

            self.command_type, self.paused, self.running = -1, False, True
            self.status_msg = ServoStatus
            self.pub_status = self.create_publisher(ServoStatus, "/servo_node/status", QoSProfile(depth=10))
            self.create_service(ServoCommandType, "/servo_node/switch_command_type", self._on_switch)
            self.create_service(SetBool, "/servo_node/pause_servo", self._on_pause_bool)
        else:
            self.command_type, self.paused, self.running = 1, False, False
            self.status_msg = Int8
            self.pub_status = self.create_publisher(Int8, "/servo_node/status", QoSProfile(depth=10))
            for name, running, paused in (("start_servo", True, False), ("pause_servo", None, True),
                                          ("unpause_servo", None, False)):
                self.create_service(Trigger, f"/servo_node/{name}",
                                    lambda req, res, r=running, pa=paused: self._on_trigger(r, pa, res))

    def _on_get_parameters(self, request, response):
        from rclpy.parameter import Parameter

        known = {"moveit_servo.command_in_type": "speed_units", "moveit_servo.scale.linear": 0.6,
                 "moveit_servo.incoming_command_timeout": float(self.get_parameter("incoming_command_timeout").value)}
        response.values = [Parameter(n, value=known[n]).get_parameter_value() if n in known
                           else Parameter(n).get_parameter_value() for n in request.names]
        return response

    def _on_switch(self, request, response):
        response.success = request.command_type in (0, 1, 2)
        if response.success:
            self.command_type = int(request.command_type)
        return response

    def _on_pause_bool(self, request, response):
        self.paused = bool(request.data)
        response.success, response.message = True, "Servoing disabled" if self.paused else "Servoing enabled"
        return response

    def _on_trigger(self, running, paused, response):
        if running is not None:
            self.running = running
        self.paused = paused
        response.success = True
        return response

    def _accepts_twists(self) -> bool:
        return self.running and not self.paused and self.command_type == 1 and not self.faults["servo_halt"]

    def _on_twist(self, msg: TwistStamped) -> None:
        if msg.header.frame_id != self.base or not self._accepts_twists():
            return
        v = msg.twist.linear
        self.velocity = np.array([v.x, v.y, v.z])
        self.last_twist = self._now()

    def _status_code(self) -> int:
        return SERVO_JOINT_BOUND[self.interface] if self.faults["servo_halt"] else 0

    # ---- forward velocity controller ------------------------------------------------------
    def _on_velocities(self, msg: Float64MultiArray) -> None:
        if len(msg.data) == len(self.q):
            self.qdot = np.array(msg.data, dtype=float)  # held until the next command

    # ---- gripper --------------------------------------------------------------------------
    def _on_gripper_goal(self, goal_handle):
        command = goal_handle.request.command
        target = command.position[0] if self.parallel else command.position
        self.knuckle = float(min(max(target, 0.0), 0.8))
        goal_handle.succeed()
        result = self.gripper_type.Result()
        if self.parallel:
            result.state.name, result.state.position = list(command.name), [self.knuckle]
        else:
            result.position = self.knuckle
        result.reached_goal = True
        return result

    # ---- faults and output ----------------------------------------------------------------
    def _fault(self, name: str, request, response):
        self.faults[name] = bool(request.data)
        response.success, response.message = True, f"{name}: {self.faults[name]}"
        return response

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _transform(self, stamp, child: str, xyz, quat=(0.0, 0.0, 0.0, 1.0)) -> TransformStamped:
        t = TransformStamped()
        t.header.stamp, t.header.frame_id, t.child_frame_id = stamp, self.base, child
        t.transform.translation.x, t.transform.translation.y, t.transform.translation.z = (float(v) for v in xyz)
        r = t.transform.rotation
        r.x, r.y, r.z, r.w = (float(v) for v in quat)
        return t

    def _overrun(self) -> None:
        """Say when this loop missed its rate (as ros2_control's controller manager does): when
        the robot's TF goes stale, the log then tells a driver held up (no CPU, a blocked
        executor) from messages lost on the way. At most one line a second."""
        now = time.monotonic()
        late = None if self._ticked_at is None else now - self._ticked_at
        self._ticked_at = now
        if late is not None and late > max(5 * self.period, 0.05):
            self._overruns.append(late)
        if self._overruns and now - self._overrun_said > 1.0:
            self._overrun_said = now
            self.get_logger().warning(f"overrun: {len(self._overruns)} tick(s) late, the longest "
                                      f"{max(self._overruns):.3f} s between ticks (period {self.period:.3f} s)")
            self._overruns.clear()

    def _tick(self) -> None:
        self._overrun()
        now = self._now()
        if self.interface == "forward_velocity":
            for name, v in zip(self.chain.joint_names, self.qdot, strict=True):
                self.q[name] += v * self.period
            self.ee = self.chain.forward(self.q)[:3, 3]
        else:
            if now - self.last_twist > self.timeout or not self._accepts_twists():
                self.velocity = np.zeros(3)  # Servo halts without fresh commands
            self.ee = self.ee + self.velocity * self.period
            if self.running and not self.paused:
                self.pub_status.publish(self.status_msg(code=self._status_code()) if self.interface == "servo_jazzy"
                                        else Int8(data=self._status_code()))
        if self.faults["driver_silent"]:
            return
        stamp = self.get_clock().now().to_msg()
        names, positions = [KNUCKLE], [self.knuckle]
        if self.interface == "forward_velocity":
            names += list(self.q)
            positions += list(self.q.values())
        joints = JointState(name=names, position=positions)
        joints.header.stamp = stamp
        self.pub_joints.publish(joints)
        transforms = [self._transform(stamp, self.ee_frame, self.ee)]
        if not self.faults["handle_lost"]:
            transforms.append(self._transform(stamp, self.handle_frame, self.handle_xyz, (0.0, 0.0, 1.0, 0.0)))
        self.pub_tf.publish(self.tf_message(transforms=transforms))
