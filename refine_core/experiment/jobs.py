"""The two kinds of job an experiment runs. Plain functions of plain arguments (source text,
npz bytes, dicts), so the same call runs in a local process or as a Ray task."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np


def _demo_arrays(demo_npz: bytes, spec) -> tuple[dict[str, np.ndarray], np.ndarray]:
    with np.load(io.BytesIO(demo_npz), allow_pickle=False) as data:
        inputs = {s.name: data[f"input_{s.name}"] for s in spec.inputs}
        return inputs, data["actions"]


def pack_demo(inputs: dict[str, np.ndarray], actions: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, actions=actions, **{f"input_{k}": v for k, v in inputs.items()})
    return buf.getvalue()


def train_job(task_name: str, source: str, demo_npz: bytes, il: dict, rl: dict | None) -> dict:
    """IL on the demonstration, then (optionally) RL from the IL weights. The RL weights are
    the final ones (the published rule); when the RL settings ask for selection evaluations,
    the best weights on the selection seeds come back too (`best_bundle`, `rl_best`)."""
    import torch

    from refine_core.learn.il import ILConfig, fit_il
    from refine_core.learn.rl import RLConfig, best_checkpoint_departure, train_rl
    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.contract import build_policy
    from refine_core.tasks.registry import get_task

    torch.set_num_threads(1)
    task = get_task(task_name)
    inputs, actions = _demo_arrays(demo_npz, task.spec)
    policy = build_policy(source, task.spec)  # static check + contract validation first
    il_report = fit_il(policy, inputs, actions, ILConfig(**{**il, "progress": False}), spec=task.spec)
    best: dict = {}
    config = RLConfig(**rl) if rl else None
    rl_report = train_rl(task, policy, config, progress=False, on_best=lambda state: best.update(state=state)) \
        if config else None
    out = {
        "bundle": PolicyBundle.from_module(source, policy).to_npz_bytes(),
        "il": il_report.to_dict(),
        "rl": rl_report.to_dict() if rl_report else None,
    }
    if rl_report is not None and "state" in best:
        kept = build_policy(source, task.spec)
        kept.load_state_dict(best["state"])
        out["best_bundle"] = PolicyBundle.from_module(source, kept).to_npz_bytes()
        out["rl_best"] = {**out["rl"], "checkpoint": "best", "checkpoint_update": int(rl_report.best_update),
                          "departures": [*rl_report.departures,
                                         best_checkpoint_departure(replace(config, selection_mode=rl_report.selection_mode))]}
    return out


def eval_job(task_name: str, bundle_npz: bytes, seed: int, max_steps: int | None) -> dict:
    """One unseen seed, executed as the contract says (a seeded sample from the Gaussian,
    clipped), and once more with the mean action for reference: RL tunes the stochastic
    policy, so its mean action alone can behave quite differently."""
    import torch

    from refine_core.policy.bundle import PolicyBundle
    from refine_core.rollout.runner import run_episode
    from refine_core.tasks.registry import get_task

    torch.set_num_threads(1)
    task = get_task(task_name)
    policy = PolicyBundle.from_npz_bytes(bundle_npz).build(task.spec)
    sampled = run_episode(task, policy, seed, mode="sample", rng_seed=seed, label_expert=False, max_steps=max_steps)
    mean = run_episode(task, policy, seed, mode="mean", label_expert=False, max_steps=max_steps)
    row = {"seed": seed, "error": sampled.error or mean.error}
    row.update({k: float(v) for k, v in sampled.summary.items() if isinstance(v, (int, float))})
    row.update({f"mean_action_{k}": float(v) for k, v in mean.summary.items() if isinstance(v, (int, float))})
    return row
