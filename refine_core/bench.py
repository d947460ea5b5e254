"""`refine bench`: speed and memory figures, measured side by side in one run.

Each benchmark lives next to the code it measures; this module only calls them in order and
collects one JSON object. A benchmark that cannot run here records why instead of a number;
one that fails records `<section>_error`. Every benchmark is a callable `fn(quick) -> dict`:
`quick` runs it at the smallest size that still goes through all of its code (a few steps,
one repeat), so a test can check that every section works without timing anything; its
figures mean nothing. ROS benchmarks come from refine_ros through the `refine.benchmarks`
entry-point group (same signature), so refine_core never imports it.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from collections.abc import Callable
from importlib.metadata import entry_points

PLUGIN_GROUP = "refine.benchmarks"
"""Benchmarks other packages contribute (refine_ros: the ROS latency and throughput figures)."""
QUICK_STEPS = 40
"""Episode length of the quick mode's rollouts."""

Benchmark = Callable[[bool], dict]


def il_fit_seconds_door(quick: bool = False) -> dict:
    from refine_core.learn.il import ILConfig, fit_il
    from refine_core.policy.contract import build_policy
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    task = get_task("door_open")
    demo = record_demonstration(task, max_steps=QUICK_STEPS if quick else None)
    policy = build_policy(starter_program("door_open"), task.spec)
    start = time.perf_counter()
    fit_il(policy, demo.inputs, demo.actions, ILConfig(max_epochs=3) if quick else ILConfig())
    return {"il_fit_seconds_door": time.perf_counter() - start}


def analysis_seconds_per_round(quick: bool = False) -> dict:
    """The offline battery on a 1,000-step car table, through the sandbox."""
    from refine_core.analyst.offline import OfflineAnalyst
    from refine_core.loop import analyst_table
    from refine_core.policy.contract import build_policy, validate_policy
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.demo import record_demonstration
    from refine_core.rollout.runner import run_episode
    from refine_core.rollout.schema import RolloutSchema
    from refine_core.sandbox import run_diagnostics
    from refine_core.tasks.registry import get_task

    task = get_task("car_racing")
    source = starter_program("car_racing")
    policy = build_policy(source, task.spec)
    steps = QUICK_STEPS if quick else None
    demo = record_demonstration(task, max_steps=steps)
    table = run_episode(task, policy, task.spec.diagnostic_seeds[0], mode="mean", max_steps=steps).table
    shown = task.spec.for_analyst()
    schema = RolloutSchema.for_task(shown, validate_policy(policy, task.spec).keys).columns
    code = OfflineAnalyst().diagnose(task.spec, source, schema).code
    times = []
    for _ in range(1 if quick else 3):
        start = time.perf_counter()
        result = run_diagnostics(code, analyst_table(task.spec, table), analyst_table(task.spec, demo.table))
        times.append(time.perf_counter() - start)
    if result.status != "ok":
        raise RuntimeError(f"the battery ended {result.status}: {result.message}")
    return {"analysis_seconds_per_round": statistics.median(times), "analysis_table_rows": len(table),
            "analysis_status": result.status}


def rl_update_seconds(quick: bool = False) -> dict:
    """One update of 20 car trajectories x 1,000 steps with the starter program: sampling the
    group, three epochs and the instruments; the selection rollouts (3 mean-action episodes
    every few updates) are timed apart because their share depends on `select_every`."""
    import torch

    from refine_core.learn.rl import RLConfig, selection_score, train_rl
    from refine_core.policy.contract import build_policy
    from refine_core.policy.programs import starter_program
    from refine_core.tasks.registry import get_task

    torch.set_num_threads(1)  # as experiment jobs run it: one core per job
    task = get_task("car_racing")
    policy = build_policy(starter_program("car_racing"), task.spec)
    size = 2 if quick else 20
    config = RLConfig(group_size=size, reset_budget=size, select_every=0, checkpoint="final",
                      max_steps=QUICK_STEPS if quick else None, window=10 if quick else RLConfig.window)
    record = train_rl(task, policy, config, progress=False).curve[0]
    seeds = tuple(task.spec.selection_seeds)[:1] if quick else tuple(task.spec.selection_seeds)
    start = time.perf_counter()
    selection_score(task, policy, seeds, QUICK_STEPS if quick else None)
    return {"rl_update_seconds": record["seconds"], "rl_update_sampling_seconds": record["sample_seconds"],
            "rl_selection_seconds": time.perf_counter() - start}


def parallel_speedup_2_workers(quick: bool = False) -> dict:
    """Evaluation of 10 seeds, 2 worker processes vs 1, timed side by side. The worker pool's
    one-off start (a forkserver importing torch and the simulators) is timed separately, so
    the ratio says what parallel rollouts buy once running, as in the loop's later rounds."""
    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.contract import build_policy
    from refine_core.policy.programs import starter_program
    from refine_core.rollout.runner import run_episodes
    from refine_core.tasks.registry import get_task

    task = get_task("door_open")
    source = starter_program("door_open")
    bundle = PolicyBundle.from_module(source, build_policy(source, task.spec))
    seeds = list(task.spec.eval_seeds)[: 2 if quick else None]
    steps = QUICK_STEPS if quick else None
    start = time.perf_counter()
    run_episodes(task, bundle, seeds[:2], mode="mean", workers=2, progress=False, max_steps=steps)
    cold = time.perf_counter() - start
    timings = {}
    for workers in (1, 2):
        start = time.perf_counter()
        run_episodes(task, bundle, seeds, mode="mean", workers=workers, progress=False, max_steps=steps)
        timings[workers] = time.perf_counter() - start
    return {"parallel_speedup_2_workers": timings[1] / timings[2], "eval_10_seeds_1_worker_s": timings[1],
            "eval_10_seeds_2_workers_s": timings[2], "worker_pool_first_start_s": cold}


def _envs(quick: bool) -> dict:
    from refine_core.tasks.bench import bench_envs

    return bench_envs(steps=250, max_seconds=0.5, progress=False) if quick else bench_envs()


def _sqlite(quick: bool) -> dict:
    from refine_core.store.bench import bench_sqlite

    return bench_sqlite(rows=500) if quick else bench_sqlite()


def _sandbox(quick: bool) -> dict:
    from refine_core.sandbox.bench import bench_sandbox

    return bench_sandbox(1) if quick else bench_sandbox()


def _benchmarks() -> list[tuple[str, Benchmark]]:
    out: list[tuple[str, Benchmark]] = [
        ("envs", _envs), ("sqlite", _sqlite), ("il", il_fit_seconds_door),
        ("sandbox", _sandbox), ("analysis", analysis_seconds_per_round),
        ("rl", rl_update_seconds), ("parallel", parallel_speedup_2_workers),
    ]
    for entry in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            out.append((entry.name, entry.load()))
        except ImportError as exc:  # e.g. the ROS benchmarks where rclpy is missing
            out.append((entry.name, lambda quick, exc=exc, name=entry.name: {f"{name}_skipped": f"unavailable: {exc}"}))
    return out


def section_names() -> list[str]:
    """Every benchmark section `run_all` knows, in order (the ROS ones when installed)."""
    return [name for name, _ in _benchmarks()]


def run_all(only: set[str] | None = None, *, quick: bool = False) -> dict:
    results: dict = {}
    for name, fn in _benchmarks():
        if only and name not in only:
            continue
        print(f"[bench] {name} ...", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            results.update(fn(quick))
        except Exception as exc:  # a broken benchmark must not hide the others
            results[f"{name}_error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc(file=sys.stderr)
        print(f"[bench] {name} done in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return results
