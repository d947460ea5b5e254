"""The RC car's side of the car task, as plain functions (no ROS, no simulator): the task's
action [steer, gas, brake] -> the command a car's driver takes, in the car's own units, and the
car's sensors -> the task's seven indicators. `rc_car_bridge` is a thin adapter around these.

Commands (`command_type`):
- `ackermann`: F1TENTH's `/drive`, ackermann_msgs/AckermannDriveStamped (through their
  `ackermann_mux`): a steering angle in rad (positive left, REP-103) and a speed in m/s;
- `twist`: geometry_msgs/Twist for a driver that takes a body velocity: linear.x in m/s and the
  yaw rate that steering angle gives at that speed, v tan(angle) / wheelbase, in rad/s;
- `array`: std_msgs/Float64MultiArray [steer, throttle, brake] in the task's units, for a driver
  that drives its motor from a throttle and brakes with a brake channel.

A stop is zero motion in every mode, never reverse: speed = max(gas - brake, 0) x max_speed, so
the safety node's stop [0, 0, 1] is speed 0 (the bug this replaces sent (gas - brake) x
max_speed, i.e. full reverse on every stop). In `array` mode the stop is [0, 0, 1] (brake is a
brake channel there, not reverse). `max_speed` is the car's one speed limit in m/s in every mode:
ackermann and twist never command more (it is the setpoint at full gas), and in array mode the
throttle is cut while the measured speed is at or above it (or unknown).

Indicators: the simulator's speed indicator is world units per second / SPEED_SCALE, and each
wheel's reading is its surface speed on the same scale (a rolling wheel reads the speed). A
robot's speeds are m/s, converted by `speed_to_sim` (world units per metre). Wheel surface
speeds come from one of three sources (`wheel_source`):
- `encoders`: four wheel joint velocities (rad/s) x `wheel_radius`;
- `erpm`: the motor's electrical RPM from a VESC (vesc_msgs/VescStateStamped on `sensors/core`):
  (erpm - offset) / `speed_to_erpm_gain` m/s, the same value on all four wheels (one motor
  drives them through the differentials);
- `none`: all four equal the odometry speed, i.e. what rolling wheels without slip would read.
  A program then sees wheel readings equal to the speed indicator and cannot see wheel spin.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from refine_core.tasks.car_racing.units import SPEED_SCALE

COMMAND_TYPES = ("ackermann", "twist", "array")
STANDARD_TOPICS = {"ackermann": "/drive", "twist": "/cmd_vel", "array": ""}
"""The command topic each type uses when `command_topic` is left empty ('' = must be set)."""
WHEEL_SOURCES = ("encoders", "erpm", "none")
STOP_ARRAY = (0.0, 0.0, 1.0)
"""The array-mode stop: steer 0, throttle 0, brake 1."""


@dataclass(frozen=True)
class CarLimits:
    """The car's command limits, in its own units."""

    max_speed: float
    """m/s: the speed setpoint at full gas, and the highest speed ever commanded."""
    max_steering_angle: float
    """rad: the steering angle at full steer."""
    wheelbase: float = 0.0
    """m: front to rear axle (twist mode: the yaw rate of a steering angle)."""


@dataclass(frozen=True)
class Setpoint:
    steering_angle: float
    """rad, positive turns left."""
    speed: float
    """m/s, never negative."""


STOP = Setpoint(0.0, 0.0)


def _unit(value: float, low: float, high: float) -> float:
    return float(min(max(value, low), high))


def setpoint(action: Sequence[float], limits: CarLimits) -> Setpoint:
    """[steer, gas, brake] -> steering angle and speed. The task's negative steer is left, a
    positive ROS steering angle is left, hence the sign flip. Anything non-finite is a stop."""
    if len(action) != 3 or not all(math.isfinite(v) for v in action):
        return STOP
    steer = _unit(action[0], -1.0, 1.0)
    gas, brake = _unit(action[1], 0.0, 1.0), _unit(action[2], 0.0, 1.0)
    speed = max(gas - brake, 0.0) * limits.max_speed
    return Setpoint(-steer * limits.max_steering_angle, speed)


def yaw_rate(sp: Setpoint, wheelbase: float) -> float:
    """The yaw rate (rad/s) of a kinematic bicycle at `sp` (zero at standstill)."""
    return sp.speed * math.tan(sp.steering_angle) / wheelbase


def array_command(action: Sequence[float], measured_speed: float | None, limits: CarLimits) -> tuple[float, ...]:
    """[steer, throttle, brake] as the task gives them, the throttle cut while the car is at or
    above `max_speed` (m/s) or its speed is unknown. Anything non-finite is the stop."""
    if len(action) != 3 or not all(math.isfinite(v) for v in action):
        return STOP_ARRAY
    steer = _unit(action[0], -1.0, 1.0)
    gas, brake = _unit(action[1], 0.0, 1.0), _unit(action[2], 0.0, 1.0)
    if measured_speed is None or not math.isfinite(measured_speed) or measured_speed >= limits.max_speed:
        gas = 0.0
    return (steer, gas, brake)


def erpm_to_speed(erpm: float, gain: float, offset: float = 0.0) -> float:
    """A VESC's electrical RPM -> m/s, the inverse of F1TENTH's erpm = gain x speed + offset."""
    return (erpm - offset) / gain


def yaw_from_quaternion(w: float, x: float, y: float, z: float) -> float:
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def car_indicators(speed: float, yaw: float, yaw_rate_: float, wheel_speeds: Sequence[float],
                   speed_to_sim: float) -> np.ndarray:
    """The 7 indicators in the simulator's units from the car's: speed and wheel surface speeds
    in m/s (x `speed_to_sim` world units per metre, / SPEED_SCALE), yaw in rad (0 = the car's
    start heading), yaw rate in rad/s."""
    heading = math.atan2(math.sin(yaw), math.cos(yaw)) / math.pi
    scale = speed_to_sim / SPEED_SCALE
    return np.array([speed * scale, heading, yaw_rate_, *(w * scale for w in wheel_speeds)], dtype=float)
