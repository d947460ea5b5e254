"""Post-refinement RL: the finite-window GSPO variant of METHOD.md, with its instruments.

Read it top to bottom like a CleanRL script:
  1. sample a *group* of k trajectories from one initial condition (same env seed), all k
     environments stepped in lockstep so the policy sees one batch per time step;
  2. reward-to-go R_t = sum_{u>=t} gamma^(u-t) r_u, and advantages normalised per time step
     across the trajectories still alive at t (a group baseline, no critic);
  3. for a few epochs: the log-ratio of every step, summed over the window of the *next* L
     steps u = t ... t+L-1 (the windowed likelihood ratio, in log space), at the window
     starts where the whole window lies inside the trajectory; PPO-style clipped surrogate
     on that ratio, plus an entropy bonus that decays linearly to zero over the run;
  4. measure what the update did (ratio quantiles, clip fraction, approximate KL, entropy,
     the change of every parameter) and, if asked (`select_every`), the mean-action metric
     on selection seeds every few updates;
  5. count every environment reset; stop when the reset budget is spent.

The published rule keeps the final weights and spends exactly the reset budget: that is the
default. Keeping the best checkpoint by the selection-seed metric is an option beside it
(`checkpoint="best"`), a departure that costs the selection rollouts' resets, and so is
everything else beyond METHOD.md (gradient clipping, parameter groups, the backward window of
an earlier version); `RLReport.departures` names the ones a run used, so a results table can
say so. Selection evaluations never change the training itself (they run the mean action on
their own seeds), so one training run can report both the final and the best weights.

It works for any contract-following program (structured or the MLP baseline) because it only
uses the program's (mean, scale_tril) and the task's Gymnasium env.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from refine_core.policy.contract import policy_forward
from refine_core.policy.distribution import (
    action_distribution,
    clip_actions,
    sample_actions,
    to_batch,
)
from refine_core.rollout.plan import seeds_for
from refine_core.rollout.runner import run_episode
from refine_core.tasks.base import Task

WINDOW_DIRECTIONS = ("forward", "backward")
CHECKPOINTS = ("best", "final")
LOG_RATIO_CAP = 20.0
"""Windowed log-ratios are capped here before exp(): a 150-step product can exceed float32,
and beyond e^20 the clipped surrogate's choice no longer depends on the exact value."""
SMALL_PARAMETER = 16
"""Parameters with at most this many elements have their values recorded every update;
larger ones (the MLP's layers) only the size of their change."""


PUBLISHED = {"group_size": 20, "gamma": 0.98, "window": 150, "clip_eps": 0.2, "entropy_coef": 0.01,
             "lr": 0.007, "epochs": 3}
"""METHOD.md's values (window 150 is the car's; the door's is not published)."""


@dataclass
class RLConfig:
    # -- the published method (METHOD.md, "Post-refinement RL") -----------------------------
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
    """Training resets allowed; each sampled trajectory costs one. Selection rollouts are
    counted separately (`RLReport.selection_resets`)."""
    max_steps: int | None = None
    """Episode length cap (defaults to the task's episode length)."""
    seed: int = 0
    """Seeds action sampling."""
    first_env_seed: int = 5000
    """Initial conditions are env seeds first_env_seed + update index: disjoint from the
    demonstration, selection, diagnostic and evaluation seeds."""
    # -- instruments --------------------------------------------------------------------------
    select_every: int = 0
    """Evaluate the mean action on the selection seeds before the first update, after every
    this many updates and after the last (each evaluation costs `selection_episodes` resets,
    counted in `RLReport.selection_resets`). 0, the published rule: no selection at all."""
    selection_episodes: int = 10
    """Episodes of each of those evaluations, on the task's selection seeds continued upwards
    (100, 101, ...). Ten, not the loop's three: a checkpoint picked among twenty on three
    tracks was seen to win by luck and lose two tracks of ten on evaluation."""
    selection_seeds: tuple[int, ...] | None = None
    """Explicit seeds of those evaluations (overrides `selection_episodes`). Never the
    evaluation seeds: a checkpoint chosen on them would be reported on the data it was
    chosen with."""
    checkpoint: str = field(default="final", metadata={"choices": CHECKPOINTS})
    """Weights left in the policy at the end: "final" (after the last update; the published
    rule) or "best" (highest selection-seed mean-action metric seen, the initial weights
    included; a departure that needs `select_every` > 0)."""
    # -- departures from the published method, all off by default ----------------------------
    max_grad_norm: float | None = None
    """Clip the gradient norm before each Adam step (None: no clipping, as published)."""
    param_lr: dict[str, float] = field(default_factory=dict)
    """Parameter groups: {name fragment: learning rate}. A parameter whose name contains a
    fragment gets that rate instead of `lr` (first match wins; 0 freezes it)."""
    std_scale: float = 1.0
    """Multiply the program's Cholesky factor by this during RL (sampling, likelihood and
    entropy alike), so RL optimises a less noisy policy than the one IL fitted; the program's
    own parameters, log-std included, are what RL changes."""
    window_mean: bool = False
    """Length-normalise the windowed ratio as GSPO does for whole sequences: the geometric
    mean of the per-step ratios (their mean log) instead of their product."""
    window_direction: str = field(default="forward", metadata={"choices": WINDOW_DIRECTIONS})
    """"forward" is the published window u = t ... t+L-1 over full windows only. "backward"
    reproduces an earlier version of this file (u = t-L+1 ... t, partial windows at the
    start), kept to measure the difference."""

    def __post_init__(self) -> None:
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (advantages compare trajectories), got {self.group_size}")
        if self.window < 1 or self.epochs < 1 or self.reset_budget < self.group_size:
            raise ValueError("window and epochs must be >= 1 and reset_budget >= group_size")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.window_direction not in WINDOW_DIRECTIONS:
            raise ValueError(f"window_direction must be one of {WINDOW_DIRECTIONS}, got {self.window_direction!r}")
        if self.checkpoint not in CHECKPOINTS:
            raise ValueError(f"checkpoint must be one of {CHECKPOINTS}, got {self.checkpoint!r}")
        if self.select_every < 0:
            raise ValueError(f"select_every must be >= 0, got {self.select_every}")
        if self.checkpoint == "best" and self.select_every == 0:
            raise ValueError("checkpoint='best' needs selection evaluations (select_every > 0)")
        if not (self.std_scale > 0 and math.isfinite(self.std_scale)):
            raise ValueError(f"std_scale must be positive, got {self.std_scale}")
        if any(v < 0 for v in self.param_lr.values()):
            raise ValueError(f"param_lr rates must be >= 0, got {self.param_lr}")
        if self.selection_seeds is not None:
            self.selection_seeds = tuple(int(s) for s in self.selection_seeds)

    def departures(self) -> list[str]:
        """Short names of everything in use that METHOD.md does not have: changed published
        values and the options above."""
        out = [f"{name} {getattr(self, name):g} (published {value:g})" for name, value in PUBLISHED.items()
               if getattr(self, name) != value]
        if self.max_grad_norm is not None:
            out.append(f"gradient norm clipped at {self.max_grad_norm:g}")
        for fragment, lr in self.param_lr.items():
            out.append(f"learning rate {lr:g} for parameters named *{fragment}*")
        if self.window_direction != "forward":
            out.append(f"{self.window_direction} window")
        if self.std_scale != 1.0:
            out.append(f"action noise scaled x{self.std_scale:g} during RL")
        if self.window_mean:
            out.append("length-normalised (geometric-mean) window ratio")
        if self.checkpoint == "best":
            out.append(best_checkpoint_departure(self))
        return out


def best_checkpoint_departure(config: RLConfig) -> str:
    """How a table names the best-checkpoint rule and what it costs."""
    count = len(config.selection_seeds) if config.selection_seeds is not None else config.selection_episodes
    return (f"best checkpoint by the mean action on {count} selection seeds every {config.select_every} updates "
            "(extra resets)")


@dataclass
class RLReport:
    resets: int
    """Training resets spent (trajectories sampled)."""
    updates: int
    wall_time_s: float
    curve: list[dict] = field(default_factory=list)
    """One record per update (see `train_rl`), the same dicts `on_update` received."""
    selection: list[dict] = field(default_factory=list)
    """Every selection evaluation: {update, resets, metric, return, per_seed}; update 0 is
    the weights RL started from."""
    selection_resets: int = 0
    checkpoint: str = "final"
    """Which weights the policy holds at the end: "best" or "final"."""
    checkpoint_update: int = 0
    """Updates applied to the weights the policy holds at the end (0: RL's starting point)."""
    best_update: int | None = None
    best_selection_metric: float | None = None
    departures: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe_checkpoint(self) -> str:
        """One line for a results table: which weights were evaluated, and why."""
        if self.checkpoint == "best" and self.best_update is not None:
            return (f"best on the selection seeds: update {self.checkpoint_update}/{self.updates} "
                    f"({self.best_selection_metric:.4g})")
        return f"final: update {self.updates}/{self.updates}"


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


def window_starts(alive: torch.Tensor, window: int, direction: str = "forward") -> torch.Tensor:
    """(K, T) mask of the steps t that carry a windowed ratio.

    Forward (published): t is a start when the whole window t ... t+L-1 lies inside the
    trajectory, i.e. t + L <= its length. A trajectory shorter than L therefore has no window
    and adds nothing to the surrogate; it still counts in the advantage normalisation of the
    others and in the entropy bonus. Backward: every live step (partial windows included).
    """
    if direction == "backward":
        return alive.clone()
    length = alive.sum(1, keepdim=True)
    t = torch.arange(alive.shape[1], dtype=alive.dtype).unsqueeze(0)
    return ((t + window <= length) & (alive > 0)).to(alive.dtype)


def windowed_log_ratio(logp_new: torch.Tensor, logp_old: torch.Tensor, alive: torch.Tensor, window: int,
                       direction: str = "forward", mean: bool = False) -> torch.Tensor:
    """log prod_u pi_new(a_u|s_u) / pi_old(a_u|s_u) per (k, t), as a difference of cumulative
    sums so that a 150-step product never overflows. Forward: u = t ... t+L-1 (steps past the
    end contribute nothing; `window_starts` says where a full window exists). Backward:
    u = t-L+1 ... t. `mean=True` divides by the number of live steps in the window (the log
    of the geometric mean)."""
    step = (logp_new - logp_old) * alive
    k, steps = step.shape
    zero = torch.zeros(k, 1, dtype=step.dtype)
    csum = torch.cat([zero, torch.cumsum(step, dim=1)], dim=1)  # csum[:, j] = sum_{u<j}
    idx = torch.arange(steps)
    if direction == "forward":
        lo, hi = idx, (idx + window).clamp(max=steps)
    else:
        lo, hi = (idx + 1 - window).clamp(min=0), idx + 1
    total = csum[:, hi] - csum[:, lo]
    if not mean:
        return total
    count = torch.cat([zero, torch.cumsum(alive, dim=1)], dim=1)
    return total / (count[:, hi] - count[:, lo]).clamp(min=1)


def clipped_surrogate(log_ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, eps: float) -> torch.Tensor:
    """Negative PPO objective on the windowed ratio, averaged over the masked window starts."""
    ratio = torch.exp(log_ratio.clamp(max=LOG_RATIO_CAP))
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - eps, 1 + eps) * adv
    objective = torch.minimum(unclipped, clipped)
    return -(objective * mask).sum() / mask.sum().clamp(min=1)


def entropy_coef_at(update: int, total_updates: int, start: float) -> float:
    """Linear decay from `start` at update 0 to 0 at the last update."""
    if total_updates <= 1:
        return start
    return start * (1.0 - update / (total_updates - 1))


def ratio_statistics(log_ratio: torch.Tensor, step_log_ratio: torch.Tensor, starts: torch.Tensor,
                     alive: torch.Tensor, eps: float) -> dict[str, float]:
    """How far an update moved the policy on its own group: quantiles of the windowed ratio
    and the share outside [1-eps, 1+eps] over the window starts, and the per-step
    approximate KL(old || new) = E[(r - 1) - log r] over live steps (never negative)."""
    out: dict[str, float] = {}
    chosen = log_ratio[starts > 0]
    if chosen.numel():
        ratio = torch.exp(chosen.clamp(max=LOG_RATIO_CAP)).double()
        qs = torch.quantile(ratio, torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.float64))
        out.update({f"ratio_q{int(q * 100):02d}": float(v) for q, v in zip((0.05, 0.25, 0.5, 0.75, 0.95), qs, strict=True)})
        out["clip_frac"] = float(((ratio < 1 - eps) | (ratio > 1 + eps)).double().mean())
    else:
        out.update({k: math.nan for k in ("ratio_q05", "ratio_q25", "ratio_q50", "ratio_q75", "ratio_q95", "clip_frac")})
    live = step_log_ratio[alive > 0].double()
    out["approx_kl"] = float((torch.expm1(live) - live).mean()) if live.numel() else math.nan
    return out


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


def sample_group(task: Task, policy: nn.Module, env_seed: int, k: int, generator: torch.Generator,
                 max_steps: int, std_scale: float = 1.0) -> Group:
    """k trajectories from the same initial condition, stepped in lockstep. Actions are drawn
    and clipped exactly as rollouts do it (`sample_actions`, `clip_actions`); the likelihood
    is that of the unclipped draw."""
    spec = task.spec
    envs = [task.make_env() for _ in range(k)]
    obs = [env.reset(seed=env_seed)[0] for env in envs]
    running = np.ones(k, dtype=bool)
    steps: list[dict] = []
    for _t in range(max_steps):
        parts = [task.split_observation(o) for o in obs]
        batch = to_batch(spec, {s.name: np.stack([p[s.name] for p in parts]) for s in spec.inputs})
        mean, tril, _info = policy_forward(policy, batch, spec)
        tril = tril * std_scale
        action = sample_actions(mean, tril, generator)
        logp = action_distribution(mean, tril).log_prob(action)
        executed = clip_actions(action, spec).numpy()
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


def group_log_probs(policy: nn.Module, task: Task, group: Group,
                    std_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (K, T) of the sampled actions and entropies (K, T) under `policy`."""
    k, t = group.alive.shape
    flat = {name: x.reshape(k * t, *x.shape[2:]) for name, x in group.inputs.items()}
    mean, tril, _info = policy_forward(policy, flat, task.spec, grad=torch.is_grad_enabled())
    dist = action_distribution(mean, tril * std_scale)
    logp = dist.log_prob(group.actions.reshape(k * t, -1)).reshape(k, t)
    return logp, dist.entropy().reshape(k, t)


# ---------------------------------------------------------------------------- instruments
def selection_score(task: Task, policy: nn.Module, seeds: tuple[int, ...], max_steps: int | None) -> dict:
    """Mean-action metric and return on the selection seeds, through the evaluation code path
    so the numbers are comparable with evaluation."""
    results = [run_episode(task, policy, s, mode="mean", label_expert=False, max_steps=max_steps) for s in seeds]
    metrics = [float(r.summary.get("metric", math.nan)) for r in results]
    returns = [float(r.summary.get("return", math.nan)) for r in results]
    return {"metric": float(np.mean(metrics)), "return": float(np.mean(returns)), "per_seed": metrics}


def parameter_changes(before: dict[str, torch.Tensor], policy: nn.Module) -> dict[str, dict]:
    """Per named parameter: L2 norm and largest absolute element of this update's change, and
    the new value when the parameter is small enough to read."""
    out = {}
    for name, p in policy.named_parameters():
        delta = (p.detach() - before[name]).double()
        entry = {"delta_norm": float(delta.norm()), "delta_max": float(delta.abs().max()) if delta.numel() else 0.0}
        if p.numel() <= SMALL_PARAMETER:
            entry["value"] = p.detach().reshape(-1).double().tolist()
        out[name] = entry
    return out


def _optimiser(policy: nn.Module, config: RLConfig) -> torch.optim.Optimizer:
    groups: dict[float, list[nn.Parameter]] = {}
    for name, p in policy.named_parameters():
        if not p.requires_grad:
            continue
        lr = next((v for frag, v in config.param_lr.items() if frag in name), config.lr)
        if lr > 0:
            groups.setdefault(lr, []).append(p)
    if not groups:
        raise ValueError("no trainable parameter left: every one is frozen by param_lr")
    return torch.optim.Adam([{"params": ps, "lr": lr} for lr, ps in groups.items()], lr=config.lr)


# ---------------------------------------------------------------------------- training
def train_rl(task: Task, policy: nn.Module, config: RLConfig, progress: bool = True, *,
             on_update: Callable[[dict], None] | None = None,
             on_best: Callable[[dict], None] | None = None) -> RLReport:
    """Fine-tune `policy` in place with the windowed clipped policy gradient.

    Each update's record (a flat dict of numbers plus `params`, the change of every parameter)
    goes to `on_update` as soon as it exists, so a caller can store it while training runs
    (e.g. `RunDatabase.log_rl_update`), and into `RLReport.curve`. `on_best` receives a copy
    of the weights (a state dict) whenever a selection evaluation finds a new best, so a
    caller keeping the final weights can keep the best ones too. At the end the policy holds
    the weights `config.checkpoint` names.
    """
    started = time.perf_counter()
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = _optimiser(policy, config)
    max_steps = config.max_steps or task.spec.episode_steps
    total_updates = config.reset_budget // config.group_size
    seeds = (config.selection_seeds if config.selection_seeds is not None
             else tuple(seeds_for(task.spec, "selection", config.selection_episodes)))
    if set(seeds) & set(task.spec.eval_seeds):
        raise ValueError(f"selection seeds {sorted(set(seeds) & set(task.spec.eval_seeds))} are evaluation seeds")
    metric = task.spec.metric
    report = RLReport(resets=0, updates=0, wall_time_s=0.0, checkpoint=config.checkpoint,
                      departures=config.departures(), config=asdict(config))
    best_state: dict[str, torch.Tensor] | None = None

    def select(update: int) -> dict:
        nonlocal best_state
        score = selection_score(task, policy, seeds, config.max_steps)
        report.selection_resets += len(seeds)
        report.selection.append({"update": update, "resets": report.resets, **score})
        if report.best_update is None or metric.better(score["metric"], report.best_selection_metric):
            report.best_update, report.best_selection_metric = update, score["metric"]
            best_state = copy.deepcopy(policy.state_dict())
            if on_best is not None:
                on_best(copy.deepcopy(best_state))
        return score

    if config.select_every:
        select(0)
    bar = tqdm(range(1, total_updates + 1), desc=f"RL {task.spec.name}", unit="update", disable=not progress)
    for update in bar:
        tick = time.perf_counter()
        # 1. a group of trajectories from one initial condition
        env_seed = config.first_env_seed + update - 1
        with torch.no_grad():
            group = sample_group(task, policy, env_seed, config.group_size, generator, max_steps, config.std_scale)
        report.resets += config.group_size
        sampled_s = time.perf_counter() - tick
        # 2. reward-to-go and per-step normalised advantages over live trajectories
        alive = group.alive
        adv = normalised_advantages(reward_to_go(group.rewards, alive, config.gamma), alive)
        starts = window_starts(alive, config.window, config.window_direction)
        beta = entropy_coef_at(update - 1, total_updates, config.entropy_coef)
        before = {n: p.detach().clone() for n, p in policy.named_parameters()}
        # 3. clipped surrogate on the windowed ratio, a few epochs on the same group
        losses, surrogates, grad_norms, entropy0 = [], [], [], math.nan
        for epoch in range(config.epochs):
            logp, entropy = group_log_probs(policy, task, group, config.std_scale)
            log_ratio = windowed_log_ratio(logp, group.logp_old, alive, config.window, config.window_direction,
                                           config.window_mean)
            surrogate = clipped_surrogate(log_ratio, adv, starts, config.clip_eps)
            mean_entropy = (entropy * alive).sum() / alive.sum()
            loss = surrogate - beta * mean_entropy
            if epoch == 0:
                entropy0 = float(mean_entropy.detach())
            if not torch.isfinite(loss):
                break  # a non-finite loss would poison the weights; skip the rest of this group
            optimiser.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm or math.inf)
            optimiser.step()
            losses.append(float(loss.detach()))
            surrogates.append(float(surrogate.detach()))
            grad_norms.append(float(norm))
        # 4. what the update did, measured on its own group
        with torch.no_grad():
            logp, _ = group_log_probs(policy, task, group, config.std_scale)
            log_ratio = windowed_log_ratio(logp, group.logp_old, alive, config.window, config.window_direction,
                                           config.window_mean)
            moved = ratio_statistics(log_ratio, logp - group.logp_old, starts, alive, config.clip_eps)
        returns = group.returns.numpy()
        report.updates = update
        record = {
            "update": update, "resets": report.resets, "env_seed": env_seed,
            "return_mean": float(returns.mean()), "return_std": float(returns.std()),
            "return_min": float(returns.min()), "return_max": float(returns.max()),
            "steps_mean": float(alive.sum(1).mean()), "window_starts": int(starts.sum()),
            "entropy": entropy0, "entropy_coef": beta,
            "loss": losses[-1] if losses else math.nan, "surrogate": surrogates[-1] if surrogates else math.nan,
            "grad_norm": grad_norms[-1] if grad_norms else math.nan, "epochs_done": len(losses),
            **moved,
            "selection_metric": math.nan, "selection_return": math.nan,
            "params": parameter_changes(before, policy),
        }
        # 5. the mean action on the selection seeds, every few updates and after the last
        if config.select_every and (update % config.select_every == 0 or update == total_updates):
            score = select(update)
            record["selection_metric"], record["selection_return"] = score["metric"], score["return"]
        if update == 1 and report.selection:  # so the stored records alone draw the whole selection curve
            record["start_selection_metric"] = report.selection[0]["metric"]
        record["seconds"] = time.perf_counter() - tick
        record["sample_seconds"] = sampled_s
        report.curve.append(record)
        if on_update is not None:
            on_update(record)
        bar.set_postfix(ret=f"{returns.mean():.1f}")
    if config.checkpoint == "best" and best_state is not None:
        policy.load_state_dict(best_state)
        report.checkpoint_update = int(report.best_update)
    else:
        report.checkpoint_update = report.updates
    report.wall_time_s = time.perf_counter() - started
    return report


def config_from_dict(data: dict) -> RLConfig:
    """An RLConfig from a plain dict (job arguments, JSON), ignoring unknown keys so that
    records written by other versions still load."""
    names = {f.name for f in fields(RLConfig)}
    return RLConfig(**{k: v for k, v in data.items() if k in names})
