"""A small real Gymnasium problem for RL tests: a point on a line to be driven to zero.

Small enough that a handful of updates visibly learn, so RL tests can assert improvement
within seconds; a real `gym.Env` and a real `Task`, not a mock of either.
"""

import gymnasium as gym
import numpy as np
import torch

from refine_core.tasks.base import Task
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec


class DriftEnv(gym.Env):
    """A point on a line that should be driven to 0; reward is minus the distance."""

    observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = float(self.np_random.choice([-2.0, 2.0]))
        self.t = 0
        return np.array([self.x], np.float32), {}

    def step(self, action):
        self.x += 0.5 * float(np.clip(action[0], -1, 1))
        self.t += 1
        return np.array([self.x], np.float32), -abs(self.x), False, self.t >= 20, {}


class DriftTask(Task):
    spec = TaskSpec(
        name="drift", env_id="test/Drift-v0", description="drive x to zero",
        policy_class="DriftPolicy",
        inputs=(InputSpec("state", (1,), ("x",)),),
        actions=(ActionSpec("push", -1.0, 1.0),),
        metric=MetricSpec("return", True), episode_steps=20,
    )

    def make_env(self, render_mode=None):
        return DriftEnv()

    def expert(self, env):
        return lambda obs: np.clip(-obs, -1, 1)

    def split_observation(self, obs):
        return {"state": np.asarray(obs, np.float32)}

    def episode_summary(self, observations, rewards, infos):
        return {"return": float(sum(rewards)), "metric": float(sum(rewards)), "success": 0.0}


class DriftPolicy(torch.nn.Module):
    def __init__(self, gain: float = 0.0):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.tensor([gain]))
        self.log_std = torch.nn.Parameter(torch.tensor([-0.5]))

    def forward(self, state):
        mean = self.gain * state
        tril = torch.diag_embed(self.log_std.exp().expand_as(mean))
        return mean, tril, {"weight_gain": self.gain}


def mean_action_return(task, policy, seeds):
    total = 0.0
    for seed in seeds:
        env = task.make_env()
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            with torch.no_grad():
                mean, _, _ = policy(torch.as_tensor(obs)[None])
            obs, r, term, trunc, _ = env.step(mean[0].numpy())
            total += r
            done = term or trunc
    return total / len(seeds)
