"""The spinner's bridge: safe pendulum actions to a yaw-rate command, odometry to the pendulum's
observation (angle = heading wrapped to [-pi, pi), angular velocity = yaw rate)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from std_msgs.msg import String

from refine_core.tasks.registry import get_task
from refine_ros.nodes._bridge import BridgeNode
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, declare_parameters, refusing, values
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_json, pack_step
from refine_ros_interfaces.msg import Step
from toy_spinner.robot import COMMAND_TOPIC, ODOM_TOPIC

COLUMNS = get_task("pendulum").spec.observation_columns

PARAMETERS: dict[str, Param] = {
    "max_speed": Param(Required("double"), "rad/s: the yaw rate at full torque", (0.0, 10.0)),
    "observation_rate": Param(20.0, "Hz of refine/observation", (1.0, 100.0)),
    "sensor_timeout": Param(0.15, "s after which the odometry is stale", (0.001, 5.0)),
    "driver_timeout": Param(0.2, "s without odometry before the bridge stops the base itself", (0.001, 5.0)),
}


class SpinnerBridge(BridgeNode):
    axes = 1

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("spinner_bridge", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
        self.max_speed, self.sensor_timeout = float(p["max_speed"]), float(p["sensor_timeout"])
        self._cmd_pub = self.create_publisher(TwistStamped, COMMAND_TOPIC, qos.COMMAND)
        self._obs_pub = self.create_publisher(Step, "refine/observation", qos.CONTROL)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._columns_pub.publish(pack_json(list(COLUMNS)))
        self.create_subscription(Odometry, ODOM_TOPIC, self._on_odom, qos.SENSOR)
        self._odom: tuple[float, float, float] | None = None  # time, heading, yaw rate
        self._start_bridge(float(p["driver_timeout"]))
        self.create_timer(1.0 / float(p["observation_rate"]), self._tick)

    def command_publishers(self) -> list[Any]:
        return [self._cmd_pub]

    def _publish(self, yaw_rate: float) -> None:
        msg = TwistStamped()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = "base_link"
        msg.twist.angular.z = yaw_rate
        self._cmd_pub.publish(msg)

    def send_command(self, values: np.ndarray) -> str | None:
        self._publish(self.max_speed * float(np.clip(values[0] / 2.0, -1.0, 1.0)))
        return None

    def send_stop(self) -> None:
        self._publish(0.0)

    def _on_odom(self, msg: Odometry) -> None:
        q = msg.pose.pose.orientation
        heading = math.atan2(2.0 * (q.w * q.z + q.x * q.y), 1.0 - 2.0 * (q.y * q.y + q.z * q.z))
        now = self._now()
        self._odom = (now, heading, float(msg.twist.twist.angular.z))
        self.note_driver(now)

    def _tick(self) -> None:
        now = self._now()
        if not self.check_driver(now) or self._odom is None or now - self._odom[0] > self.sensor_timeout:
            return
        angle = (self._odom[1] + math.pi) % (2.0 * math.pi) - math.pi
        self._obs_pub.publish(pack_step(self.episode, self.step, COLUMNS, [angle, self._odom[2]],
                                        self.get_clock().now().to_msg()))
        self.step += 1


def main(args: list[str] | None = None) -> None:
    run_node(SpinnerBridge, args)


if __name__ == "__main__":
    main()
