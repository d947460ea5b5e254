"""Run many independent jobs: inline, in local processes (default) or as Ray tasks.

The jobs are plain functions of plain arguments, so the three ways give the same numbers;
only where they run changes. Results come back in submission order.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from tqdm import tqdm


def map_jobs(fn: Callable, jobs: Sequence[tuple], *, workers: int = 1, ray_address: str | None = None,
             desc: str = "jobs", progress: bool = True) -> list:
    if ray_address:
        return _map_ray(fn, jobs, ray_address, workers, desc, progress)
    if workers <= 1 or len(jobs) <= 1:
        return [fn(*job) for job in tqdm(jobs, desc=desc, disable=not progress)]
    results: list = [None] * len(jobs)
    # spawn: a forked torch/MuJoCo/Box2D state is not safe to reuse in a child
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
        futures = {pool.submit(fn, *job): i for i, job in enumerate(jobs)}
        for future in tqdm(as_completed(futures), total=len(futures), desc=desc, disable=not progress):
            results[futures[future]] = future.result()
    return results


def _map_ray(fn: Callable, jobs: Sequence[tuple], address: str, workers: int, desc: str, progress: bool) -> list:
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        if address == "local":
            ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1)(fn)
        refs = [remote.remote(*job) for job in jobs]
        pending = list(refs)
        with tqdm(total=len(refs), desc=f"{desc} (ray)", disable=not progress) as bar:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                bar.update(len(done))
        return ray.get(refs)
    finally:
        if started_here:
            ray.shutdown()
