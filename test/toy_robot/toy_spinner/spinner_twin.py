"""The spinner's twin, which is also its fake driver: diff_drive_controller's interfaces with
its stock command timeout (`cmd_vel_timeout`, 0.5 s: no command for that long and the base
stops), the heading integrating the yaw rate, odometry at 50 Hz. Levers: `fake/driver_silent`
(the fault matrix), `~/silence_odom` and `~/reset` (the rehearsal's operator)."""

from __future__ import annotations

import math
from typing import Any

from geometry_msgs.msg import TwistStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from std_srvs.srv import SetBool, Trigger

from refine_ros.nodes._main import run_node
from refine_ros.params import Param, declare_parameters, values
from refine_ros.robots._twin.node import COMMAND_QOS, STATE_QOS, SilenceLever, now_s
from toy_spinner.robot import COMMAND_TOPIC, ODOM_TOPIC

PARAMETERS: dict[str, Param] = {
    "rate": Param(50.0, "Hz of the odometry", (1.0, 1000.0)),
    "cmd_vel_timeout": Param(0.5, "s: the base stops when no command came for this long (the stock default)",
                             (0.01, 10.0)),
}


class SpinnerTwin(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("spinner_twin", **kwargs)
        declare_parameters(self, PARAMETERS)
        p = values(self, PARAMETERS)
        self.period, self.timeout = 1.0 / float(p["rate"]), float(p["cmd_vel_timeout"])
        self.heading = self.yaw_rate = self.commanded = 0.0
        self.last_command = -math.inf
        self.driver_silent = False
        self.silence = SilenceLever(self, ("odom",))
        self.create_subscription(TwistStamped, COMMAND_TOPIC, self._on_command, COMMAND_QOS)
        self.pub_odom = self.create_publisher(Odometry, ODOM_TOPIC, STATE_QOS)
        self.create_service(SetBool, "fake/driver_silent", self._on_silent)
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_timer(self.period, self._tick)

    def _on_command(self, msg: TwistStamped) -> None:
        self.commanded, self.last_command = float(msg.twist.angular.z), now_s(self)

    def _on_silent(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.driver_silent = bool(request.data)
        response.success = True
        return response

    def _on_reset(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.heading = self.yaw_rate = self.commanded = 0.0
        response.success, response.message = True, "back at heading 0"
        return response

    def _tick(self) -> None:
        stale = now_s(self) - self.last_command > self.timeout
        self.yaw_rate = 0.0 if stale else self.commanded
        self.heading += self.yaw_rate * self.period
        if self.driver_silent or self.silence("odom"):
            return
        odom = Odometry()
        odom.header.stamp = self.get_clock().now().to_msg()
        odom.header.frame_id, odom.child_frame_id = "odom", "base_link"
        odom.pose.pose.orientation.z, odom.pose.pose.orientation.w = math.sin(self.heading / 2), math.cos(self.heading / 2)
        odom.twist.twist.angular.z = self.yaw_rate
        self.pub_odom.publish(odom)


def main(args: list[str] | None = None) -> None:
    run_node(SpinnerTwin, args)


if __name__ == "__main__":
    main()
