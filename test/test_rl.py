"""RL maths with hand-worked numbers, and a check that a few updates raise the return."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from refine_core.learn.rl import (
    RLConfig,
    clipped_surrogate,
    entropy_coef_at,
    normalised_advantages,
    reward_to_go,
    train_rl,
    windowed_log_ratio,
)
from refine_core.tasks.base import Task
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec


def test_reward_to_go_discounts_and_stops_at_episode_end():
    rewards = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    alive = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    rtg = reward_to_go(rewards, alive, gamma=0.5)
    # row 0: 1 + .5*2 + .25*3 = 2.75, 2 + .5*3 = 3.5, 3
    # row 1: the third reward is after the end: 1 + .5*2 = 2, 2, 0
    assert torch.allclose(rtg, torch.tensor([[2.75, 3.5, 3.0], [2.0, 2.0, 0.0]]))


def test_advantages_are_normalised_over_live_trajectories_only():
    returns = torch.tensor([[1.0, 5.0], [3.0, 0.0], [5.0, 7.0]])
    alive = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    adv = normalised_advantages(returns, alive)
    # t=0: mean 3, population std sqrt(8/3)
    std0 = np.sqrt(8 / 3)
    assert adv[:, 0].tolist() == pytest.approx([-2 / std0, 0.0, 2 / std0], rel=1e-5)
    # t=1: live are rows 0 and 2 (5, 7): mean 6, std 1; the dead row gets 0
    assert adv[:, 1].tolist() == pytest.approx([-1.0, 0.0, 1.0], rel=1e-5)


def test_single_live_trajectory_gets_zero_advantage():
    adv = normalised_advantages(torch.tensor([[4.0], [9.0]]), torch.tensor([[1.0], [0.0]]))
    assert adv.abs().sum() == 0


def test_windowed_log_ratio_sums_the_last_L_steps():
    new = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    old = torch.zeros(1, 4)
    alive = torch.ones(1, 4)
    out = windowed_log_ratio(new, old, alive, window=2)
    assert torch.allclose(out, torch.tensor([[0.1, 0.3, 0.5, 0.7]]))
    # a window longer than the episode is the full cumulative sum
    assert torch.allclose(windowed_log_ratio(new, old, alive, 10), torch.tensor([[0.1, 0.3, 0.6, 1.0]]))


def test_clipped_surrogate_takes_the_pessimistic_side():
    log_ratio = torch.log(torch.tensor([[1.5, 1.5, 0.5]]))
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    alive = torch.ones(1, 3)
    # per step: min(1.5, 1.2) = 1.2; min(-1.5, -1.2) = -1.5; min(0.5, 0.8) = 0.5
    loss = clipped_surrogate(log_ratio, adv, alive, eps=0.2)
    assert loss.item() == pytest.approx(-(1.2 - 1.5 + 0.5) / 3)


def test_entropy_bonus_decays_linearly_to_zero():
    assert [entropy_coef_at(u, 5, 0.01) for u in range(5)] == pytest.approx([0.01, 0.0075, 0.005, 0.0025, 0.0])


# --------------------------------------------------------------- a small problem end to end
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
    def __init__(self):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.tensor([0.0]))
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


def test_a_few_updates_raise_the_return():
    task, policy = DriftTask(), DriftPolicy()
    before = mean_action_return(task, policy, range(10))
    report = train_rl(task, policy, RLConfig(group_size=8, reset_budget=80, lr=0.05, window=5), progress=False)
    after = mean_action_return(task, policy, range(10))
    assert report.resets == 80 and report.updates == 10
    assert policy.gain.item() < 0, "RL should learn to push toward zero"
    assert after > before + 5
