"""Scripted car-racing expert with privileged track geometry.

Why privileged: the demonstration must be good (>= 850 return) and reproducible without a
human; reading the exact centreline lets a simple pure-pursuit steering law plus a
curvature-based speed limit drive near the limit of grip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from gymnasium.envs.box2d.car_dynamics import SIZE, WHEEL_R

from refine_core.tasks.car_racing.env import CarRacingSemantic, wrap_angle

WHEELBASE = (80 + 82) * SIZE  # front to rear axle, world units
WHEEL_RADIUS = WHEEL_R * SIZE


@dataclass(frozen=True)
class CarExpertConfig:
    lookahead_base: float = 3.0  # tiles
    lookahead_per_speed: float = 0.05  # tiles per world-unit/s
    steer_gain: float = 2.5
    v_max: float = 110.0  # world units / s
    v_min: float = 20.0
    curve_window: int = 30  # tiles inspected for the speed limit
    curve_span: int = 5  # tiles over which a bend's curvature is measured
    a_lat: float = 250.0  # usable lateral acceleration, world units / s^2
    a_brake: float = 35.0  # usable braking deceleration
    max_slip: float = 0.05
    gas: float = 1.0
    coast_steer: float = 0.2  # above this steering magnitude, no gas (rear-wheel drive)
    brake_margin: float = 5.0


class CarExpert:
    """Callable obs -> action bound to one env; reads geometry through `env.unwrapped`."""

    def __init__(self, env, config: CarExpertConfig | None = None) -> None:
        base = env.unwrapped
        if not isinstance(base, CarRacingSemantic):
            raise TypeError(f"CarExpert needs a CarRacingSemantic env, got {type(base).__name__}")
        self.env = base
        self.config = config or CarExpertConfig()

    def __call__(self, obs) -> np.ndarray:
        c = self.config
        env = self.env
        g = env.track_geometry()
        st = env.car_state()
        pos = np.array([st["x"], st["y"]])
        speed = st["speed"]
        n = len(g)
        i = env.track_index
        look = int(round(c.lookahead_base + c.lookahead_per_speed * speed))
        target = g.points[(i + look) % n]
        d = target - pos
        # angle of the target in the car frame, counter-clockwise positive (left)
        fwd_angle = st["angle"] + math.pi / 2.0
        alpha = float(wrap_angle(math.atan2(d[1], d[0]) - fwd_angle))
        # pure pursuit: the wheel angle (rad, = steer command) of the arc through the target
        ld = max(float(np.hypot(d[0], d[1])), 1e-3)
        wheel = math.atan2(2.0 * WHEELBASE * math.sin(alpha), ld)
        steer = float(np.clip(-c.steer_gain * wheel, -1.0, 1.0))

        # speed limit: each upcoming tile allows sqrt(a_lat / curvature) through its bend,
        # and the car must be able to brake down to that over the distance left
        idx = (i + np.arange(c.curve_window + c.curve_span)) % n
        h = np.unwrap(g.heading[idx])
        turn = np.abs(h[c.curve_span :] - h[: -c.curve_span])
        curvature = turn / (c.curve_span * g.tile_length) + 1e-6
        v_corner = np.sqrt(c.a_lat / curvature)
        dist = np.arange(c.curve_window) * g.tile_length
        limit = float(np.min(np.sqrt(v_corner**2 + 2.0 * c.a_brake * dist)))
        limit = min(max(limit, c.v_min), c.v_max)
        gas = 0.0
        brake = 0.0
        if speed < limit:
            # traction control: the rear-wheel-drive car spins when the driven wheels slip
            rear = 0.5 * (abs(st["wheel_omegas"][2]) + abs(st["wheel_omegas"][3])) * WHEEL_RADIUS
            slipping = rear > speed * (1.0 + c.max_slip) + 1.0
            gas = 0.0 if slipping or abs(steer) > c.coast_steer else c.gas
        elif speed > limit + c.brake_margin:
            brake = 0.8
        return np.array([steer, gas, brake], dtype=np.float32)
