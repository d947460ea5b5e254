"""What one real-time tick of a twin costs against its control period, for the robots' twin
figures of `refine bench` (each robot folder's `bench.py` drives its own twin through these)."""

from __future__ import annotations

import time

import numpy as np
from tqdm.auto import tqdm


def tick_costs(command, tick, ticks: int, period: float, progress: bool | None, desc: str) -> np.ndarray:
    """Seconds each call of tick(t) took, t running on a simulated clock at `period`;
    command(t), the driver's side, runs before each tick and is not timed."""
    costs = np.empty(ticks)
    for k in tqdm(range(ticks), desc=desc, unit="tick", disable=None if progress is None else not progress):
        t = round(k * period, 9)
        command(t)
        t0 = time.perf_counter()
        tick(t)
        costs[k] = time.perf_counter() - t0
    return costs


def cost_figures(costs: np.ndarray, period: float) -> dict:
    ms = costs * 1e3
    return {
        "period_ms": period * 1e3,
        "ticks": int(costs.size),
        "mean_ms": float(ms.mean()),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "max_ms": float(ms.max()),
        "mean_fraction_of_period": float(costs.mean() / period),
        "p99_fraction_of_period": float(np.percentile(costs, 99) / period),
    }
