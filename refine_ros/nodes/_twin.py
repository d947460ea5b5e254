"""What the twin driver nodes (`arm_twin`, `car_twin`) share: their dropout and noise
parameters, the operator's `~/silence` lever, ROS stamps from the twin's seconds, and the
tick that keeps the simulator on the wall clock.

Why a helper: both twins declare the same kinds of parameters (per-sensor dropout windows
and random dropouts, a command latency, a seed) and must read them the same way, or a
rehearsal configured for one robot would mean something else on the other.
"""

from __future__ import annotations

from typing import Any

from builtin_interfaces.msg import Time
from rclpy.node import Node
from std_srvs.srv import SetBool

from refine_ros.params import Param, Unset
from refine_ros.twin.realtime import DropoutPlan, Window


def dropout_parameters(sensors: tuple[str, ...]) -> dict[str, Param]:
    """Per sensor: fixed silent windows and random ones (a Poisson rate and a mean length)."""
    table: dict[str, Param] = {}
    for sensor in sensors:
        table[f"dropouts.{sensor}.windows"] = Param(
            Unset("double_array"), f"{sensor}: silent windows as [start, end, start, end, ...] seconds since the "
            "twin started (unset: none)")
        table[f"dropouts.{sensor}.rate"] = Param(
            0.0, f"{sensor}: random dropouts per second (a Poisson process; 0: none)", (0.0, 100.0))
        table[f"dropouts.{sensor}.mean_duration"] = Param(
            0.2, f"{sensor}: mean length of a random dropout, s (exponential)", (0.001, 60.0))
    return table


def dropout_plans(p: dict[str, Any], sensors: tuple[str, ...]) -> dict[str, DropoutPlan]:
    """The parameters' dropouts as plans; ValueError naming the sensor when a window list is
    odd or a window is empty."""
    plans: dict[str, DropoutPlan] = {}
    for sensor in sensors:
        flat = list(p.get(f"dropouts.{sensor}.windows") or ())
        if len(flat) % 2:
            raise ValueError(f"dropouts.{sensor}.windows needs [start, end] pairs, got {len(flat)} values")
        try:
            windows = tuple(Window(float(a), float(b)) for a, b in zip(flat[::2], flat[1::2], strict=True))
        except ValueError as exc:
            raise ValueError(f"dropouts.{sensor}.windows: {exc}") from None
        rate = float(p.get(f"dropouts.{sensor}.rate") or 0.0)
        if windows or rate > 0:
            plans[sensor] = DropoutPlan(windows, rate, float(p[f"dropouts.{sensor}.mean_duration"]))
    return plans


def stamp(seconds: float) -> Time:
    """A ROS stamp from seconds on the node's clock."""
    ns = int(round(seconds * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def now_s(node: Node) -> float:
    return node.get_clock().now().nanoseconds * 1e-9


class SilenceLever:
    """`~/silence_<sensor>` (std_srvs/SetBool) per sensor: the operator pulls a sensor's plug
    during a rehearsal (true) and puts it back (false), on top of the configured dropouts. A
    silenced sensor publishes nothing, as a disconnected driver."""

    def __init__(self, node: Node, sensors: tuple[str, ...]) -> None:
        self.silent = dict.fromkeys(sensors, False)
        self._node = node
        for sensor in sensors:
            node.create_service(SetBool, f"~/silence_{sensor}",
                                lambda req, res, s=sensor: self._set(s, req, res))  # fmt: skip

    def _set(self, sensor: str, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        self.silent[sensor] = bool(request.data)
        self._node.get_logger().warning(f"{sensor}: {'silenced by the operator' if request.data else 'back'}")
        response.success, response.message = True, f"{sensor} {'silent' if request.data else 'publishing'}"
        return response

    def __call__(self, sensor: str) -> bool:
        return self.silent[sensor]
