"""Side-by-side env throughput, measured in one process so the ratios are meaningful.

Why: the semantic car env must be >= 10x the stock pixel env and the door wrapper must add
<= 10 % over raw Meta-World; numbers from different runs on a shared machine are not
comparable, so each pair is measured back to back with the same random actions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import gymnasium as gym
import numpy as np


def _rate(env: gym.Env, steps: int, seed: int, actions: np.ndarray, max_seconds: float) -> float:
    """Steps per second over up to `steps` random-action steps (resets included)."""
    env.reset(seed=seed)
    t0 = time.perf_counter()
    done_steps = 0
    for i in range(steps):
        _, _, term, trunc, _ = env.step(actions[i % len(actions)])
        done_steps += 1
        if term or trunc:
            env.reset(seed=seed + done_steps)
        if time.perf_counter() - t0 > max_seconds:
            break
    return done_steps / max(time.perf_counter() - t0, 1e-9)


def _raw_metaworld_door() -> gym.Env:
    """Meta-World's own door env set up the way its benchmarks do, without our wrapper."""
    import metaworld

    mt1 = metaworld.MT1("door-open-v3", seed=0)
    env = mt1.train_classes["door-open-v3"]()
    env.set_task(mt1.train_tasks[0])
    env.max_path_length = 10**9  # measure stepping, not Meta-World's truncation
    return env


class _RawAdapter(gym.Env):
    """Lets `_rate` drive the raw env (its reset ignores the seed argument)."""

    def __init__(self, env) -> None:
        self.env = env

    def reset(self, *, seed=None, options=None):
        return self.env.reset()

    def step(self, action):
        o, r, term, _, info = self.env.step(action)
        return o, r, term, False, info


def bench_envs(
    steps: int = 3000, max_seconds: float = 4.0, seed: int = 0, progress: bool = True
) -> dict[str, float]:
    """Random-action steps/s of our envs and their stock counterparts, plus the ratios."""
    import refine_core.tasks  # noqa: F401  (registers our ids)

    rng = np.random.default_rng(seed)
    car_actions = np.column_stack(
        [rng.uniform(-1, 1, 512), rng.uniform(0, 1, 512), rng.uniform(0, 0.2, 512)]
    ).astype(np.float32)
    door_actions = rng.uniform(-1, 1, (512, 4)).astype(np.float32)
    door_ours = door_actions.copy()
    door_ours[:, 3] = (door_actions[:, 3] + 1) / 2  # same efforts in our gripper convention

    jobs: list[tuple[str, Callable[[], gym.Env], np.ndarray, int]] = [
        (
            "car_env_steps_per_s",
            lambda: gym.make("refine/CarRacingSemantic-v0"),
            car_actions,
            steps,
        ),
        (
            "car_pixels_env_steps_per_s",
            lambda: gym.make("CarRacing-v3"),
            car_actions,
            max(steps // 10, 200),
        ),
        ("door_env_steps_per_s", lambda: gym.make("refine/DoorOpen-v0"), door_ours, steps),
        (
            "metaworld_raw_steps_per_s",
            lambda: _RawAdapter(_raw_metaworld_door()),
            door_actions,
            steps,
        ),
    ]
    # Interleave short blocks of each env and keep the median: on a shared machine a single
    # long block per env lets one burst of load land on one side of a ratio.
    blocks = 5
    rates: dict[str, list[float]] = {name: [] for name, *_ in jobs}
    envs = {name: make() for name, make, _, _ in jobs}
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=blocks * len(jobs), desc="bench envs", unit="block")
    try:
        for _ in range(blocks):
            for name, _make, actions, n in jobs:
                rates[name].append(_rate(envs[name], max(n // blocks, 50), seed, actions, max_seconds / blocks))
                if bar is not None:
                    bar.update(1)
    finally:
        for env in envs.values():
            env.close()
        if bar is not None:
            bar.close()
    out: dict[str, float] = {name: float(np.median(r)) for name, r in rates.items()}
    out["car_speedup_vs_pixels"] = out["car_env_steps_per_s"] / out["car_pixels_env_steps_per_s"]
    out["door_wrapper_overhead"] = (
        out["metaworld_raw_steps_per_s"] / out["door_env_steps_per_s"] - 1.0
    )
    return out


def bench_expert(task_name: str, seeds: Sequence[int] | None = None, progress: bool = True) -> dict:
    """Mean/std of the expert's return and metric and its success rate over `seeds`
    (default: the task's evaluation seeds), through the same Task API the loop uses."""
    from refine_core.tasks import get_task

    task = get_task(task_name)
    seeds = tuple(task.spec.eval_seeds if seeds is None else seeds)
    env = task.make_env()
    expert = task.expert(env)
    rows = []
    it = seeds
    if progress:
        from tqdm import tqdm

        it = tqdm(seeds, desc=f"{task_name} expert", unit="ep")
    for seed in it:
        obs, _ = env.reset(seed=int(seed))
        observations, rewards, infos = [obs], [], []
        done = False
        while not done:
            obs, r, term, trunc, info = env.step(expert(obs))
            observations.append(obs)
            rewards.append(r)
            infos.append(info)
            done = term or trunc
        rows.append(task.episode_summary(observations, rewards, infos))
    env.close()
    ret = np.array([r["return"] for r in rows])
    met = np.array([r["metric"] for r in rows])
    return {
        "task": task_name,
        "seeds": list(seeds),
        "return_mean": float(ret.mean()),
        "return_std": float(ret.std()),
        "metric_name": task.spec.metric.name,
        "metric_mean": float(met.mean()),
        "metric_std": float(met.std()),
        "success_rate": float(np.mean([r["success"] for r in rows])),
        "per_seed_metric": met.tolist(),
    }


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1:] == ["experts"]:
        from refine_core.tasks import task_names

        print(json.dumps([bench_expert(name) for name in task_names()], indent=2))
    else:
        print(json.dumps(bench_envs(), indent=2))
