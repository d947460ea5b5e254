"""The RC car as the rest of refine_ros knows it: its nodes, profiles, stand-ins and rig
settings (refine_ros/robots/descriptor.py says who reads what)."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from refine_ros.robots.descriptor import Robot, RobotRig


class RcCarRig(RobotRig):
    """F1TENTH's AckermannDriveStamped (or a Twist), odometry as the heartbeat, the track
    detector's tiles from the camera."""

    def command_topic(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        if bridge.get("command_type", "ackermann") == "ackermann":
            from ackermann_msgs.msg import AckermannDriveStamped

            return AckermannDriveStamped, bridge.get("command_topic") or "/drive"
        from geometry_msgs.msg import Twist

        return Twist, bridge.get("command_topic") or "/cmd_vel"

    def motion(self, msg: Any) -> tuple[float, ...]:
        """(speed, steering angle), or a twist's (speed, yaw rate)."""
        if hasattr(msg, "drive"):
            return (msg.drive.speed, msg.drive.steering_angle)
        return (msg.linear.x, msg.angular.z)

    def moving(self, msg: Any) -> bool:
        return self.motion(msg)[0] != 0.0  # a steering angle at speed 0 moves nothing

    def beyond_limits(self, msg: Any, bridge: Mapping[str, Any]) -> bool:
        values = self.motion(msg)
        if not all(math.isfinite(v) for v in values):
            return True
        return values[0] < 0.0 or values[0] > float(bridge["max_speed"]) + 1e-9

    def heartbeat(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        from nav_msgs.msg import Odometry

        return Odometry, "/odom"

    def watch_sensor(self, node: Any, bridge: Mapping[str, Any], arrived: Callable[[], None]) -> None:
        """The track detector's tiles (camera -> detector)."""
        from std_msgs.msg import Float64MultiArray

        from refine_ros.wire import qos

        node.create_subscription(Float64MultiArray, "track/tiles", lambda _m: arrived(), qos.SENSOR)

    def controller(self, values: np.ndarray) -> tuple[float, ...]:
        """Follow the road from the observed tiles at low speed."""
        tiles = np.asarray(values[:48]).reshape(12, 4)
        x, theta = float(tiles[3, 0]), float(tiles[3, 2])
        steer = float(np.clip(3.0 * x - 1.5 * theta, -1.0, 1.0))  # left of centre: steer right
        return (steer, 0.2, 0.0)

    def watch_twin(self, node: Any, bridge: Mapping[str, Any]) -> Callable[[], dict[str, Any]]:
        """The detector's tiles next to the simulator's own (the twin publishes them): the
        lateral offset error over DDS, as `detector`."""
        from std_msgs.msg import Float64MultiArray

        from refine_ros.wire import qos

        lock = threading.Lock()
        truth: list[np.ndarray] = []
        pairs: list[tuple[np.ndarray, np.ndarray]] = []

        def on_truth(msg) -> None:
            with lock:
                truth[:] = [np.asarray(msg.data, dtype=float).reshape(12, 4)]

        def on_tiles(msg) -> None:
            with lock:
                if truth and len(msg.data) == 48:
                    pairs.append((np.asarray(msg.data, dtype=float).reshape(12, 4), truth[0]))

        node.create_subscription(Float64MultiArray, "car_twin/simulator_tiles", on_truth, qos.SENSOR)
        node.create_subscription(Float64MultiArray, "track/tiles", on_tiles, qos.SENSOR)

        def figures() -> dict[str, Any]:
            with lock:
                seen = list(pairs)
            if not seen:
                return {"detector": {"frames": 0}}
            detected = np.array([d for d, _ in seen])
            simulated = np.array([t for _, t in seen])
            return {"detector": {
                "frames": len(seen),
                "mean_abs_x_error": round(float(np.abs(detected[..., 0] - simulated[..., 0]).mean()), 4),
                "simulator_mean_abs_x": round(float(np.abs(simulated[..., 0]).mean()), 4)}}
        return figures

    def twin_bench_figures(self, quick: bool) -> dict[str, Any]:
        """The detector's tile error on the twin's rendered camera, next to the simulator's."""
        from refine_ros.robots.rc_car.bench import detector_tile_error

        tiles = detector_tile_error((0,), every=4 if quick else 2, max_steps=100 if quick else 1500, progress=False)
        # (only a failed rig's key ends in "_error": `refine bench` reads those as a failed section)
        return {"twin_car_detector_x_mean_abs_deviation": tiles["x"]["mean"],
                "twin_car_simulator_mean_abs_x": tiles["simulator_mean_abs_x"],
                "twin_car_detector": {k: tiles[k] for k in ("x", "theta", "border_agreement", "not_found_fraction",
                                                            "frames")}}  # fmt: skip


ROBOT = Robot(
    name="car",
    task="car_racing",
    profile="rc_car_real",
    bridge="rc_car_bridge",
    twin="car_twin",
    fake_driver="refine_ros.robots.rc_car.fake_driver:FakeCarDriver",
    rig=RcCarRig(),
    rig_nodes=("track_detector",),
    moving_action=(0.0, 0.6, 0.0),  # straight ahead, 60 % gas
    fault_levers={"stale_sensor": "tiles_lost"},
    twin_heartbeat="odom",
    take_stick={"trigger_right": -0.3},  # right trigger part-way: gas
)
