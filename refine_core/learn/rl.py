"""Post-refinement RL: the finite-window clipped policy gradient of METHOD.md.

Read it top to bottom like a CleanRL script:
  1. sample a *group* of k trajectories from one initial condition (same env seed),
     all k environments stepped in lockstep so the policy sees one batch per time step;
  2. reward-to-go R_t = sum_u gamma^(u-t) r_u, and advantages normalised per time step across
     the trajectories still alive at t (a group baseline, no critic);
  3. for a few epochs: log-ratio per step, summed over a window of the last L steps (the
     windowed likelihood ratio, in log space), PPO-style clipped surrogate on that ratio,
     plus an entropy bonus that decays linearly to zero over the run;
  4. count every environment reset; stop when the reset budget is spent.

It works for any contract-following program (structured or the MLP baseline) because it
only uses the program's (mean, scale_tril) and the task's Gymnasium env.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch.distributions import MultivariateNormal
from tqdm import tqdm

from refine_core.tasks.base import Task


@dataclass
class RLConfig:
    group_size: int = 20
    """Trajectories sampled from one initial condition per update (k)."""
    gamma: float = 0.98
    """Discount of the reward-to-go."""
    window: int = 150
    """Steps L whose per-step ratios multiply into the windowed ratio at step t."""
    clip_eps: float = 0.2
    """PPO clipping range for the windowed ratio."""
    entropy_coef: float = 0.01
    """Entropy bonus at the first update; decays linearly to zero at the last."""
    lr: float = 0.007
    """Adam learning rate."""
    epochs: int = 3
    """Gradient steps per group (full batch)."""
    reset_budget: int = 400
    """Environment resets allowed in total; each trajectory costs one."""
    max_steps: int | None = None
    """Episode length cap (defaults to the task's episode length)."""
    seed: int = 0
    """Seeds action sampling and picks the initial conditions."""
    first_env_seed: int = 5000
    """Initial conditions are env seeds first_env_seed + update index: disjoint from the
    demonstration, selection, diagnostic and evaluation seeds."""
    max_grad_norm: float = 1.0
    """Gradient clipping keeps one bad group from wrecking a fitted program."""


@dataclass
class RLReport:
    resets: int
    updates: int
    wall_time_s: float
    curve: list[dict] = field(default_factory=list)
    """One entry per update: resets so far, mean/std group return, loss, entropy coef."""
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------- the maths
def reward_to_go(rewards: torch.Tensor, alive: torch.Tensor, gamma: float) -> torch.Tensor:
    """(K, T) rewards and alive mask -> (K, T) discounted reward-to-go (0 after the end)."""
    rewards = rewards * alive
    out = torch.zeros_like(rewards)
    running = torch.zeros(rewards.shape[0], dtype=rewards.dtype)
    for t in range(rewards.shape[1] - 1, -1, -1):
        running = rewards[:, t] + gamma * running
        out[:, t] = running
    return out * alive


def normalised_advantages(returns: torch.Tensor, alive: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Per time step, subtract the mean and divide by (std + eps) over the live trajectories.
    A step where only one trajectory is alive gets advantage 0: nothing to compare with."""
    count = alive.sum(0)
    safe = count.clamp(min=1)
    mean = (returns * alive).sum(0) / safe
    var = (((returns - mean) ** 2) * alive).sum(0) / safe
    adv = (returns - mean) / (var.sqrt() + eps)
    return adv * alive * (count > 1)


def windowed_log_ratio(logp_new: torch.Tensor, logp_old: torch.Tensor, alive: torch.Tensor, window: int) -> torch.Tensor:
    """log of prod_{u=t-L+1..t} pi_new(a_u|s_u) / pi_old(a_u|s_u), per (k, t), in log space
    (a cumulative sum difference), so a 150-step product never overflows."""
    step = (logp_new - logp_old) * alive
    csum = torch.cumsum(step, dim=1)
    shifted = torch.zeros_like(csum)
    if window < csum.shape[1]:
        shifted[:, window:] = csum[:, :-window]
    return csum - shifted


def clipped_surrogate(log_ratio: torch.Tensor, adv: torch.Tensor, alive: torch.Tensor, eps: float) -> torch.Tensor:
    """Negative PPO objective on the windowed ratio, averaged over live steps."""
    ratio = torch.exp(log_ratio.clamp(max=20.0))
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - eps, 1 + eps) * adv
    objective = torch.minimum(unclipped, clipped)
    return -(objective * alive).sum() / alive.sum().clamp(min=1)


def entropy_coef_at(update: int, total_updates: int, start: float) -> float:
    """Linear decay from `start` at update 0 to 0 at the last update."""
    if total_updates <= 1:
        return start
    return start * (1.0 - update / (total_updates - 1))


# ---------------------------------------------------------------------------- sampling
@dataclass
class Group:
    inputs: dict[str, torch.Tensor]   # name -> (K, T, *shape)
    actions: torch.Tensor             # (K, T, A) raw samples (before clipping)
    logp_old: torch.Tensor            # (K, T)
    rewards: torch.Tensor             # (K, T)
    alive: torch.Tensor               # (K, T) 1 while the trajectory runs

    @property
    def returns(self) -> torch.Tensor:
        return self.rewards.sum(1)


def policy_outputs(policy: torch.nn.Module, task: Task, inputs: dict[str, torch.Tensor]):
    """Call forward positionally in the spec's input order: programs written elsewhere may
    name their arguments differently."""
    args = [torch.nan_to_num(inputs[s.name]) for s in task.spec.inputs]
    mean, tril, _info = policy(*args)
    return mean, tril


def sample_group(task: Task, policy: torch.nn.Module, env_seed: int, k: int, generator: torch.Generator, max_steps: int) -> Group:
    """k trajectories from the same initial condition, stepped in lockstep."""
    spec = task.spec
    envs = [task.make_env() for _ in range(k)]
    obs = [env.reset(seed=env_seed)[0] for env in envs]
    low, high = torch.as_tensor(spec.action_low), torch.as_tensor(spec.action_high)
    running = np.ones(k, dtype=bool)
    steps: list[dict] = []
    for _t in range(max_steps):
        parts = [task.split_observation(o) for o in obs]
        batch = {s.name: torch.as_tensor(np.stack([p[s.name] for p in parts]), dtype=torch.float32) for s in spec.inputs}
        with torch.no_grad():
            mean, tril = policy_outputs(policy, task, batch)
            dist = MultivariateNormal(mean, scale_tril=tril)
            noise = torch.randn(mean.shape + (1,), generator=generator)
            action = mean + (tril @ noise).squeeze(-1)  # seeded sample from the same Gaussian
            logp = dist.log_prob(action)
        executed = torch.maximum(torch.minimum(action, high), low).numpy()
        rewards = np.zeros(k, dtype=np.float32)
        alive_now = running.copy()
        for i, env in enumerate(envs):
            if not running[i]:
                continue
            o, r, terminated, truncated, _ = env.step(executed[i])
            obs[i], rewards[i] = o, float(r)
            if terminated or truncated:
                running[i] = False
        steps.append({"inputs": batch, "action": action, "logp": logp, "reward": rewards, "alive": alive_now})
        if not running.any():
            break
    for env in envs:
        env.close()
    return Group(
        inputs={s.name: torch.stack([st["inputs"][s.name] for st in steps], 1) for s in spec.inputs},
        actions=torch.stack([st["action"] for st in steps], 1),
        logp_old=torch.stack([st["logp"] for st in steps], 1),
        rewards=torch.as_tensor(np.stack([st["reward"] for st in steps], 1)),
        alive=torch.as_tensor(np.stack([st["alive"] for st in steps], 1), dtype=torch.float32),
    )


def group_log_probs(policy: torch.nn.Module, task: Task, group: Group) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (K, T) of the sampled actions and entropies (K, T) under `policy`."""
    k, t = group.alive.shape
    flat = {name: x.reshape(k * t, *x.shape[2:]) for name, x in group.inputs.items()}
    mean, tril = policy_outputs(policy, task, flat)
    dist = MultivariateNormal(mean, scale_tril=tril)
    logp = dist.log_prob(group.actions.reshape(k * t, -1)).reshape(k, t)
    return logp, dist.entropy().reshape(k, t)


# ---------------------------------------------------------------------------- training
def train_rl(task: Task, policy: torch.nn.Module, config: RLConfig, progress: bool = True) -> RLReport:
    """Fine-tune `policy` in place with the windowed clipped policy gradient."""
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=config.lr)
    max_steps = config.max_steps or task.spec.episode_steps
    total_updates = max(1, config.reset_budget // config.group_size)
    report = RLReport(resets=0, updates=0, wall_time_s=0.0, config=asdict(config))
    start = time.perf_counter()
    bar = tqdm(range(total_updates), desc=f"RL {task.spec.name}", unit="update", disable=not progress)
    for update in bar:
        # 1. a group of trajectories from one initial condition
        group = sample_group(task, policy, config.first_env_seed + update, config.group_size, generator, max_steps)
        report.resets += config.group_size
        # 2. reward-to-go and per-step normalised advantages over live trajectories
        adv = normalised_advantages(reward_to_go(group.rewards, group.alive, config.gamma), group.alive)
        beta = entropy_coef_at(update, total_updates, config.entropy_coef)
        # 3. clipped surrogate on the windowed ratio, a few epochs on the same group
        for _epoch in range(config.epochs):
            logp, entropy = group_log_probs(policy, task, group)
            log_ratio = windowed_log_ratio(logp, group.logp_old, group.alive, config.window)
            loss = clipped_surrogate(log_ratio, adv, group.alive, config.clip_eps)
            loss = loss - beta * (entropy * group.alive).sum() / group.alive.sum()
            if not torch.isfinite(loss):
                break  # a non-finite loss would poison the weights; skip this group
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimiser.step()
        returns = group.returns.numpy()
        report.updates += 1
        report.curve.append({
            "update": update, "resets": report.resets, "mean_return": float(returns.mean()),
            "std_return": float(returns.std()), "loss": float(loss.detach()), "entropy_coef": beta,
        })
        bar.set_postfix(ret=f"{returns.mean():.1f}")
    report.wall_time_s = time.perf_counter() - start
    return report
