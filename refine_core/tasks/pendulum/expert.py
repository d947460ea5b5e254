"""Scripted pendulum expert: pump energy until the swing reaches upright, then balance with PD.

Why this law: with a = 15 sin(angle) + 3 torque, the energy E = 0.5 w^2 + 15 (cos(angle) - 1)
changes at dE/dt = 3 torque w, so pushing along the velocity while E < 0 (the upright energy)
raises the swing on every pass; near upright with about the right energy, a PD law holds it.
It reads only the observation, so a program that learns the same rule is possible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from refine_core.tasks.pendulum.env import GRAVITY_TERM, MAX_TORQUE


@dataclass(frozen=True)
class PendulumExpertConfig:
    kp: float = 10.0  # N m per rad from upright
    kd: float = 2.0  # N m per rad/s
    pump_gain: float = 0.5  # N m per (unit of energy missing x rad/s)
    catch_angle: float = 0.6  # rad: balance only this close to upright ...
    catch_energy: float = 4.0  # ... and with the energy this close to the upright energy (0)
    kick_speed: float = 1e-3  # below this |w| the pump pushes counter-clockwise to start


def energy(angle: float, velocity: float) -> float:
    """0 upright at rest, -30 hanging at rest (units of rad^2/s^2)."""
    return 0.5 * velocity * velocity + GRAVITY_TERM * (math.cos(angle) - 1.0)


class PendulumExpert:
    """Callable obs -> action; `obs` is the env's (angle, angular velocity)."""

    def __init__(self, env: Any = None, config: PendulumExpertConfig | None = None) -> None:
        self.config = config or PendulumExpertConfig()

    def __call__(self, obs: Any) -> np.ndarray:
        c = self.config
        angle, velocity = (float(v) for v in np.asarray(obs, dtype=np.float64).reshape(-1)[:2])
        missing = -energy(angle, velocity)
        if abs(angle) < c.catch_angle and abs(missing) < c.catch_energy:
            torque = -(c.kp * angle + c.kd * velocity)
        else:
            direction = velocity if abs(velocity) > c.kick_speed else 1.0
            torque = c.pump_gain * missing * direction
        return np.array([min(max(torque, -MAX_TORQUE), MAX_TORQUE)], dtype=np.float32)
