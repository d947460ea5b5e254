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
     after every gradient step, the trust region: the exact per-step KL from the policy that
     sampled the group to the new one, over the group's states; past `target_kl` the step
     is halved until it fits (or undone) and the group's remaining epochs are skipped;
  4. measure what the update did (ratio quantiles, clip fraction, KL, entropy, the change of
     every parameter) and, every `select_every` updates, score the policy in the mode the
     robot runs (the task's `deployed_mode`) on the selection seeds; a checkpoint is
     accepted only when it beats the accepted one by more than the selection noise (a paired
     one-sided t-test over the selection seeds, `accepts`);
  5. count every environment reset; stop when the reset budget is spent.

Two named presets (`PRESETS`, `RLConfig.preset`): "ours", the dataclass defaults, the product's
RL, chosen by measurement (docs/RL.md): a smaller Adam step, the trust region and the accepted
checkpoint; and "published", METHOD.md's settings exactly (Adam 0.007, no trust region, the
final weights, exactly the reset budget and no selection resets), which the published-
comparison rows use. Everything beyond METHOD.md is named by `RLConfig.departures()`, so a
results table can say so. Selection evaluations never change the training itself (they run
on their own seeds and random streams), so one training run can report the final, the best
and the accepted weights.

It works for any contract-following program (structured or the MLP baseline) because it only
uses the program's (mean, scale_tril) and the task's Gymnasium env.
"""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Protocol

import numpy as np
import torch
from scipy.stats import t as student_t
from torch import nn
from torch.distributions import kl_divergence
from tqdm import tqdm

from refine_core.learn.adam import Adam
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
from refine_core.tasks.spec import ACTION_MODES

WINDOW_DIRECTIONS = ("forward", "backward")
CHECKPOINTS = ("accepted", "best", "final")

LOG_RATIO_CAP = 20.0
"""Windowed log-ratios are capped here before exp(): a 150-step product can exceed float32,
and beyond e^20 the clipped surrogate's choice no longer depends on the exact value."""
SMALL_PARAMETER = 16
"""Parameters with at most this many elements have their values recorded every update;
larger ones (the MLP's layers) only the size of their change."""


PUBLISHED = {"group_size": 20, "gamma": 0.98, "window": 150, "clip_eps": 0.2, "entropy_coef": 0.01,
             "lr": 0.007, "epochs": 3}
"""METHOD.md's values (window 150 is the car's; the door's is not published)."""
PUBLISHED_RULES = {"target_kl": None, "checkpoint": "final", "select_every": 0, "std_scale": 1.0,
                   "restore_on_regression": False}
"""What METHOD.md does not have at all: no trust region beyond the clipped surrogate, the final
weights, no selection evaluation, the IL noise."""


@dataclass
class RLConfig:
    """RL settings. The defaults are our preset ("ours"); `RLConfig.preset("published")` is
    METHOD.md's method exactly. `departures()` names every value that differs from METHOD.md."""

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
    lr: float = 3e-4
    """Adam learning rate (published: 0.007, which moves a fitted program by about one noise
    width in its first update and collapses the MLP; ours was chosen by measurement on both
    tasks and three kinds of program, docs/RL.md)."""
    epochs: int = 3
    """Gradient steps per group (full batch); the trust region may stop them early."""
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
    # -- the trust region (ours; none in METHOD.md beyond the clip) --------------------------
    target_kl: float | None = 0.005
    """Largest mean per-step KL(sampling policy || updated policy) over the group's live
    states an update may reach. After each gradient step the exact KL is measured; past the
    target the step is halved until it fits (`kl_backtracks` times at most, else undone) and
    the group's remaining epochs are skipped. None: no trust region (published)."""
    kl_backtracks: int = 10
    """Halvings of an overshooting step before it is undone."""
    # -- selection and acceptance -------------------------------------------------------------
    select_every: int = 5
    """Score the policy on the selection seeds before the first update, after every this many
    updates and after the last (each evaluation costs its episodes in resets, counted in
    `RLReport.selection_resets`). 0, the published rule: no selection at all."""
    selection_episodes: int = 10
    """Episodes of each of those evaluations, on the task's selection seeds continued upwards
    (100, 101, ...). Ten, not the loop's three: a checkpoint picked among twenty on three
    tracks was seen to win by luck and lose two tracks of ten on evaluation."""
    selection_seeds: tuple[int, ...] | None = None
    """Explicit seeds of those evaluations (overrides `selection_episodes`). Never the
    evaluation seeds: a checkpoint chosen on them would be reported on the data it was
    chosen with."""
    selection_mode: str | None = field(default=None, metadata={"choices": ACTION_MODES})
    """How selection runs the policy: "mean" or "sample" (seeded per selection seed). None:
    the task's deployed mode (`TaskSpec.deployed_mode`, the mean action on a robot), so RL
    is judged in the mode the robot runs."""
    checkpoint: str = field(default="accepted", metadata={"choices": CHECKPOINTS})
    """Weights left in the policy at the end: "accepted" (ours: the last checkpoint that beat
    the one accepted before it, starting from RL's starting weights, by the `accept_alpha`
    test), "final" (after the last update; the published rule) or "best" (highest
    selection score seen, with no margin). "accepted" and "best" need `select_every` > 0."""
    accept_alpha: float = 0.05
    """Significance of the acceptance test: a candidate replaces the accepted checkpoint only
    when a paired one-sided t-test over the selection seeds says it is better at this level,
    i.e. when its mean gain exceeds t(1 - accept_alpha, n - 1) standard errors of the per-seed
    differences (1.83 for ten seeds). Per comparison: docs/RL.md says why not over the run."""
    restore_on_regression: bool = True
    """With the accepted checkpoint: when a candidate is worse than the accepted weights (the
    same paired test the other way round, at level accept_alpha), training goes on from the
    accepted weights with a fresh optimiser instead of from the candidate, so a run that
    drifted into a collapse spends its remaining resets from a good policy."""
    # -- further departures, all off in both presets ------------------------------------------
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
        if self.checkpoint != "final" and self.select_every == 0:
            raise ValueError(f"checkpoint={self.checkpoint!r} needs selection evaluations (select_every > 0)")
        if self.selection_mode is not None and self.selection_mode not in ACTION_MODES:
            raise ValueError(f"selection_mode must be one of {ACTION_MODES} or None, got {self.selection_mode!r}")
        if self.target_kl is not None and not (self.target_kl > 0 and math.isfinite(self.target_kl)):
            raise ValueError(f"target_kl must be positive (or None: no trust region), got {self.target_kl}")
        if self.kl_backtracks < 0:
            raise ValueError(f"kl_backtracks must be >= 0, got {self.kl_backtracks}")
        if not 0 < self.accept_alpha < 1:
            raise ValueError(f"accept_alpha must be in (0, 1), got {self.accept_alpha}")
        if not (self.std_scale > 0 and math.isfinite(self.std_scale)):
            raise ValueError(f"std_scale must be positive, got {self.std_scale}")
        if any(v < 0 for v in self.param_lr.values()):
            raise ValueError(f"param_lr rates must be >= 0, got {self.param_lr}")
        if self.selection_seeds is not None:
            self.selection_seeds = tuple(int(s) for s in self.selection_seeds)

    @classmethod
    def preset(cls, name: str, task_settings: Mapping[str, object] | None = None, **overrides) -> RLConfig:
        """A named preset (`PRESETS`) with `overrides` on top. Under "ours" a task's own measured
        settings (`TaskSpec.rl_settings`) come between the two: how much a program may move per
        update and how widely it explores depend on the noise IL fitted to the task's
        demonstration (docs/RL.md). The published preset is the same for every task."""
        if name not in PRESETS:
            raise ValueError(f"RL preset must be one of {tuple(PRESETS)}, got {name!r}")
        own = dict(task_settings or {}) if name == "ours" else {}
        return cls(**{**PRESETS[name], **own, **overrides})

    @property
    def selection_count(self) -> int:
        return len(self.selection_seeds) if self.selection_seeds is not None else self.selection_episodes

    @property
    def total_updates(self) -> int:
        return self.reset_budget // self.group_size

    @property
    def candidate_evaluations(self) -> int:
        """Selection evaluations after the first update: each is a candidate checkpoint."""
        if not self.select_every:
            return 0
        every = self.total_updates // self.select_every
        return every + (self.total_updates % self.select_every != 0)

    @property
    def planned_selection_resets(self) -> int:
        """Resets the selection evaluations will cost (the starting weights and every
        candidate), on top of `reset_budget`: what a robot's operator must budget besides."""
        return (self.candidate_evaluations + 1) * self.selection_count if self.select_every else 0

    def departures(self) -> list[str]:
        """Short names of everything in use that METHOD.md does not have: changed published
        values and the options above."""
        out = [f"{name} {getattr(self, name):g} (published {value:g})" for name, value in PUBLISHED.items()
               if getattr(self, name) != value]
        if self.target_kl is not None:
            out.append(trust_region_departure(self))
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
        if self.checkpoint == "accepted":
            out.append(accepted_checkpoint_departure(self))
            if self.restore_on_regression:
                out.append(f"training restarts from the accepted weights when a candidate is worse (paired test, "
                           f"alpha {self.accept_alpha:g})")
        return out

    def preset_name(self, task_settings: Mapping[str, object] | None = None) -> str:
        """"published" or "ours" (with the task's own settings) when this config is one of them
        exactly (budget, seeds and episode cap aside), else "custom"."""
        free = {"reset_budget", "max_steps", "seed", "first_env_seed", "selection_seeds", "selection_episodes",
                "group_size"}
        mine = {k: v for k, v in asdict(self).items() if k not in free}
        for name in PRESETS:
            theirs = {k: v for k, v in asdict(RLConfig.preset(name, task_settings)).items() if k not in free}
            if mine == theirs:
                return name
        return "custom"


PRESETS: dict[str, dict] = {
    "ours": {},
    "published": {**PUBLISHED, **PUBLISHED_RULES},
}
"""Named RL settings. "ours": the dataclass defaults, the product's RL (docs/RL.md says why each
value). "published": METHOD.md's method exactly; the published-comparison rows use it."""


def mode_words(mode: str | None) -> str:
    return {"mean": "the mean action", "sample": "sampled actions", None: "the deployed mode"}[mode]


def trust_region_departure(config: RLConfig) -> str:
    return (f"trust region: per-step KL to the sampling policy at most {config.target_kl:g} per update "
            f"(a step past it halved up to {config.kl_backtracks} times, then the group's epochs stop)")


def best_checkpoint_departure(config: RLConfig) -> str:
    """How a table names the best-checkpoint rule and what it costs."""
    return (f"best checkpoint by {mode_words(config.selection_mode)} on {config.selection_count} selection seeds "
            f"every {config.select_every} updates (extra resets)")


def accepted_checkpoint_departure(config: RLConfig) -> str:
    """How a table names the acceptance rule and what it costs."""
    return (f"accepted checkpoint: a candidate every {config.select_every} updates replaces the accepted weights "
            f"(at first the starting ones) only if {mode_words(config.selection_mode)} on {config.selection_count} "
            f"selection seeds beats them (paired one-sided t-test, alpha {config.accept_alpha:g}) (extra resets)")


@dataclass
class RLReport:
    resets: int
    """Training resets spent (trajectories sampled)."""
    updates: int
    wall_time_s: float
    curve: list[dict] = field(default_factory=list)
    """One record per update (see `train_rl`), the same dicts `on_update` received."""
    selection: list[dict] = field(default_factory=list)
    """Every selection evaluation: {update, resets, metric, return, per_seed, and with the
    acceptance rule accepted, p_value}; update 0 is the weights RL started from."""
    selection_resets: int = 0
    selection_mode: str = "mean"
    """The mode the selection evaluations ran the policy in."""
    checkpoint: str = "final"
    """Which weights the policy holds at the end: "accepted", "best" or "final"."""
    checkpoint_update: int = 0
    """Updates applied to the weights the policy holds at the end (0: RL's starting point)."""
    best_update: int | None = None
    best_selection_metric: float | None = None
    accepted_update: int | None = None
    """The last accepted checkpoint (0: RL's starting weights, never beaten by the margin)."""
    accepted_selection_metric: float | None = None
    stopped: bool = False
    """The run was stopped (cancelled) before its budget was spent."""
    departures: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    def describe_checkpoint(self) -> str:
        """One line for a results table: which weights were evaluated, and why."""
        if self.checkpoint == "best" and self.best_update is not None:
            return (f"best on the selection seeds: update {self.checkpoint_update}/{self.updates} "
                    f"({self.best_selection_metric:.4g})")
        if self.checkpoint == "accepted" and self.accepted_update is not None:
            candidates = [s for s in self.selection if s["update"] > 0]
            taken = sum(bool(s.get("accepted")) for s in candidates)
            restarts = sum(bool(s.get("restored")) for s in candidates)
            again = f", {restarts} restart{'s' if restarts != 1 else ''} from it" if restarts else ""
            if self.accepted_update == 0:
                return f"accepted: the starting weights (none of {len(candidates)} candidates beat them{again})"
            return (f"accepted: update {self.accepted_update}/{self.updates} ({taken} of {len(candidates)} "
                    f"candidates accepted{again}; {self.accepted_selection_metric:.4g})")
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


def gaussian_kl(old_mean: torch.Tensor, old_tril: torch.Tensor, new_mean: torch.Tensor, new_tril: torch.Tensor,
                alive: torch.Tensor) -> torch.Tensor:
    """Mean exact KL(old || new) between the two Gaussians over the live states, (K, T, A)
    means and (K, T, A, A) factors: the trust region's measure (no sampling noise, unlike
    the approximate KL of the sampled actions)."""
    kl = kl_divergence(action_distribution(old_mean, old_tril), action_distribution(new_mean, new_tril))
    kl = torch.where(alive > 0, kl, torch.zeros_like(kl))
    return kl.sum() / alive.sum().clamp(min=1)


def accepts(candidate: list[float], accepted: list[float], higher_is_better: bool,
            alpha: float) -> tuple[bool, float]:
    """Does the candidate beat the accepted checkpoint by more than the selection noise?

    Per-seed differences d (candidate minus accepted, signed so that positive is better),
    then a paired one-sided t-test of mean(d) > 0: accepted when p < alpha. The seeds pair
    the two (same tracks, same random streams), so what varies between tracks cancels and
    what is left is how consistently the candidate is better. A non-finite score on either
    side refuses; identical scores refuse (p = 1); a constant positive difference accepts
    (p = 0). Returns (accepted, p)."""
    a = np.asarray(candidate, dtype=float)
    b = np.asarray(accepted, dtype=float)
    if a.shape != b.shape or a.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return False, 1.0
    d = (a - b) if higher_is_better else (b - a)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0.0 or sd < 1e-12 * max(1.0, abs(mean)):
        p = 0.0 if mean > 0 else 1.0
    else:
        p = float(student_t.sf(mean / (sd / math.sqrt(d.size)), d.size - 1))
    return p < alpha, p


# ---------------------------------------------------------------------------- sampling
@dataclass
class Group:
    inputs: dict[str, torch.Tensor]   # name -> (K, T, *shape)
    actions: torch.Tensor             # (K, T, A) raw samples (before clipping)
    logp_old: torch.Tensor            # (K, T)
    rewards: torch.Tensor             # (K, T)
    alive: torch.Tensor               # (K, T) 1 while the trajectory runs
    mean_old: torch.Tensor            # (K, T, A) the sampling policy's mean (for the exact KL)
    tril_old: torch.Tensor            # (K, T, A, A) and its (scaled) Cholesky factor

    @property
    def returns(self) -> torch.Tensor:
        return self.rewards.sum(1)


def draw(policy: nn.Module, spec, batch: dict[str, torch.Tensor], generator: torch.Generator,
         std_scale: float = 1.0, *, info: dict | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                       torch.Tensor]:
    """One sampling step of RL for a batch of states: (raw action, its log-probability, the
    mean, the scaled Cholesky factor); the program's info values land in `info` when given.
    Lockstep groups and episodes driven one at a time (a robot's,
    `refine_ros.loop.rl_episodes`) sample through this one function."""
    mean, tril, extra = policy_forward(policy, batch, spec)
    if info is not None:
        info.update(extra)
    tril = tril * std_scale
    action = sample_actions(mean, tril, generator)
    return action, action_distribution(mean, tril).log_prob(action), mean, tril


@dataclass
class Trajectory:
    """One episode sampled for RL outside the lockstep group (a robot's, a sim node's over
    DDS): per step its inputs, the raw sampled action, its log-probability, the sampling
    Gaussian and the reward."""

    inputs: dict[str, torch.Tensor]   # name -> (T, *shape)
    actions: torch.Tensor             # (T, A)
    logp: torch.Tensor                # (T,)
    mean: torch.Tensor                # (T, A)
    tril: torch.Tensor                # (T, A, A)
    rewards: torch.Tensor             # (T,)

    @property
    def steps(self) -> int:
        return int(self.actions.shape[0])


def group_from_trajectories(trajectories: list[Trajectory]) -> Group:
    """k trajectories of any lengths as one group, padded to the longest. A padded step repeats
    the trajectory's last state and action (as a finished environment of a lockstep group keeps
    its last observation), so the program never sees an input it did not see live; the alive
    mask keeps every padded step out of the advantages, the surrogate and the KL."""
    if len(trajectories) < 2 or any(t.steps < 1 for t in trajectories):
        raise ValueError("a group needs at least two trajectories of at least one step each")
    longest = max(t.steps for t in trajectories)

    def pad(x: torch.Tensor, fill_last: bool = True) -> torch.Tensor:
        missing = longest - x.shape[0]
        if missing == 0:
            return x
        tail = x[-1:].expand(missing, *x.shape[1:]) if fill_last else torch.zeros(missing, *x.shape[1:],
                                                                                  dtype=x.dtype)
        return torch.cat([x, tail], 0)

    names = trajectories[0].inputs.keys()
    alive = torch.stack([pad(torch.ones(t.steps), fill_last=False) for t in trajectories])
    return Group(
        inputs={n: torch.stack([pad(t.inputs[n]) for t in trajectories]) for n in names},
        actions=torch.stack([pad(t.actions) for t in trajectories]),
        logp_old=torch.stack([pad(t.logp) for t in trajectories]),
        rewards=torch.stack([pad(t.rewards.float(), fill_last=False) for t in trajectories]),
        alive=alive,
        mean_old=torch.stack([pad(t.mean) for t in trajectories]),
        tril_old=torch.stack([pad(t.tril) for t in trajectories]),
    )


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
        action, logp, mean, tril = draw(policy, spec, batch, generator, std_scale)
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
        steps.append({"inputs": batch, "action": action, "logp": logp, "reward": rewards, "alive": alive_now,
                      "mean": mean, "tril": tril})
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
        mean_old=torch.stack([st["mean"] for st in steps], 1),
        tril_old=torch.stack([st["tril"] for st in steps], 1),
    )


def group_forward(policy: nn.Module, task: Task, group: Group,
                  std_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The policy's means (K*T, A) and scaled factors (K*T, A, A) on the group's states,
    flattened in (k, t) order."""
    k, t = group.alive.shape
    flat = {name: x.reshape(k * t, *x.shape[2:]) for name, x in group.inputs.items()}
    mean, tril, _info = policy_forward(policy, flat, task.spec, grad=torch.is_grad_enabled())
    return mean, tril * std_scale


def group_log_probs(policy: nn.Module, task: Task, group: Group,
                    std_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities (K, T) of the sampled actions and entropies (K, T) under `policy`."""
    k, t = group.alive.shape
    mean, tril = group_forward(policy, task, group, std_scale)
    dist = action_distribution(mean, tril)
    logp = dist.log_prob(group.actions.reshape(k * t, -1)).reshape(k, t)
    return logp, dist.entropy().reshape(k, t)


def group_kl(policy: nn.Module, task: Task, group: Group, std_scale: float = 1.0) -> float:
    """Exact mean per-step KL(sampling policy || policy) over the group's live states; NaN
    (which the trust region treats as too far) when the policy's output is not finite."""
    k, t = group.alive.shape
    with torch.no_grad():
        mean, tril = group_forward(policy, task, group, std_scale)
        if not (torch.isfinite(mean).all() and torch.isfinite(tril).all()):
            return math.nan
        old_mean = group.mean_old.reshape(k * t, -1)
        old_tril = group.tril_old.reshape(k * t, *group.tril_old.shape[2:])
        return float(gaussian_kl(old_mean, old_tril, mean, tril, group.alive.reshape(k * t)))


def within_trust_region(policy: nn.Module, start: dict[str, torch.Tensor], measure: Callable[[], float],
                        target: float, backtracks: int) -> tuple[float, float]:
    """After a gradient step from the parameters `start`: if the KL `measure()` exceeds
    `target`, move the parameters back along the step, halving it until the KL fits, at most
    `backtracks` times, else all the way back to `start` (whose KL fitted, or the trust
    region would have stopped before this step). Returns (KL, fraction of the step kept)."""
    kl = measure()
    if kl <= target:  # NaN compares False: a non-finite policy is always moved back
        return kl, 1.0
    params = dict(policy.named_parameters())
    stepped = {n: p.detach().clone() for n, p in params.items()}
    fraction = 1.0
    for _ in range(backtracks):
        fraction /= 2
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(start[n] + fraction * (stepped[n] - start[n]))
        kl = measure()
        if kl <= target:
            return kl, fraction
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(start[n])
    return measure(), 0.0


# ---------------------------------------------------------------------------- instruments
def selection_score(task: Task, policy: nn.Module, seeds: tuple[int, ...], max_steps: int | None,
                    mode: str = "mean") -> dict:
    """Metric and return on the selection seeds in `mode` (sampled: each seed's own random
    stream, so two checkpoints meet the same draws), through the evaluation code path so the
    numbers are comparable with evaluation."""
    results = [run_episode(task, policy, s, mode=mode, rng_seed=s, label_expert=False, max_steps=max_steps)
               for s in seeds]
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


def _optimiser(policy: nn.Module, config: RLConfig) -> Adam:
    groups: dict[float, list[nn.Parameter]] = {}
    for name, p in policy.named_parameters():
        if not p.requires_grad:
            continue
        lr = next((v for frag, v in config.param_lr.items() if frag in name), config.lr)
        if lr > 0:
            groups.setdefault(lr, []).append(p)
    if not groups:
        raise ValueError("no trainable parameter left: every one is frozen by param_lr")
    return Adam([(ps, lr) for lr, ps in groups.items()], lr=config.lr)


# ---------------------------------------------------------------------------- training
Sampler = Callable[[nn.Module, int, int, torch.Generator, int, float], Group]
"""sampler(policy, env_seed, k, generator, max_steps, std_scale) -> a group of k trajectories
from one initial condition (`sample_group` is the local, lockstep one)."""
Scorer = Callable[[nn.Module, tuple[int, ...], str, int | None], dict]
"""scorer(policy, seeds, mode, max_steps) -> {metric, return, per_seed} on the selection seeds
(`selection_score` is the local one)."""


class Stop(Protocol):
    def is_set(self) -> bool: ...


def train_rl(task: Task, policy: nn.Module, config: RLConfig, progress: bool = True, *,
             on_update: Callable[[dict], None] | None = None,
             on_best: Callable[[dict], None] | None = None,
             sampler: Sampler | None = None, scorer: Scorer | None = None,
             stop: Stop | None = None) -> RLReport:
    """Fine-tune `policy` in place with the windowed clipped policy gradient.

    Where trajectories come from is a seam: by default `sample_group` steps k local
    environments in lockstep and `selection_score` runs the selection episodes locally; the
    ROS learner passes a `sampler` and a `scorer` that drive the episodes on a simulator node or
    a robot one at a time (`refine_ros.loop.rl_episodes`). `stop` (anything with `is_set()`)
    ends the run before the next update or selection; the policy then holds the weights
    `config.checkpoint` names among those seen so far, and `RLReport.stopped` says so.

    Each update's record (a flat dict of numbers plus `params`, the change of every parameter)
    goes to `on_update` as soon as it exists, so a caller can store it while training runs
    (e.g. `RunDatabase.log_rl_update`), and into `RLReport.curve`. `on_best` receives a copy
    of the weights (a state dict) whenever a selection evaluation finds a new best, so a
    caller keeping the final or accepted weights can keep the best ones too. At the end the
    policy holds the weights `config.checkpoint` names.
    """
    started = time.perf_counter()
    sampler = sampler or functools.partial(sample_group, task)
    scorer = scorer or (lambda module, seeds, mode, cap: selection_score(task, module, seeds, cap, mode))
    halted = stop or _Never()
    torch.manual_seed(config.seed)
    generator = torch.Generator().manual_seed(config.seed)
    optimiser = _optimiser(policy, config)
    max_steps = config.max_steps or task.spec.episode_steps
    total_updates = config.total_updates
    seeds = (config.selection_seeds if config.selection_seeds is not None
             else tuple(seeds_for(task.spec, "selection", config.selection_episodes)))
    if set(seeds) & set(task.spec.eval_seeds):
        raise ValueError(f"selection seeds {sorted(set(seeds) & set(task.spec.eval_seeds))} are evaluation seeds")
    mode = config.selection_mode or deployed_mode(task)
    named = replace(config, selection_mode=mode)  # the departures name the mode actually used
    metric = task.spec.metric
    alpha = config.accept_alpha
    report = RLReport(resets=0, updates=0, wall_time_s=0.0, checkpoint=config.checkpoint, selection_mode=mode,
                      departures=named.departures(), config=asdict(config))
    best_state: dict[str, torch.Tensor] | None = None
    accepted_state: dict[str, torch.Tensor] | None = None
    accepted_scores: list[float] = []
    restore = config.checkpoint == "accepted" and config.restore_on_regression

    def select(update: int) -> dict:
        nonlocal best_state, accepted_state, accepted_scores, optimiser
        score = scorer(policy, seeds, mode, config.max_steps)
        report.selection_resets += len(seeds)
        entry = {"update": update, "resets": report.resets, **score, "restored": False}
        if update == 0:
            ok, p_value = True, math.nan  # RL's starting weights: accepted by definition
        else:
            ok, p_value = accepts(score["per_seed"], accepted_scores, metric.higher_is_better, alpha)
        entry.update(accepted=ok, p_value=p_value)
        if ok:
            accepted_state, accepted_scores = copy.deepcopy(policy.state_dict()), list(score["per_seed"])
            report.accepted_update, report.accepted_selection_metric = update, score["metric"]
        report.selection.append(entry)
        if report.best_update is None or metric.better(score["metric"], report.best_selection_metric):
            report.best_update, report.best_selection_metric = update, score["metric"]
            best_state = copy.deepcopy(policy.state_dict())
            if on_best is not None:
                on_best(copy.deepcopy(best_state))
        if (not ok and restore and update < total_updates
                and accepts(accepted_scores, score["per_seed"], metric.higher_is_better, config.accept_alpha)[0]):
            policy.load_state_dict(accepted_state)  # the rest of the run starts again from the accepted weights
            optimiser = _optimiser(policy, config)
            entry["restored"] = True
        return entry

    if config.select_every:
        select(0)
    bar = tqdm(range(1, total_updates + 1), desc=f"RL {task.spec.name}", unit="update", disable=not progress)
    for update in bar:
        if halted.is_set():
            report.stopped = True
            break
        tick = time.perf_counter()
        # 1. a group of trajectories from one initial condition
        env_seed = config.first_env_seed + update - 1
        with torch.no_grad():
            group = sampler(policy, env_seed, config.group_size, generator, max_steps, config.std_scale)
        if halted.is_set():  # stopped while the group was being sampled: do not learn from a part of it
            report.stopped = True
            break
        report.resets += config.group_size
        sampled_s = time.perf_counter() - tick
        # 2. reward-to-go and per-step normalised advantages over live trajectories
        alive = group.alive
        adv = normalised_advantages(reward_to_go(group.rewards, alive, config.gamma), alive)
        starts = window_starts(alive, config.window, config.window_direction)
        beta = entropy_coef_at(update - 1, total_updates, config.entropy_coef)
        before = {n: p.detach().clone() for n, p in policy.named_parameters()}
        # 3. clipped surrogate on the windowed ratio, a few epochs on the same group, each step
        #    kept inside the trust region
        losses, surrogates, grad_norms, entropy0 = [], [], [], math.nan
        kept, kl_stop = 1.0, False
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
            step_start = {n: p.detach().clone() for n, p in policy.named_parameters()}
            optimiser.zero_grad()
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm or math.inf)
            optimiser.step()
            losses.append(float(loss.detach()))
            surrogates.append(float(surrogate.detach()))
            grad_norms.append(float(norm))
            if config.target_kl is not None:
                _kl, kept = within_trust_region(
                    policy, step_start, functools.partial(group_kl, policy, task, group, config.std_scale),
                    config.target_kl, config.kl_backtracks)
                if kept < 1.0:
                    kl_stop = True
                    break
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
            "kl": group_kl(policy, task, group, config.std_scale),
            "kl_stop": float(kl_stop), "step_kept": kept,
            "selection_metric": math.nan, "selection_return": math.nan,
            "params": parameter_changes(before, policy),
        }
        # 5. the deployed mode on the selection seeds, every few updates and after the last
        if config.select_every and (update % config.select_every == 0 or update == total_updates) \
                and not halted.is_set():
            entry = select(update)
            record["selection_metric"], record["selection_return"] = entry["metric"], entry["return"]
            record["selection_accepted"], record["selection_p"] = float(entry["accepted"]), entry["p_value"]
            record["selection_restored"] = float(entry["restored"])
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
    elif config.checkpoint == "accepted" and accepted_state is not None:
        policy.load_state_dict(accepted_state)
        report.checkpoint_update = int(report.accepted_update)
    else:
        report.checkpoint_update = report.updates
    report.wall_time_s = time.perf_counter() - started
    return report


class _Never:
    def is_set(self) -> bool:
        return False


def deployed_mode(task: Task) -> str:
    """The action mode a robot runs this task's policy in (`TaskSpec.deployed_mode`)."""
    return task.spec.deployed_mode


def config_from_dict(data: dict) -> RLConfig:
    """An RLConfig from a plain dict (job arguments, JSON), ignoring unknown keys so that
    records written by other versions still load."""
    names = {f.name for f in fields(RLConfig)}
    return RLConfig(**{k: v for k, v in data.items() if k in names})
