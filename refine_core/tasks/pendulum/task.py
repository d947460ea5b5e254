"""The pendulum `Task`: spec text for program authors, env factory, expert and summaries.

Metric: the episode return (Pendulum-v1's own reward), higher is better; it rewards both
getting up quickly and staying up, and it is the figure published results for Pendulum-v1
report. `success` (1 when the last second is spent balanced) and `upright_fraction` are
reported beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.base import Expert, Task
from refine_core.tasks.pendulum import ENTRY
from refine_core.tasks.pendulum.env import UPRIGHT_ANGLE
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

ENV_ID = ENTRY.env_id
EPISODE_STEPS = ENTRY.max_episode_steps
SUCCESS_STEPS = 20  # the final second must be balanced for an episode to count as a success

DESCRIPTION = """\
Swing a pendulum up from a random start and keep it balanced upright (Gymnasium's Pendulum-v1
physics). A 1 m, 1 kg rod hangs from a motor at its pivot. The motor's 2 N m cannot lift the
rod straight up against up to 5 N m of gravity, so a policy must first pump energy by swinging
back and forth, then balance. Each step lasts 0.05 s; episodes last 200 steps (10 s) and never
end early. The start angle is uniform over the whole circle, the start angular velocity
uniform in [-1, 1] rad/s.
Reward per step: -(angle^2 + 0.1 angular_velocity^2 + 0.001 torque^2), from the state before
the step; balancing perfectly earns 0, hanging still about -9.9 per step.
- state (2,): angle = rad from upright, wrapped to [-pi, pi): 0 upright, +-pi hanging down,
  positive counter-clockwise; angular_velocity = rad/s, positive counter-clockwise, within
  [-8, 8].
Dynamics: angular acceleration = 15 sin(angle) + 3 torque (rad/s^2), so the energy measure
E = 0.5 angular_velocity^2 + 15 (cos(angle) - 1) is 0 upright at rest and -30 hanging at
rest, and it changes at 3 torque angular_velocity per second: torque along the velocity adds
energy.
Action: torque in [-2, 2] N m, positive counter-clockwise (it increases the angle).
"""


def make_spec() -> TaskSpec:
    return TaskSpec(
        name="pendulum",
        env_id=ENV_ID,
        description=DESCRIPTION,
        policy_class="PendulumPolicy",
        inputs=(
            InputSpec("state", (2,), ("angle", "angular_velocity"),
                      "(angle from upright in rad, angular velocity in rad/s); see above."),
        ),
        actions=(ActionSpec("torque", -2.0, 2.0, "motor torque, N m, positive counter-clockwise"),),
        metric=MetricSpec("return", True, "the sum of the rewards over the 200 steps (at most 0)"),
        episode_steps=EPISODE_STEPS,
        control_period_s=0.05,
        deployed_mode="mean",  # a robot runs the mean action (RL selects in this mode)
    )


class PendulumTask(Task):
    # one text, full of facts, with no published counterpart (the published work has no pendulum)
    description_variants = ("detailed",)

    def __init__(self, description: str = "detailed") -> None:
        self.spec = make_spec()

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        return gym.make(ENV_ID, render_mode=render_mode)

    def expert(self, env: gym.Env) -> Expert:
        from refine_core.tasks.pendulum.expert import PendulumExpert

        return PendulumExpert(env)

    def split_observation(self, obs: Any) -> dict[str, np.ndarray]:
        state = np.asarray(obs, dtype=np.float32)
        if state.shape != (2,):
            raise ValueError(f"pendulum observation has shape {state.shape}; want (2,)")
        return {"state": state}

    def episode_summary(
        self, observations: Sequence[Any], rewards: Sequence[float], infos: Sequence[dict]
    ) -> dict[str, float]:
        ret = float(np.sum(np.asarray(rewards, dtype=np.float64)))
        angles = np.abs(np.asarray(observations, dtype=np.float64).reshape(len(observations), -1)[:, 0])
        upright = angles < UPRIGHT_ANGLE
        balanced = len(rewards) >= SUCCESS_STEPS and bool(upright[-SUCCESS_STEPS:].all())
        return {
            "return": ret,
            "metric": ret,
            "success": 1.0 if balanced else 0.0,
            "steps": float(len(rewards)),
            "upright_fraction": float(upright[1:].mean()) if len(upright) > 1 else 0.0,
        }
