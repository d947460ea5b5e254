"""RC-car bridge: safe car actions to the car's driver, car sensors to the car task's semantic
observation. The mappings are refine_ros/robots/rc_car/interface.py (plain functions, tested without
DDS); this node wires them to the driver's topics.

Commands (`command_type`): `ackermann` (default, F1TENTH: ackermann_msgs/AckermannDriveStamped on
`/drive`, steering angle in rad and speed in m/s), `twist` (geometry_msgs/Twist on `/cmd_vel`,
speed and the yaw rate of that steering angle) or `array` (std_msgs/Float64MultiArray [steer,
throttle, brake]). A stop is speed 0 (array: brake) in every mode, never reverse; `max_speed`
(m/s) is the highest speed ever commanded.

Observations (car task schema, docs/METHOD.md): the track detector's tiles (12, 4) then the
indicators (7,): speed, heading / pi, yaw rate, four wheel readings, speeds converted from m/s
with `speed_to_sim`. Wheel speeds come from four encoders, from the VESC's motor ERPM, or are
absent (then they read the odometry speed). Published at `observation_rate` only while every
input is fresh, so a blind camera or a dead sensor silences the heartbeat and the safety
watchdog stops the car; which input it was, and how stale, goes out on `bridge/status`.

F1TENTH as it ships: vesc_to_odom publishes no /odom before its first servo command (the pad's
idle zero teleop, or this bridge's first stop, sends one), so with `wheel_source: erpm` the
VESC's own state (`sensors/core`, from the start) is the driver's heartbeat and a missing /odom
is waited for and said, not called a lost driver. Its speed is (-ERPM - offset) / gain, so with
a motor reporting positive ERPM forward the yaw and yaw rate come out negated: `odom_yaw_sign`
(-1 by default, the stock node) turns them back to counter-clockwise positive.

The last hop (refine_ros/nodes/_bridge.py): the bridge's own command watchdog (`command_timeout`);
ackermann_mux never sends a stop and the VESC keeps the last speed until its firmware's timeout,
so a killed bridge is stopped by the command guard beside it.

Which message packages it needs depends on its settings: ackermann_msgs for `ackermann`,
vesc_msgs for `wheel_source: erpm` (no Humble or Jazzy release: built from source, as
f1tenth_system does); they are imported only then, so a car driven by Twist with encoders
needs neither.
"""

from __future__ import annotations

import importlib
import math
from typing import Any

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from refine_core.tasks.registry import get_task
from refine_ros.nodes._bridge import BridgeNode
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values
from refine_ros.robots.rc_car import interface as car
from refine_ros.robots.rc_car.vision import N_TILES, TILE_FEATURES
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_json, pack_step
from refine_ros_interfaces.msg import Step

# The simulator's column order, from the task spec: the contract fitted programs rely on.
COLUMNS: tuple[str, ...] = get_task("car_racing").spec.observation_columns
ACTION_AXES = 3

# Every parameter is read-only: the limits must not change under a running car, and the rest
# shapes the node's publishers and subscriptions. The car's own values (its speed limit,
# steering range, unit conversion) have no code default: the profile sets them.
PARAMETERS: dict[str, Param] = {
    "command_type": Param("ackermann", "'ackermann' (ackermann_msgs/AckermannDriveStamped, F1TENTH), 'twist' "
                          "(geometry_msgs/Twist) or 'array' (Float64MultiArray [steer, throttle, brake])"),
    "command_topic": Param("", "the car's command topic; '' = the type's standard one: /drive (ackermann), "
                           "/cmd_vel (twist); array needs it set"),
    "frame_id": Param("base_link", "header.frame_id of the AckermannDriveStamped commands"),
    "max_speed": Param(Required("double"), "m/s: the speed at full gas and the highest speed ever commanded (array "
                       "mode: the throttle is cut at or above it)", (0.0, 20.0)),
    "max_steering_angle": Param(Required("double"), "rad: the steering angle at full steer (positive left)",
                                (0.0, 1.5)),
    "wheelbase": Param(0.0, "m, front to rear axle: twist mode turns the steering angle into a yaw rate with it "
                       "(required there)", (0.0, 5.0)),
    "speed_to_sim": Param(Required("double"), "simulator world units per metre: the simulator's road is 13.33 "
                          "units wide, so 13.33 / your road width in m (0.3 m: 44.4)", (0.0, 1000.0)),
    "odom_topic": Param("/odom", "nav_msgs/Odometry of the car: speed, yaw, yaw rate, and the driver's heartbeat"),
    "wheel_source": Param("erpm", "wheel speeds from 'encoders' (four JointState velocities), 'erpm' (the "
                          "VESC's motor ERPM, vesc_msgs/VescStateStamped) or 'none' (the odometry speed)"),
    "wheel_topic": Param("/wheel_states", "sensor_msgs/JointState with wheel angular velocities (encoders)"),
    "wheel_joints": Param(["wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr"], "wheel joint names: front-left, "
                          "front-right, rear-left, rear-right (encoders)"),
    "wheel_radius": Param(0.0, "m: the wheels' radius, rad/s -> m/s (required with encoders)", (0.0, 1.0)),
    "erpm_topic": Param("sensors/core", "vesc_msgs/VescStateStamped of the VESC driver (erpm)"),
    "speed_to_erpm_gain": Param(0.0, "ERPM per m/s of the car's drivetrain (F1TENTH's vesc.yaml: 4614; required "
                                "with erpm)", (0.0, 1e6)),
    "speed_to_erpm_offset": Param(0.0, "ERPM at standstill (F1TENTH's speed_to_erpm_offset)"),
    "tiles_topic": Param("track/tiles", "Float64MultiArray (12 x 4) from the track detector"),
    "observation_rate": Param(50.0, "Hz of refine/observation (the control rate)", (1.0, 1000.0)),
    "sensor_timeout": Param(0.15, "seconds after which odometry, wheel speeds or tiles count as stale",
                            (0.001, 5.0)),
    "driver_timeout": Param(0.2, "seconds without odometry (wheel_source erpm: the VESC's state) after which the "
                            "driver counts as lost: the bridge sends the stop itself, every tick, until it is back",
                            (0.001, 5.0)),
    "odom_yaw_sign": Param(-1.0, "-1: stock ROS 2 vesc_to_odom (its speed is (-ERPM - offset) / gain, so its yaw and "
                           "yaw rate turn the wrong way for a motor reporting positive ERPM forward): both are "
                           "negated; +1: odometry that follows REP-103", (-1.0, 1.0)),
    "command_timeout": Param(0.2, "seconds without a safe command after the car was commanded (the safety node "
                             "gone): the bridge sends the stop itself, every tick, until they are back", (0.01, 5.0)),
    "startup_grace": Param(10.0, "seconds after start before a driver never heard counts as lost", (0.0, 600.0)),
}


FROM_SOURCE = {
    "vesc_msgs": "it has no Humble or Jazzy release: build it from source as f1tenth_system does (git clone -b "
                 "ros2 https://github.com/f1tenth/vesc into your workspace's src, colcon build --packages-select "
                 "vesc_msgs; REFINE_ROS_WITH_VESC=1 makes rosdep count it), or use wheel_source encoders or none",
}
"""Message packages a binary install does not have, and how to get them."""


def _message(package: str, name: str, why: str) -> Any:
    """A message class of an optional package, or StartRefused saying how to get it."""
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except ImportError:
        how = FROM_SOURCE.get(package, f"install ros-$ROS_DISTRO-{package.replace('_', '-')} (rosdep installs it)")
        raise StartRefused(f"rc_car_bridge: {why} needs the {package} messages; {how}") from None


class RcCarBridge(BridgeNode):
    axes = ACTION_AXES

    def __init__(self, **kwargs) -> None:
        super().__init__("rc_car_bridge", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)  # refuses to start without the car's own values
            self.command_type, self.wheel_source = str(p["command_type"]), str(p["wheel_source"])
            self._check(p)
            drive = _message("ackermann_msgs", "AckermannDriveStamped", "command_type ackermann") \
                if self.command_type == "ackermann" else None
            vesc = _message("vesc_msgs", "VescStateStamped", "wheel_source erpm") \
                if self.wheel_source == "erpm" else None
        self.limits = car.CarLimits(float(p["max_speed"]), float(p["max_steering_angle"]), float(p["wheelbase"]))
        self.speed_to_sim = float(p["speed_to_sim"])
        self.sensor_timeout = float(p["sensor_timeout"])
        self.wheel_joints = [str(n) for n in p["wheel_joints"]]
        self.wheel_radius = float(p["wheel_radius"])
        self.erpm_gain, self.erpm_offset = float(p["speed_to_erpm_gain"]), float(p["speed_to_erpm_offset"])
        self.yaw_sign = 1.0 if float(p["odom_yaw_sign"]) >= 0 else -1.0
        self.odom_topic, self.tiles_topic = str(p["odom_topic"]), str(p["tiles_topic"])
        self._odom_waiting_said = False
        self.frame_id = str(p["frame_id"])

        self._drive_msg = drive
        kind = {"ackermann": drive, "twist": Twist, "array": Float64MultiArray}[self.command_type]
        topic = str(p["command_topic"]) or car.STANDARD_TOPICS[self.command_type]
        self._cmd_pub = self.create_publisher(kind, topic, qos.COMMAND)
        self._obs_pub = self.create_publisher(Step, "refine/observation", qos.CONTROL)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._columns_pub.publish(pack_json(list(COLUMNS)))

        self.create_subscription(Odometry, p["odom_topic"], self._on_odom, qos.SENSOR)
        if self.wheel_source == "encoders":
            self.create_subscription(JointState, p["wheel_topic"], self._on_wheels, qos.SENSOR)
        elif self.wheel_source == "erpm":
            self.create_subscription(vesc, p["erpm_topic"], self._on_vesc, qos.SENSOR)
        self.create_subscription(Float64MultiArray, p["tiles_topic"], self._on_tiles, qos.SENSOR)

        self._odom: tuple[float, float, float, float] | None = None  # time, speed m/s, yaw, yaw rate
        self._wheels: tuple[float, np.ndarray] | None = None  # time, surface speeds m/s
        self._tiles: tuple[float, np.ndarray] | None = None
        self._start_bridge(float(p["driver_timeout"]), float(p["command_timeout"]), float(p["startup_grace"]))
        self.create_timer(1.0 / float(p["observation_rate"]), self._tick)

    def _check(self, p: dict[str, Any]) -> None:
        if self.command_type not in car.COMMAND_TYPES:
            raise StartRefused(f"rc_car_bridge: command_type must be one of {', '.join(car.COMMAND_TYPES)}, "
                               f"got {self.command_type!r}")
        if self.wheel_source not in car.WHEEL_SOURCES:
            raise StartRefused(f"rc_car_bridge: wheel_source must be one of {', '.join(car.WHEEL_SOURCES)}, "
                               f"got {self.wheel_source!r}")
        if self.command_type == "array" and not p["command_topic"]:
            raise StartRefused("rc_car_bridge: command_type array has no standard topic; set command_topic")
        if self.command_type == "twist" and float(p["wheelbase"]) <= 0:
            raise StartRefused("rc_car_bridge: command_type twist needs wheelbase (m) to turn a steering angle "
                               "into a yaw rate")
        if self.wheel_source == "encoders" and (len(p["wheel_joints"]) != 4 or float(p["wheel_radius"]) <= 0):
            raise StartRefused("rc_car_bridge: wheel_source encoders needs 4 wheel_joints (front-left, front-right, "
                               "rear-left, rear-right) and wheel_radius (m)")
        if self.wheel_source == "erpm" and float(p["speed_to_erpm_gain"]) <= 0:
            raise StartRefused("rc_car_bridge: wheel_source erpm needs speed_to_erpm_gain (F1TENTH: 4614)")

    # ---- commands -----------------------------------------------------------------------
    def command_publishers(self) -> list[Any]:
        return [self._cmd_pub]

    def _measured_speed(self) -> float | None:
        if self._odom is None or self._now() - self._odom[0] > self.sensor_timeout:
            return None
        return self._odom[1]

    def _publish(self, sp: car.Setpoint | None, array: tuple[float, ...]) -> None:
        if self.command_type == "ackermann":
            msg = self._drive_msg()
            msg.header.stamp = self.get_clock().now().to_msg()
            msg.header.frame_id = self.frame_id
            msg.drive.steering_angle, msg.drive.speed = float(sp.steering_angle), float(sp.speed)
        elif self.command_type == "twist":
            msg = Twist()
            msg.linear.x = float(sp.speed)
            msg.angular.z = float(car.yaw_rate(sp, self.limits.wheelbase))
        else:
            msg = Float64MultiArray(data=[float(v) for v in array])
        self._cmd_pub.publish(msg)

    def send_command(self, values: np.ndarray) -> str | None:
        action = [float(v) for v in values]
        sp = car.setpoint(action, self.limits)
        self._publish(sp, car.array_command(action, self._measured_speed(), self.limits))
        return None

    def send_stop(self) -> None:
        self._publish(car.STOP, car.STOP_ARRAY)

    # ---- sensors ------------------------------------------------------------------------
    def _on_odom(self, msg: Odometry) -> None:
        v, q = msg.twist.twist.linear, msg.pose.pose.orientation
        now = self._now()
        self._odom = (now, math.hypot(v.x, v.y), self.yaw_sign * car.yaw_from_quaternion(q.w, q.x, q.y, q.z),
                      self.yaw_sign * float(msg.twist.twist.angular.z))
        self.note_driver(now)
        if self._odom_waiting_said:
            self._odom_waiting_said = False
            self.get_logger().info(f"{self.odom_topic} is here")

    def _on_wheels(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        if not all(n in index and index[n] < len(msg.velocity) for n in self.wheel_joints):
            return
        speeds = np.array([msg.velocity[index[n]] * self.wheel_radius for n in self.wheel_joints])
        self._wheels = (self._now(), speeds)

    def _on_vesc(self, msg: Any) -> None:
        """The VESC's state: the wheel speeds, and the driver's heartbeat (it comes from the
        start, when vesc_to_odom has published nothing yet)."""
        now = self._now()
        speed = car.erpm_to_speed(float(msg.state.speed), self.erpm_gain, self.erpm_offset)
        self._wheels = (now, np.full(4, speed))
        self.note_driver(now)
        if self._odom is None and not self._odom_waiting_said:
            self._odom_waiting_said = True
            self.get_logger().warning(
                f"the VESC reports, but no {self.odom_topic} yet: vesc_to_odom publishes only after its first servo "
                "command (the pad's idle zero teleop or this bridge's first stop sends one; in a dry run with no "
                "pad nothing does); waiting, no observations meanwhile")

    def _on_tiles(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        if data.size != N_TILES * TILE_FEATURES or not np.all(np.isfinite(data)):
            return
        self._tiles = (self._now(), data)

    def _tick(self) -> None:
        now = self._now()
        if not self.check_driver(now):
            self.observed(now, "driver", self.driver_silence(now))
            return
        inputs = [("odometry", self.odom_topic, self._odom),
                  ("tiles", f"{self.tiles_topic} (the track detector)", self._tiles)]
        if self.wheel_source != "none":
            inputs.append(("wheels", f"the wheel speeds ({self.wheel_source})", self._wheels))
        for key, what, reading in inputs:
            if reading is None:
                self.observed(now, key, f"nothing on {what} yet")
                return
            if now - reading[0] > self.sensor_timeout:
                self.observed(now, key, f"{what} {now - reading[0]:.2f} s old (sensor_timeout {self.sensor_timeout:g} s)")
                return
        _, speed, yaw, yaw_rate = self._odom
        wheels = np.full(4, speed) if self.wheel_source == "none" else self._wheels[1]
        obs = np.concatenate([self._tiles[1], car.car_indicators(speed, yaw, yaw_rate, wheels, self.speed_to_sim)])
        if not np.all(np.isfinite(obs)):
            self.observed(now, "non-finite", "a reading is NaN or infinite")
            return
        self._obs_pub.publish(pack_step(self.episode, self.step, COLUMNS, obs, self.get_clock().now().to_msg()))
        self.step += 1
        self.observed(now)


def main(args: list[str] | None = None) -> None:
    run_node(RcCarBridge, args)


if __name__ == "__main__":
    main()
