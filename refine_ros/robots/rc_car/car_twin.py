"""Car twin: the Box2D car in real time behind the interfaces an F1TENTH car's stack exposes,
so `rc_car_real` (track detector, bridge, safety node, learner) runs against physics with
nothing of ours in between. It stands where ackermann_mux, the VESC driver, vesc_to_odom and
the camera driver would be; the physics and the camera are refine_ros/robots/rc_car/twin.py and
car_camera.py.

Interfaces (defaults are what config/rc_car_real.yaml's bridge and detector expect):
- commands: ackermann_msgs/AckermannDriveStamped on `drive_topic` (/drive: steering angle rad,
  left positive, and speed m/s), through F1TENTH's stock chain as f1tenth_system brings it up
  (refine_ros/robots/rc_car/f1tenth_stack.py): its joy_teleop reading `joy_topic` (the pad's
  zero `teleop` while no button is held blocks /drive in ackermann_mux; RB lets it through
  `mux_timeout` later; LB drives from the sticks), ackermann_mux (which never sends a stop) and
  the VESC, which keeps the last speed until its firmware's `vesc_timeout` (1 s) and then
  releases the motor (`vesc_timeout_brake_current` 0 A: the car coasts). Or, with
  `command_type: twist`, geometry_msgs/Twist on `twist_topic` (/cmd_vel: speed and yaw rate,
  turned into a steering angle through the car's wheelbase) for a generic driver that stops by
  itself after `command_timeout`.
- /odom (nav_msgs/Odometry, odom -> base_link) and, with `publish_tf`, the same transform on
  /tf, as vesc_to_odom computes it (`odometry: vesc_to_odom`): nothing before the first servo
  command reached the VESC, then dead reckoning from the motor's ERPM and the commanded
  steering, its speed (-ERPM - offset) / gain (negative driving forward with a motor that
  reports positive ERPM, `motor_erpm_sign` 1, and a left turn's yaw rate negative too), or the
  simulator's exact pose (`odometry: exact`); sensors/core (vesc_msgs/VescStateStamped, when
  vesc_msgs is installed: the motor's ERPM = `motor_erpm_sign` x `speed_to_erpm_gain` x the
  driven wheels' speed); /wheel_states (sensor_msgs/JointState: wheel_fl, wheel_fr, wheel_rl,
  wheel_rr, rad/s) for a car with encoders.
- the camera: sensor_msgs/Image (bgr8) on `image_topic` rendered from the car's own
  viewpoint with the track detector's default calibration, and its sensor_msgs/CameraInfo;
  /tf_static: base_link -> the camera's optical frame; `~/simulator_tiles`
  (std_msgs/Float64MultiArray, 12 x 4) with each frame: the simulator's own tiles, the yardstick
  for the track detector's (never an input of the robot's graph).

Ground truth: `~/ground_truth` (std_msgs/Float64MultiArray, every tick: [time, x, y, yaw in the
start pose's frame, forward speed m/s, the speed the motor is commanded]); no node of the
robot's graph reads it (the fault matrix measures how far the car moved with it).

Faults: per-sensor dropout windows and random dropouts (`dropouts.<odom|wheels|motor|camera>.*`),
sensor noise, a command latency, and `~/silence_<sensor>` (std_srvs/SetBool) for an operator to
pull a sensor's plug during a rehearsal; `~/reset` (std_srvs/Trigger) puts the car back on the
start line.

QoS: commands are read reliable with a short queue (the newest command counts); odometry,
ERPM and wheel states reliable depth 10 as their drivers publish; the camera best effort
(sensor data), as camera drivers publish images; /tf_static reliable transient local.
"""

from __future__ import annotations

import math
from typing import Any

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import Trigger

from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
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
from refine_ros.robots.rc_car.truth import car_layout, car_scene

SENSORS = ("odom", "wheels", "motor", "camera")  # refine_ros.robots.rc_car.twin.CAR_SENSORS, without Box2D
COMMAND_TYPES = ("ackermann", "twist")

PARAMETERS: dict[str, Param] = {
    "rate": Param(50.0, "Hz of odometry, ERPM and wheel states (the simulator steps at its own 50 Hz)",
                  (1.0, 500.0)),
    "camera_rate": Param(25.0, "Hz of the camera", (0.5, 120.0)),
    "track_seed": Param(0, "the simulator's track", (0, 2**31 - 1)),
    "seed": Param(0, "seed of the sensor noise and of the random dropouts", (0, 2**31 - 1)),
    "command_latency": Param(0.0, "s: a command takes effect this long after it arrives (the robot's own control "
                             "delay, beyond what DDS adds)", (0.0, 2.0)),
    "command_type": Param("ackermann", "'ackermann' (AckermannDriveStamped on drive_topic) or 'twist' (Twist on "
                          "twist_topic)"),
    "drive_topic": Param("/drive", "ackermann_msgs/AckermannDriveStamped commands"),
    "twist_topic": Param("/cmd_vel", "geometry_msgs/Twist commands (command_type twist)"),
    "command_timeout": Param(0.5, "s without a Twist after which a generic driver brakes to a stop (command_type "
                             "twist; 0: never)", (0.0, 10.0)),
    "joy_topic": Param("/joy", "sensor_msgs/Joy of the car's pad (f1tenth's joy_node), read by its joy_teleop"),
    "mux_timeout": Param(0.2, "s: ackermann_mux's timeout of each input (f1tenth_stack's mux.yaml)", (0.0, 10.0)),
    "vesc_timeout": Param(1.0, "s: the VESC firmware's timeout (app settings; 1 s by default): no command for this "
                          "long and the motor is released", (0.0, 60.0)),
    "vesc_timeout_brake_current": Param(0.0, "A: the firmware's brake current after its timeout (0 by default: the "
                                        "car coasts)", (0.0, 200.0)),
    "motor_erpm_sign": Param(1.0, "+1: the motor reports positive ERPM driving forward (as commanded); -1: "
                             "negative", (-1.0, 1.0)),
    "odometry": Param("vesc_to_odom", "'vesc_to_odom' (the stock node's dead reckoning and sign) or 'exact' "
                      "(the simulator's pose)"),
    "vesc_to_odom_wheelbase": Param(0.0, "m: vesc_to_odom's wheelbase (0: the car's own)", (0.0, 5.0)),
    "road_width": Param(0.3, "m: the road's width; sets the metres of one simulator unit", (0.01, 20.0)),
    "speed_to_erpm_gain": Param(4614.0, "ERPM per m/s (F1TENTH's vesc.yaml)", (1.0, 1e6)),
    "odom_topic": Param("/odom", "nav_msgs/Odometry"),
    "publish_tf": Param(True, "also broadcast odom -> base_link on /tf (vesc_to_odom's publish_tf)"),
    "erpm_topic": Param("sensors/core", "vesc_msgs/VescStateStamped"),
    "wheel_topic": Param("/wheel_states", "sensor_msgs/JointState of the four wheels"),
    "image_topic": Param("/camera/image_raw", "sensor_msgs/Image, bgr8"),
    "camera_info_topic": Param("/camera/camera_info", "sensor_msgs/CameraInfo"),
    "odom_frame": Param("odom", "odometry frame"),
    "base_frame": Param("base_link", "the car's frame"),
    "camera_frame": Param("camera_optical_frame", "the camera's optical frame"),
    "odom_position_noise": Param(0.002, "m: std of the odometry position noise", (0.0, 1.0)),
    "odom_speed_noise": Param(0.01, "m/s: std of the odometry speed noise", (0.0, 1.0)),
    "erpm_noise": Param(20.0, "std of the ERPM noise", (0.0, 1e4)),
    "wheel_speed_noise": Param(0.5, "rad/s: std of the encoders' noise", (0.0, 100.0)),
    "pixel_noise": Param(2.0, "std of the camera's pixel noise (0-255)", (0.0, 50.0)),
    **dropout_parameters(SENSORS),
}



class CarTwinNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("car_twin", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            self.command_type = str(p["command_type"])
            if self.command_type not in COMMAND_TYPES:
                raise StartRefused(f"car_twin: command_type must be one of {COMMAND_TYPES}, got {self.command_type!r}")
            try:
                plans = dropout_plans(p, SENSORS)
            except ValueError as exc:
                raise StartRefused(f"car_twin: {exc}") from None
            if str(p["odometry"]) not in ("vesc_to_odom", "exact"):
                raise StartRefused(f"car_twin: odometry must be 'vesc_to_odom' or 'exact', got {p['odometry']!r}")
            try:
                from tf2_msgs.msg import TFMessage
                if self.command_type == "ackermann":
                    from ackermann_msgs.msg import AckermannDriveStamped
            except ImportError as exc:
                raise StartRefused(f"car_twin: needs the {exc.name} interfaces") from None
            try:
                from vesc_msgs.msg import VescStateStamped
            except ImportError:
                VescStateStamped = None  # noqa: N806 - a message class
                self.get_logger().warning("vesc_msgs is not installed: no sensors/core (the VESC's ERPM)")

        from refine_ros.robots.rc_car.twin import CarTwin, CarTwinConfig

        self.config = CarTwinConfig(
            track_seed=int(p["track_seed"]), seed=int(p["seed"]), rate_hz=float(p["rate"]),
            camera_rate_hz=float(p["camera_rate"]), road_width_m=float(p["road_width"]),
            speed_to_erpm_gain=float(p["speed_to_erpm_gain"]), command_latency_s=float(p["command_latency"]),
            command_timeout_s=float(p["command_timeout"]) if self.command_type == "twist" else 0.0,
            odom_position_std_m=float(p["odom_position_noise"]),
            odom_speed_std_mps=float(p["odom_speed_noise"]), wheel_speed_std_radps=float(p["wheel_speed_noise"]),
            erpm_std=float(p["erpm_noise"]), pixel_noise=float(p["pixel_noise"]), dropouts=plans,
            odom_frame=str(p["odom_frame"]), base_frame=str(p["base_frame"]),
            camera_frame=str(p["camera_frame"]))  # fmt: skip
        self.twin = CarTwin(self.config, start=now_s(self))
        from refine_ros.robots.rc_car.f1tenth_stack import F1tenthStack, VescConfig

        self.stack = F1tenthStack(
            VescConfig(speed_to_erpm_gain=self.config.speed_to_erpm_gain, timeout_s=float(p["vesc_timeout"]),
                       timeout_brake_current=float(p["vesc_timeout_brake_current"]),
                       motor_erpm_sign=float(p["motor_erpm_sign"])),
            wheelbase=float(p["vesc_to_odom_wheelbase"]) or self.twin.wheelbase_m, mux_timeout=float(p["mux_timeout"]))
        self.exact_odometry = str(p["odometry"]) == "exact"
        self.silence = SilenceLever(self, SENSORS)
        self.publish_tf = bool(p["publish_tf"])
        self.commands = 0
        self.TFMessage, self.VescStateStamped = TFMessage, VescStateStamped

        if self.command_type == "ackermann":
            from sensor_msgs.msg import Joy

            self.create_subscription(AckermannDriveStamped, str(p["drive_topic"]), self._on_drive, COMMAND_QOS)
            self.create_subscription(Joy, str(p["joy_topic"]), self._on_joy, qos_profile_sensor_data)
        else:
            self.create_subscription(Twist, str(p["twist_topic"]), self._on_twist, COMMAND_QOS)
        self.pub_odom = self.create_publisher(Odometry, str(p["odom_topic"]), STATE_QOS)
        self.pub_erpm = (self.create_publisher(VescStateStamped, str(p["erpm_topic"]), STATE_QOS)
                         if VescStateStamped is not None else None)
        self.pub_ground_truth = self.create_publisher(Float64MultiArray, "~/ground_truth", STATE_QOS)
        self.commanded_speed = 0.0
        self.pub_wheels = self.create_publisher(JointState, str(p["wheel_topic"]), STATE_QOS)
        self.pub_image = self.create_publisher(Image, str(p["image_topic"]), qos_profile_sensor_data)
        self.pub_info = self.create_publisher(CameraInfo, str(p["camera_info_topic"]), qos_profile_sensor_data)
        # what the simulator knows at each camera frame: the yardstick of the detector's tiles
        self.pub_truth = self.create_publisher(Float64MultiArray, "~/simulator_tiles", qos_profile_sensor_data)
        self.pub_tf = self.create_publisher(TFMessage, "/tf", TF_QOS)
        tf_static = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        tf_static.publish(TFMessage(transforms=[transform_message(self.twin.camera_mount(), now_s(self))]))
        self.create_service(Trigger, "~/reset", self._on_reset)
        # what a person by the track sees, for a teleoperator and the live episodes' ground truth
        # (refine_ros/robots/_twin/scene.py); no node of the robot's graph reads it
        self.scene = SceneChannel(self, lambda: car_scene(self.twin), lambda: car_layout(self.twin))
        self.create_timer(1.0 / self.config.rate_hz, self._tick)
        self.get_logger().info(f"car twin up: track {self.config.track_seed}, {self.command_type} commands, "
                               f"{self.config.rate_hz:g} Hz, camera {self.config.camera_rate_hz:g} Hz")

    # ---- commands -------------------------------------------------------------------------
    def _on_drive(self, msg: Any) -> None:
        """Our /drive enters ackermann_mux as its `navigation` input; the VESC gets it only if
        the mux passes it on."""
        from refine_ros.robots.rc_car.f1tenth_stack import Drive

        d = msg.drive
        if not all(math.isfinite(v) for v in (d.speed, d.steering_angle)):
            self.twin.rejected_commands += 1
            self.get_logger().warning("non-finite command refused", throttle_duration_sec=2.0)
            return
        self.commands += 1
        if not self.stack.drive(Drive(float(d.speed), float(d.steering_angle)), now_s(self)):
            self.get_logger().info("/drive not passed on: the pad's teleop holds ackermann_mux (hold RB for "
                                   "autonomy)", throttle_duration_sec=5.0)

    def _on_joy(self, msg: Any) -> None:
        self.stack.joy(list(msg.buttons), list(msg.axes), now_s(self))

    def _on_twist(self, msg: Twist) -> None:
        from refine_ros.robots.rc_car.twin import drive_from_twist

        self._command(drive_from_twist(float(msg.linear.x), float(msg.angular.z), self.twin.wheelbase_m))

    def _command(self, command: Any) -> None:
        if not self.twin.drive(command, now_s(self)):
            self.get_logger().warning("non-finite command refused", throttle_duration_sec=2.0)
        self.commands += 1

    # ---- readings -------------------------------------------------------------------------
    def _tick(self) -> None:
        from refine_ros.robots.rc_car.twin import DriveCommand

        now = now_s(self)
        if self.command_type == "ackermann":  # what the VESC does now, past ackermann_mux and its firmware
            motor = self.stack.motor(now)
            self.commanded_speed = 0.0 if motor.timed_out else motor.speed
            self.twin.drive(DriveCommand(motor.speed, motor.steering_angle, released=motor.timed_out,
                                         brake_current=motor.brake_current), now)
        else:
            self.commanded_speed = self.twin.command_in_effect(now).speed
        r = self.twin.tick(now)
        self.scene.publish(now)
        x, y, yaw = self.twin.pose()
        self.pub_ground_truth.publish(Float64MultiArray(data=[now, x, y, yaw, self.twin.forward_speed(),
                                                              float(self.commanded_speed)]))
        if r.motor is not None:
            motor_speed = self.twin.motor_speed()
            if not self.silence("motor") and self.pub_erpm is not None:
                state = self.VescStateStamped()
                state.header.stamp = stamp(r.motor.stamp)
                state.state.speed = self.stack.vesc.erpm(motor_speed)
                self.pub_erpm.publish(state)
            if not self.exact_odometry and self.command_type == "ackermann" and not self.silence("odom"):
                self._publish_vesc_odom(self.stack.odometry(motor_speed, r.motor.stamp))
        if r.odom is not None and not self.silence("odom") and (self.exact_odometry or self.command_type != "ackermann"):
            self._publish_odom(r.odom)
        if r.wheels is not None and not self.silence("wheels"):
            js = JointState(name=list(r.wheels.name), position=list(r.wheels.position),
                            velocity=list(r.wheels.velocity))  # fmt: skip
            js.header.stamp = stamp(r.wheels.stamp)
            self.pub_wheels.publish(js)
        if r.camera is not None and not self.silence("camera"):
            self._publish_image(r.camera)
            self.pub_truth.publish(Float64MultiArray(data=[float(v) for v in self.twin.simulator_tiles().ravel()]))

    def _publish_odom(self, o: Any) -> None:
        msg = Odometry()
        msg.header.stamp, msg.header.frame_id, msg.child_frame_id = stamp(o.stamp), o.frame_id, o.child_frame_id
        pose = msg.pose.pose
        pose.position.x, pose.position.y = o.x, o.y
        q = pose.orientation
        q.x, q.y, q.z, q.w = o.quaternion_xyzw()
        msg.twist.twist.linear.x, msg.twist.twist.linear.y, msg.twist.twist.angular.z = o.vx, o.vy, o.yaw_rate
        self.pub_odom.publish(msg)
        if self.publish_tf:
            self.pub_tf.publish(self.TFMessage(transforms=[transform_message(self.twin.odom_transform(o), o.stamp)]))

    def _publish_vesc_odom(self, state: Any) -> None:
        """vesc_to_odom's message: nothing before its first servo command."""
        from refine_ros.robots.rc_car.twin import Odometry as TwinOdometry

        if state is None:
            return
        self._publish_odom(TwinOdometry(state.stamp, state.x, state.y, state.yaw, state.speed, 0.0, state.yaw_rate,
                                        self.config.odom_frame, self.config.base_frame))

    def _publish_image(self, frame: Any) -> None:
        h, w = frame.image.shape[:2]
        img = Image(height=h, width=w, encoding="bgr8", is_bigendian=0, step=w * 3)
        img.header.stamp, img.header.frame_id = stamp(frame.stamp), frame.frame_id
        img.data = frame.image.tobytes()
        self.pub_image.publish(img)
        cam = self.config.camera
        info = CameraInfo(height=h, width=w, distortion_model="plumb_bob", d=[0.0] * 5,
                          k=[cam.fx, 0.0, cam.cx, 0.0, cam.fy, cam.cy, 0.0, 0.0, 1.0],
                          r=[1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0],
                          p=[cam.fx, 0.0, cam.cx, 0.0, 0.0, cam.fy, cam.cy, 0.0, 0.0, 0.0, 1.0, 0.0])  # fmt: skip
        info.header = img.header
        self.pub_info.publish(info)

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.twin.reset(now=now_s(self))
        self.stack.restart_odometry()
        self.scene.publish_layout()  # the track in the new odom frame
        response.success, response.message = True, f"car on the start line of track {self.twin.track_seed}"
        return response

    def destroy_node(self) -> None:
        """No tick runs after this: the simulated car is gone with its node (a real VESC would
        brake on its command timeout)."""
        twin = getattr(self, "twin", None)
        super().destroy_node()
        if twin is not None:
            twin.close()


def main(args: list[str] | None = None) -> None:
    run_node(CarTwinNode, args)


if __name__ == "__main__":
    main()
