"""RC-car bridge: safe car actions to the car's command topic, car sensors to the car task's
semantic observation.

Commands: `refine/safe_action` [steer, gas, brake] -> either `geometry_msgs/Twist`
(`command_type: twist`; linear.x = (gas - brake) * `max_speed`, angular.z = -steer *
`max_steer`, because the task's negative steer is left while ROS's positive z turns left) or
`std_msgs/Float64MultiArray` [steer, throttle, brake] as they are (`command_type: array`).

Observations (car task schema, docs/METHOD.md): the track detector's tiles (12, 4) then the
indicators (7,): speed / 100 in simulator speed units, heading / pi, yaw rate, wheel speeds
(fl, fr, rl, rr). Published at `observation_rate` only while odometry, wheels and tiles are
fresh, so a blind camera or a dead encoder silences the heartbeat and the safety watchdog
stops the car.
"""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import SetParametersResult
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String

from refine_core.tasks.car_racing.env import SPEED_SCALE
from refine_core.tasks.registry import get_task
from refine_ros import qos
from refine_ros.messages import pack_json, pack_vector
from refine_ros.nodes._bridge import BridgeNode
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values
from refine_ros.vision import N_TILES, TILE_FEATURES

# The simulator's column order, from the task spec: the contract fitted programs rely on.
COLUMNS: tuple[str, ...] = get_task("car_racing").spec.observation_columns
ACTION_AXES = 3


# Topics, the command type and the rate shape the node at start (read-only); the scales can be
# tuned while it runs. The speed and steering scales belong to the car: the profile sets them.
_LIVE = {"read_only": False}
PARAMETERS: dict[str, Param] = {
    "command_topic": Param("/cmd_vel", "the car's command topic"),
    "command_type": Param("twist", "'twist' (geometry_msgs/Twist) or 'array' (Float64MultiArray [steer, throttle, "
                          "brake])"),
    "max_speed": Param(Required("double"), "m/s for full throttle in twist mode (the car's profile sets it)",
                       (0.0, 20.0), **_LIVE),
    "max_steer": Param(Required("double"), "angular.z for full steer in twist mode (sign flipped to ROS: +z is "
                       "left; the car's profile sets it)", (0.0, 10.0), **_LIVE),
    "odom_topic": Param("/odom", "nav_msgs/Odometry of the car"),
    "wheel_topic": Param("/wheel_states", "sensor_msgs/JointState with wheel angular velocities"),
    "wheel_joints": Param(["wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr"], "wheel joint names: front-left, "
                          "front-right, rear-left, rear-right", **_LIVE),
    "wheel_speed_scale": Param(1.0, "factor from the encoder's rad/s to simulator wheel omega", **_LIVE),
    "tiles_topic": Param("track/tiles", "Float64MultiArray (12 x 4) from the track detector"),
    "speed_to_sim": Param(1.0, "factor from odometry m/s to simulator speed units (before / 100)", (0.0, 1000.0),
                          **_LIVE),
    "observation_rate": Param(50.0, "Hz of refine/observation (the control rate)", (1.0, 1000.0)),
    "sensor_timeout": Param(0.15, "seconds after which odometry, wheels or tiles count as stale", (0.001, 5.0),
                            **_LIVE),
}


def yaw_from_quaternion(w: float, x: float, y: float, z: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def car_indicators(speed_sim: float, yaw: float, yaw_rate: float, wheels: np.ndarray) -> np.ndarray:
    """The 7 indicators in the simulator's units (yaw 0 = the car's start heading)."""
    heading = math.atan2(math.sin(yaw), math.cos(yaw)) / math.pi
    return np.array([speed_sim / SPEED_SCALE, heading, yaw_rate, *wheels], dtype=float)


class RcCarBridge(BridgeNode):
    axes = ACTION_AXES

    def __init__(self, **kwargs) -> None:
        super().__init__("rc_car_bridge", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            values(self, PARAMETERS)  # refuses to start without the car's own values
            command_type = self._param("command_type")
            if command_type not in ("twist", "array"):
                raise StartRefused(f"rc_car_bridge: command_type must be 'twist' or 'array', got {command_type!r}")
            if len(self._param("wheel_joints")) != 4:
                raise StartRefused("rc_car_bridge: wheel_joints needs 4 names (front-left, front-right, rear-left, rear-right)")
        self.add_on_set_parameters_callback(self._on_set_parameters)
        p = self._param

        kind = Twist if command_type == "twist" else Float64MultiArray
        self._cmd_pub = self.create_publisher(kind, p("command_topic"), qos.COMMAND)
        self._obs_pub = self.create_publisher(Float64MultiArray, "refine/observation", qos.CONTROL)
        self._columns_pub = self.create_publisher(String, "refine/observation_columns", qos.LATCHED)
        self._columns_pub.publish(pack_json(list(COLUMNS)))

        self.create_subscription(Float64MultiArray, "refine/safe_action", self._on_action, qos.COMMAND)
        self.create_subscription(Odometry, p("odom_topic"), self._on_odom, qos.SENSOR)
        self.create_subscription(JointState, p("wheel_topic"), self._on_wheels, qos.SENSOR)
        self.create_subscription(Float64MultiArray, p("tiles_topic"), self._on_tiles, qos.SENSOR)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)

        self._odom: tuple[float, float, float, float] | None = None  # time, speed, yaw, yaw rate
        self._wheels: tuple[float, np.ndarray] | None = None
        self._tiles: tuple[float, np.ndarray] | None = None
        self.create_timer(1.0 / float(p("observation_rate")), self._publish_observation)

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Read-only parameters never get here; the live ones are checked."""
        for param in params:
            if param.name == "wheel_joints" and len(param.value) != 4:
                return SetParametersResult(successful=False, reason="wheel_joints needs 4 names")
        return SetParametersResult(successful=True)

    def _on_action(self, msg: Float64MultiArray) -> None:
        values = self._safe_values(msg)
        if values is None:
            return
        steer = float(np.clip(values[0], -1.0, 1.0))
        gas, brake = (float(np.clip(v, 0.0, 1.0)) for v in values[1:3])
        if self._param("command_type") == "twist":
            cmd = Twist()
            cmd.linear.x = (gas - brake) * float(self._param("max_speed"))
            cmd.angular.z = -steer * float(self._param("max_steer"))
        else:
            cmd = Float64MultiArray(data=[steer, gas, brake])
        self._cmd_pub.publish(cmd)

    def _on_odom(self, msg: Odometry) -> None:
        v, q = msg.twist.twist.linear, msg.pose.pose.orientation
        speed = math.hypot(v.x, v.y) * float(self._param("speed_to_sim"))
        yaw = yaw_from_quaternion(q.w, q.x, q.y, q.z)
        self._odom = (self._now(), speed, yaw, float(msg.twist.twist.angular.z))

    def _on_wheels(self, msg: JointState) -> None:
        index = {n: i for i, n in enumerate(msg.name)}
        names = list(self._param("wheel_joints"))
        if not all(n in index and index[n] < len(msg.velocity) for n in names):
            return
        scale = float(self._param("wheel_speed_scale"))
        self._wheels = (self._now(), np.array([msg.velocity[index[n]] * scale for n in names]))

    def _on_tiles(self, msg: Float64MultiArray) -> None:
        data = np.asarray(msg.data, dtype=float)
        if data.size != N_TILES * TILE_FEATURES or not np.all(np.isfinite(data)):
            return
        self._tiles = (self._now(), data)

    def _publish_observation(self) -> None:
        now, timeout = self._now(), float(self._param("sensor_timeout"))
        if any(i is None or now - i[0] > timeout for i in (self._odom, self._wheels, self._tiles)):
            return
        _, speed, yaw, yaw_rate = self._odom
        ind = car_indicators(speed, yaw, yaw_rate, self._wheels[1])
        obs = np.concatenate([self._tiles[1], ind])
        if not np.all(np.isfinite(obs)):
            return
        self._obs_pub.publish(pack_vector(self.episode, self.step, obs))
        self.step += 1


def main(args: list[str] | None = None) -> None:
    run_node(RcCarBridge, args)


if __name__ == "__main__":
    main()
