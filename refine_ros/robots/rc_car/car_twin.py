"""Car twin: the Box2D car in real time behind the interfaces an F1TENTH car's stack exposes,
so `rc_car_real` (track detector, bridge, safety node, learner) runs against physics with
nothing of ours in between. It stands where ackermann_mux, the VESC driver, vesc_to_odom and
the camera driver would be; the physics and the camera are refine_ros/robots/rc_car/twin.py and
car_camera.py.

Interfaces (defaults are what config/rc_car_real.yaml's bridge and detector expect):
- commands: ackermann_msgs/AckermannDriveStamped on `drive_topic` (/drive: steering angle rad,
  left positive, and speed m/s, executed by the motor controller's speed loop), or with
  `command_type: twist` geometry_msgs/Twist on `twist_topic` (/cmd_vel: speed and yaw rate,
  turned into a steering angle through the car's wheelbase). No command for
  `command_timeout`: the car brakes to a stop, as a VESC's timeout does.
- /odom (nav_msgs/Odometry, odom -> base_link, as vesc_to_odom) and, with `publish_tf`, the
  same transform on /tf; sensors/core (vesc_msgs/VescStateStamped: the motor's ERPM =
  `speed_to_erpm_gain` x the driven wheels' speed); /wheel_states (sensor_msgs/JointState:
  wheel_fl, wheel_fr, wheel_rl, wheel_rr, rad/s) for a car with encoders.
- the camera: sensor_msgs/Image (bgr8) on `image_topic` rendered from the car's own
  viewpoint with the track detector's default calibration, and its sensor_msgs/CameraInfo;
  /tf_static: base_link -> the camera's optical frame; `~/simulator_tiles`
  (std_msgs/Float64MultiArray, 12 x 4) with each frame: the simulator's own tiles, the yardstick
  for the track detector's (never an input of the robot's graph).

Faults: per-sensor dropout windows and random dropouts (`dropouts.<odom|wheels|motor|camera>.*`),
sensor noise, a command latency, and `~/silence_<sensor>` (std_srvs/SetBool) for an operator to
pull a sensor's plug during a rehearsal; `~/reset` (std_srvs/Trigger) puts the car back on the
start line.

QoS: commands are read reliable with a short queue (the newest command counts); odometry,
ERPM and wheel states reliable depth 10 as their drivers publish; the camera best effort
(sensor data), as camera drivers publish images; /tf_static reliable transient local.
"""

from __future__ import annotations

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
    "command_timeout": Param(0.5, "s without a command after which the car brakes to a stop (0: never)",
                             (0.0, 10.0)),
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
            try:
                from tf2_msgs.msg import TFMessage
                from vesc_msgs.msg import VescStateStamped
                if self.command_type == "ackermann":
                    from ackermann_msgs.msg import AckermannDriveStamped
            except ImportError as exc:
                raise StartRefused(f"car_twin: needs the {exc.name} interfaces") from None

        from refine_ros.robots.rc_car.twin import CarTwin, CarTwinConfig

        self.config = CarTwinConfig(
            track_seed=int(p["track_seed"]), seed=int(p["seed"]), rate_hz=float(p["rate"]),
            camera_rate_hz=float(p["camera_rate"]), road_width_m=float(p["road_width"]),
            speed_to_erpm_gain=float(p["speed_to_erpm_gain"]), command_latency_s=float(p["command_latency"]),
            command_timeout_s=float(p["command_timeout"]), odom_position_std_m=float(p["odom_position_noise"]),
            odom_speed_std_mps=float(p["odom_speed_noise"]), wheel_speed_std_radps=float(p["wheel_speed_noise"]),
            erpm_std=float(p["erpm_noise"]), pixel_noise=float(p["pixel_noise"]), dropouts=plans,
            odom_frame=str(p["odom_frame"]), base_frame=str(p["base_frame"]),
            camera_frame=str(p["camera_frame"]))  # fmt: skip
        self.twin = CarTwin(self.config, start=now_s(self))
        self.silence = SilenceLever(self, SENSORS)
        self.publish_tf = bool(p["publish_tf"])
        self.commands = 0
        self.TFMessage, self.VescStateStamped = TFMessage, VescStateStamped

        if self.command_type == "ackermann":
            self.create_subscription(AckermannDriveStamped, str(p["drive_topic"]), self._on_drive, COMMAND_QOS)
        else:
            self.create_subscription(Twist, str(p["twist_topic"]), self._on_twist, COMMAND_QOS)
        self.pub_odom = self.create_publisher(Odometry, str(p["odom_topic"]), STATE_QOS)
        self.pub_erpm = self.create_publisher(VescStateStamped, str(p["erpm_topic"]), STATE_QOS)
        self.pub_wheels = self.create_publisher(JointState, str(p["wheel_topic"]), STATE_QOS)
        self.pub_image = self.create_publisher(Image, str(p["image_topic"]), qos_profile_sensor_data)
        self.pub_info = self.create_publisher(CameraInfo, str(p["camera_info_topic"]), qos_profile_sensor_data)
        # what the simulator knows at each camera frame: the yardstick of the detector's tiles
        self.pub_truth = self.create_publisher(Float64MultiArray, "~/simulator_tiles", qos_profile_sensor_data)
        self.pub_tf = self.create_publisher(TFMessage, "/tf", TF_QOS)
        tf_static = self.create_publisher(TFMessage, "/tf_static", TF_STATIC_QOS)
        tf_static.publish(TFMessage(transforms=[transform_message(self.twin.camera_mount(), now_s(self))]))
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_timer(1.0 / self.config.rate_hz, self._tick)
        self.get_logger().info(f"car twin up: track {self.config.track_seed}, {self.command_type} commands, "
                               f"{self.config.rate_hz:g} Hz, camera {self.config.camera_rate_hz:g} Hz")

    # ---- commands -------------------------------------------------------------------------
    def _on_drive(self, msg: Any) -> None:
        from refine_ros.robots.rc_car.twin import DriveCommand

        d = msg.drive
        self._command(DriveCommand(float(d.speed), float(d.steering_angle), float(d.steering_angle_velocity)))

    def _on_twist(self, msg: Twist) -> None:
        from refine_ros.robots.rc_car.twin import drive_from_twist

        self._command(drive_from_twist(float(msg.linear.x), float(msg.angular.z), self.twin.wheelbase_m))

    def _command(self, command: Any) -> None:
        if not self.twin.drive(command, now_s(self)):
            self.get_logger().warning("non-finite command refused", throttle_duration_sec=2.0)
        self.commands += 1

    # ---- readings -------------------------------------------------------------------------
    def _tick(self) -> None:
        r = self.twin.tick(now_s(self))
        if r.odom is not None and not self.silence("odom"):
            self._publish_odom(r.odom)
        if r.motor is not None and not self.silence("motor"):
            state = self.VescStateStamped()
            state.header.stamp = stamp(r.motor.stamp)
            state.state.speed = r.motor.erpm
            self.pub_erpm.publish(state)
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
