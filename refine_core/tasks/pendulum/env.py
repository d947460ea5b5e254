"""Gymnasium's Pendulum-v1 with a semantic observation: the angle from upright and the angular
velocity, instead of (cos, sin, angular velocity).

Why: a structured policy wants the quantity it reasons about ("how far from upright, which
way") as one named number; the stock cos/sin pair makes a program rebuild it. The physics,
reward and starting distribution are the stock env's, so results stay comparable with what is
published for Pendulum-v1. The full contract is the docstring of `PendulumSemantic`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.error import InvalidAction

MAX_TORQUE = 2.0  # N m, the stock limit
MAX_SPEED = 8.0  # rad/s, the stock clip
LENGTH = 1.0  # m, the stock rod
UPRIGHT_ANGLE = 0.2  # rad from upright that counts as balanced
GRAVITY_TERM = 15.0  # 3 g / (2 l) with the stock g = 10, l = 1: angular acceleration per sin(angle)
TORQUE_TERM = 3.0  # 3 / (m l^2): angular acceleration per N m


def wrap_angle(angle: float) -> float:
    """Wrap to [-pi, pi)."""
    return (float(angle) + math.pi) % (2.0 * math.pi) - math.pi


class PendulumSemantic(PendulumEnv):
    """Swing a pendulum up from a random start and balance it upright.

    ## Description
    A 1 m rod of 1 kg hangs from a motorised pivot (Gymnasium's Pendulum-v1 dynamics: gravity
    10 m/s^2, 0.05 s per step, semi-implicit Euler). The motor is too weak to lift the rod
    straight up from hanging (2 N m against up to 5 N m of gravity), so it has to pump energy
    by swinging before it can balance.

    ## Action Space
    `Box(-2, 2, (1,), float32)`: the motor torque in N m, positive counter-clockwise (seen with
    the pivot's axis pointing at the viewer). Out-of-range values are clipped; a non-finite or
    wrongly shaped action raises `InvalidAction`.

    ## Observation Space
    `Box([-pi, -8], [pi, 8], (2,), float32)`:
    - ``angle``: rad from upright, wrapped to [-pi, pi); 0 upright, +-pi hanging down,
      positive counter-clockwise (the tip moves to the viewer's left).
    - ``angular_velocity``: rad/s, positive counter-clockwise, clipped to +-8 by the physics.
    With a = 15 sin(angle) + 3 torque the angular acceleration, the energy measure
    0.5 angular_velocity^2 + 15 (cos(angle) - 1) is 0 upright at rest and -30 hanging at rest.

    ## Rewards
    The stock cost, negated: -(angle^2 + 0.1 angular_velocity^2 + 0.001 torque^2), using the
    angle and velocity before the step; 0 is the best a step can earn.

    ## Starting State
    Angle uniform in [-pi, pi], angular velocity uniform in [-1, 1]; the seed fixes both.

    ## Episode End
    Never terminates; the registered id truncates after 200 steps (10 s). ``info["success"]``
    is 1.0 on steps that end within 0.2 rad of upright.

    ## Arguments
    `render_mode` (None, "human", "rgb_array").

    ## Helpers
    ``pendulum_state() -> dict`` (angle, angular_velocity, torque of the last step) for
    experts and viewers.

    ## Version History
    - v0: Pendulum-v1 physics and reward, observation (angle, angular velocity).
    """

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} not in {self.metadata['render_modes']}")
        super().__init__(render_mode=render_mode)
        self.state: np.ndarray | None = None  # set by reset()
        self.observation_space = spaces.Box(
            np.array([-math.pi, -MAX_SPEED], dtype=np.float32),
            np.array([math.pi, MAX_SPEED], dtype=np.float32),
            dtype=np.float32,
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed, options=options)
        return self.semantic_observation(), {}

    def step(self, action: Any):
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(action, dtype=np.float64).reshape(-1)
        if a.shape != (1,) or not np.all(np.isfinite(a)):
            raise InvalidAction(f"action must be one finite torque, got {action!r}")
        _, reward, _, _, _ = super().step(a)
        obs = self.semantic_observation()
        return obs, float(reward), False, False, {"success": float(abs(obs[0]) < UPRIGHT_ANGLE)}

    def semantic_observation(self) -> np.ndarray:
        angle, velocity = self.state
        return np.array([wrap_angle(angle), velocity], dtype=np.float32)

    def pendulum_state(self) -> dict[str, float]:
        if self.state is None:
            raise RuntimeError("call reset() first")
        angle, velocity = self.state
        torque = 0.0 if self.last_u is None else float(self.last_u)
        return {"angle": wrap_angle(angle), "angular_velocity": float(velocity), "torque": torque}
