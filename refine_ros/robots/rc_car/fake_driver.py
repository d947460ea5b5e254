"""The car's hardware stand-in for the tests and the benchmarks (`refine bench`), run as a process
of its own: F1TENTH's interfaces, with the genuine message types, and nothing of ours. No
profile starts it; it stands where the physical car would
(`python -m refine_ros.robots.fake_driver car`).

`FakeCarDriver`:
- ackermann_msgs/AckermannDriveStamped on /drive (`command_type: ackermann`, what ackermann_mux
  passes on to the VESC) or geometry_msgs/Twist on /cmd_vel (`twist`). The car follows the
  newest command's speed with a first-order lag and keeps it until the next one, as a motor
  controller holding its setpoint does: only an explicit stop stops it.
- /odom (nav_msgs/Odometry, as vesc_to_odom's) and the VESC's state on sensors/core
  (vesc_msgs/VescStateStamped, speed in ERPM = 4614 x m/s) at 50 Hz.
- track/tiles: a constant tile grid, standing in for the camera and the track detector.

Faults a test injects through `fake/*` services (std_srvs/SetBool: the test's levers, not a
robot interface): `fake/driver_silent` (no odometry and no VESC state: the driver is gone),
`fake/tiles_lost` (no road: a stale sensor).
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool

ERPM_GAIN = 4614.0


class FakeCarDriver(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("fake_car_driver", **kwargs)
        from vesc_msgs.msg import VescStateStamped

        self.command_type = self.declare_parameter("command_type", "ackermann").value
        self.wheelbase = float(self.declare_parameter("wheelbase", 0.33).value)
        self.lag = float(self.declare_parameter("lag", 0.1).value)
        self.period = 0.02
        self.speed = self.target = self.angle = self.yaw = self.yaw_rate = 0.0
        self.faults = {"driver_silent": False, "tiles_lost": False}
        self.vesc = VescStateStamped
        if self.command_type == "ackermann":
            from ackermann_msgs.msg import AckermannDriveStamped

            self.create_subscription(AckermannDriveStamped, "/drive", self._on_drive, QoSProfile(depth=10))
        else:
            self.create_subscription(Twist, "/cmd_vel", self._on_twist, QoSProfile(depth=10))
        self.pub_odom = self.create_publisher(Odometry, "/odom", QoSProfile(depth=10))
        self.pub_vesc = self.create_publisher(VescStateStamped, "sensors/core", QoSProfile(depth=10))
        self.pub_tiles = self.create_publisher(Float64MultiArray, "track/tiles", QoSProfile(depth=10))
        for name in self.faults:
            self.create_service(SetBool, f"fake/{name}", lambda req, res, n=name: self._fault(n, req, res))
        self.create_timer(self.period, self._tick)

    def _on_drive(self, msg) -> None:
        self.target, self.angle = float(msg.drive.speed), float(msg.drive.steering_angle)

    def _on_twist(self, msg: Twist) -> None:
        self.target = float(msg.linear.x)
        v = max(abs(self.target), 1e-6)
        self.angle = math.atan(msg.angular.z * self.wheelbase / v)

    def _fault(self, name: str, request, response):
        self.faults[name] = bool(request.data)
        response.success = True
        return response

    def _tick(self) -> None:
        self.speed += (self.target - self.speed) * min(1.0, self.period / self.lag)
        self.yaw_rate = self.speed * math.tan(self.angle) / self.wheelbase
        self.yaw += self.yaw_rate * self.period
        if not self.faults["tiles_lost"]:
            self.pub_tiles.publish(Float64MultiArray(data=list(np.linspace(-0.2, 0.2, 48))))
        if self.faults["driver_silent"]:
            return
        stamp = self.get_clock().now().to_msg()
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, "odom", "base_link"
        odom.twist.twist.linear.x, odom.twist.twist.angular.z = self.speed, self.yaw_rate
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = math.sin(self.yaw / 2), math.cos(self.yaw / 2)
        self.pub_odom.publish(odom)
        state = self.vesc()
        state.header.stamp = stamp
        state.state.speed = ERPM_GAIN * self.speed
        self.pub_vesc.publish(state)
