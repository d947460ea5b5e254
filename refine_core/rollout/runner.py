"""Running a policy (or the expert) in a task's simulator and logging every step.

One code path serves demonstrations (policy=None: the expert drives), diagnostic, selection and
evaluation rollouts, so the tables they produce are comparable column for column. A program
is untrusted: if it raises or emits non-finite actions mid-episode the episode ends there and
the result carries the error and the steps so far, because the loop must carry on and the
analyst should see what went wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import policy_forward
from refine_core.policy.distribution import clip_actions, sample_actions, to_batch
from refine_core.rollout.metrics import episode_summary
from refine_core.rollout.table import TableBuilder
from refine_core.tasks.base import Task

MODES = ("sample", "mean")


@dataclass
class EpisodeResult:
    """One episode: its step table, its summary (`return`, `metric`, `success`, `steps`,
    `seed`, `complete`, ...) and, when the policy failed mid-episode, `error`."""

    table: pd.DataFrame
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def complete(self) -> bool:
        return self.error is None


def episode_generator(seed: int, rng_seed: int | None = None) -> torch.Generator:
    """The action-noise generator of one episode; a pure function of (seed, rng_seed) so that
    serial and parallel runs draw the same noise. `rng_seed` None: the episode's own seed, so
    episode i draws from a stream seeded by i alone (the protocol the published door results
    were verified with: environment seed i, sampling seed i)."""
    rng_seed = seed if rng_seed is None else rng_seed
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFF, int(rng_seed) & 0xFFFFFFFF])
    return torch.Generator().manual_seed(int(state.generate_state(1, dtype=np.uint64)[0] >> 1))


class PolicyStepError(RuntimeError):
    """The program failed while acting; the message says at which step and how."""


def _policy_step(
    policy: nn.Module, task: Task, obs: Any, generator: torch.Generator, mode: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
    spec = task.spec
    batch = to_batch(spec, task.split_observation(obs), batched=False)
    with torch.no_grad():
        out = policy_forward(policy, batch, spec)
        if not isinstance(out, tuple | list) or len(out) != 3:
            raise PolicyStepError("forward did not return (action_mean, scale_tril, info)")
        mean, tril, info = out
        a = len(spec.actions)
        if tuple(mean.shape) != (1, a) or tuple(tril.shape) != (1, a, a):
            raise PolicyStepError(
                f"forward returned action_mean {tuple(mean.shape)} and scale_tril "
                f"{tuple(tril.shape)} for a batch of 1; want (1, {a}) and (1, {a}, {a})"
            )
        if not (torch.isfinite(mean).all() and torch.isfinite(tril).all()):
            raise PolicyStepError(
                f"non-finite action_mean {mean.reshape(-1).tolist()} or scale_tril"
            )
        raw = mean if mode == "mean" else sample_actions(mean, tril, generator)
        act = clip_actions(raw, spec)
        std = torch.linalg.vector_norm(tril[0], dim=-1)
    values: dict[str, float] = {}
    if not isinstance(info, Mapping):
        raise PolicyStepError(f"info is a {type(info).__name__}, not a dict")
    for key, value in info.items():
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise PolicyStepError(f"info[{key!r}] is not a single value at batch size 1")
        values[str(key)] = float(value.detach().reshape(-1)[0])
    return (
        mean[0].double().numpy(), std.double().numpy(), act[0].double().numpy(), values
    )


def run_episode(
    task: Task,
    policy: nn.Module | None,
    seed: int,
    *,
    mode: str = "sample",
    rng_seed: int | None = None,
    label_expert: bool = False,
    ids: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
) -> EpisodeResult:
    """Run one episode on configuration `seed`. `policy=None` lets the expert drive (a
    demonstration). `mode="mean"` executes the Gaussian's mean, `"sample"` a seeded draw."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    spec = task.spec
    limit = spec.episode_steps if max_steps is None else int(max_steps)
    if limit < 1:
        raise ValueError(f"max_steps must be >= 1, got {limit}")
    builder = TableBuilder(spec, {**(ids or {}), "seed": int(seed)})
    generator = episode_generator(seed, rng_seed)
    env = task.make_env()
    observations: list[Any] = []
    rewards: list[float] = []
    infos: list[dict] = []
    error: str | None = None
    if policy is not None:
        was_training = policy.training
        policy.eval()
    try:
        obs, _ = env.reset(seed=int(seed))
        expert = task.expert(env) if (label_expert or policy is None) else None
        observations.append(obs)
        builder.observe(task.observation_row(obs))
        for t in range(limit):
            label = None
            if expert is not None:
                label = clip_actions(np.asarray(expert(obs), dtype=np.float64), spec)
            if policy is None:
                mean, std, act, info = label, np.zeros(len(spec.actions)), label, {}
            else:
                try:
                    mean, std, act, info = _policy_step(policy, task, obs, generator, mode)
                    builder.check_info_keys(info)
                except Exception as exc:  # an untrusted program failing is a result
                    error = f"step {t}: {type(exc).__name__}: {exc}"
                    break
            obs, reward, terminated, truncated, step_info = env.step(act.astype(np.float32))
            done = bool(terminated or truncated or t == limit - 1)
            builder.step(
                info=info, mean=mean, std=std, act=act,
                expert=label if label_expert else None, reward=float(reward), done=done,
            )
            builder.observe(task.observation_row(obs))
            observations.append(obs)
            rewards.append(float(reward))
            infos.append(step_info)
            if done:
                break
    finally:
        env.close()
        if policy is not None:
            policy.train(was_training)
    table = builder.build()
    summary = episode_summary(task, observations, rewards, infos)
    summary.update(seed=int(seed), steps=len(rewards), complete=error is None, error=error)
    return EpisodeResult(table=table, summary=summary, error=error)


def run_episodes(
    task: Task,
    policy: nn.Module | PolicyBundle | None,
    seeds: Sequence[int],
    *,
    workers: int = 1,
    mode: str = "sample",
    rng_seed: int | None = None,
    label_expert: bool = False,
    ids: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
    episode_start: int = 0,
    progress: bool | None = None,
    desc: str = "rollouts",
) -> list[EpisodeResult]:
    """One episode per seed, results in seed order; episode ids count from `episode_start`.

    With `workers > 1` episodes run in a local process pool, which needs the policy as a
    `PolicyBundle` (source + arrays; modules are never pickled). Results do not depend on
    `workers`. `progress=None` shows a bar on a terminal only.
    """
    seeds = [int(s) for s in seeds]
    base_ids = dict(ids or {})
    options = dict(mode=mode, rng_seed=rng_seed, label_expert=label_expert, max_steps=max_steps)
    jobs = [(i + episode_start, s) for i, s in enumerate(seeds)]
    if workers > 1 and len(seeds) > 1:
        if isinstance(policy, nn.Module):
            raise ValueError(
                "workers > 1 needs a PolicyBundle (program source + weights), not a module"
            )
        from refine_core.rollout.parallel import run_parallel

        return run_parallel(
            task.spec.name, policy, jobs, base_ids, options, workers=workers,
            progress=progress, desc=desc,
        )
    module = policy.build(task.spec) if isinstance(policy, PolicyBundle) else policy
    results = []
    for episode, seed in tqdm(jobs, desc=desc, unit="episode", disable=_disabled(progress)):
        results.append(
            run_episode(task, module, seed, ids={**base_ids, "episode": episode}, **options)
        )
    return results


def _disabled(progress: bool | None) -> bool | None:
    return None if progress is None else not progress


def concat_tables(results: Sequence[EpisodeResult]) -> pd.DataFrame:
    """The tables of several episodes as one frame (index reset)."""
    tables = [r.table for r in results if len(r.table)]
    if not tables:
        return results[0].table if results else pd.DataFrame()
    return pd.concat(tables, ignore_index=True)
