"""Episodes over seeds in a local process pool.

Workers start from a fresh interpreter (forkserver, else spawn) rather than a fork of the
caller, because the caller may hold torch threads, an open SQLite connection or an rclpy
context that do not survive `fork`. Each worker receives the task name and the policy as a
`PolicyBundle` once, rebuilds (and so re-validates) the program, and then runs episodes; the
per-episode noise depends only on (seed, rng_seed), so the results match a serial run.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from tqdm.auto import tqdm

from refine_core.policy.bundle import PolicyBundle

_WORKER: dict[str, Any] = {}


def _context() -> mp.context.BaseContext:
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        # Imported once in the server, so each worker forks with torch and the tasks loaded.
        ctx.set_forkserver_preload(["refine_core.rollout.parallel", "refine_core.rollout.runner"])
        return ctx
    return mp.get_context("spawn")


def _init_worker(task_name: str, source: str | None, weights: dict | None) -> None:
    import torch

    from refine_core.tasks.registry import get_task

    torch.set_num_threads(1)
    task = get_task(task_name)
    _WORKER["task"] = task
    _WORKER["policy"] = (
        None if source is None else PolicyBundle(source, weights or {}).build(task.spec)
    )


def _run_job(episode: int, seed: int, ids: Mapping[str, Any], options: Mapping[str, Any]):
    from refine_core.rollout.runner import run_episode

    return run_episode(
        _WORKER["task"], _WORKER["policy"], seed, ids={**ids, "episode": episode}, **options
    )


def run_parallel(
    task_name: str,
    bundle: PolicyBundle | None,
    jobs: Sequence[tuple[int, int]],
    ids: Mapping[str, Any],
    options: Mapping[str, Any],
    *,
    workers: int,
    progress: bool | None = None,
    desc: str = "rollouts",
) -> list:
    """Run `(episode, seed)` jobs on `workers` processes; results in job order."""
    if bundle is not None and not isinstance(bundle, PolicyBundle):
        raise TypeError(f"expected a PolicyBundle, got {type(bundle).__name__}")
    if bundle is not None:
        from refine_core.tasks.registry import get_task

        # Fail here with the contract's own error rather than as a broken pool.
        bundle.build(get_task(task_name).spec)
    init = (
        task_name,
        None if bundle is None else bundle.source,
        None if bundle is None else bundle.weights,
    )
    results: list = [None] * len(jobs)
    with ProcessPoolExecutor(
        max_workers=min(workers, len(jobs)), mp_context=_context(),
        initializer=_init_worker, initargs=init,
    ) as pool:
        futures = {
            pool.submit(_run_job, episode, seed, dict(ids), dict(options)): i
            for i, (episode, seed) in enumerate(jobs)
        }
        disable = None if progress is None else not progress
        with tqdm(total=len(jobs), desc=desc, unit="episode", disable=disable) as bar:
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                bar.update(1)
    return results
