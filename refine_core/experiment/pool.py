"""Run many independent jobs: inline, in local processes (default) or as Ray tasks.

The jobs are plain functions of plain arguments, so the three ways give the same numbers;
only where they run changes. Results come back in submission order.

An experiment maps jobs several times (IL training, its evaluation, RL training, the rest of
the evaluation). A `JobPool` keeps its workers for all of them: a spawned worker pays for its
imports (torch, the simulators) once, and a local Ray instance is started once, not per map
(on a loaded two-core machine a Ray start and stop took 12 s; four per experiment).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from types import TracebackType

from tqdm import tqdm


class JobPool:
    """Where jobs run for as long as the `with` block lasts: inline (`workers` <= 1), a pool of
    spawned processes started at the first map that needs one, or Ray at `ray_address`
    ('local' starts an instance, shut down on exit; an instance already running is left as
    found)."""

    def __init__(self, *, workers: int = 1, ray_address: str | None = None) -> None:
        self.workers, self.ray_address = workers, ray_address
        self._processes: ProcessPoolExecutor | None = None
        self._ray_started_here = False

    def __enter__(self) -> JobPool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self._processes is not None:
            self._processes.shutdown(wait=True, cancel_futures=True)
            self._processes = None
        if self._ray_started_here:
            import ray

            ray.shutdown()
            self._ray_started_here = False

    def map(self, fn: Callable, jobs: Sequence[tuple], *, desc: str = "jobs", progress: bool = True) -> list:
        """`fn(*job)` for every job, results in submission order."""
        if self.ray_address:
            return self._map_ray(fn, jobs, desc, progress)
        if self.workers <= 1 or len(jobs) <= 1:
            return [fn(*job) for job in tqdm(jobs, desc=desc, disable=not progress)]
        if self._processes is None:  # spawn: a forked torch/MuJoCo/Box2D state is not safe to reuse in a child
            self._processes = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"))
        results: list = [None] * len(jobs)
        futures = {self._processes.submit(fn, *job): i for i, job in enumerate(jobs)}
        for future in tqdm(as_completed(futures), total=len(futures), desc=desc, disable=not progress):
            results[futures[future]] = future.result()
        return results

    def _map_ray(self, fn: Callable, jobs: Sequence[tuple], desc: str, progress: bool) -> list:
        import ray

        if not ray.is_initialized():
            if self.ray_address == "local":
                ray.init(num_cpus=max(1, self.workers), include_dashboard=False, log_to_driver=False)
            else:
                ray.init(address=self.ray_address, log_to_driver=False)
            self._ray_started_here = True
        remote = ray.remote(num_cpus=1)(fn)
        refs = [remote.remote(*job) for job in jobs]
        pending = list(refs)
        with tqdm(total=len(refs), desc=f"{desc} (ray)", disable=not progress) as bar:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                bar.update(len(done))
        return ray.get(refs)

