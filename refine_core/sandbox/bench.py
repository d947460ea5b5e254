"""The `sandbox_overhead_s` benchmark: what one trivial analysis costs end to end.

Measured through `run_diagnostics`, i.e. with the same pandas/numpy/scipy prologue and table
loading a real diagnostic pays, so the figure is the per-call floor of the inner loop.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pandas as pd

from refine_core.sandbox.diagnostics import run_diagnostics
from refine_core.sandbox.limits import Limits


def bench_sandbox(n: int = 5, *, allow_weak_isolation: bool = False) -> dict:
    """Median and spread of the wall time of `print(1)` through the diagnostics sandbox."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    table = pd.DataFrame({"step": np.arange(10), "reward": np.linspace(0.0, 1.0, 10)})
    times: list[float] = []
    statuses: list[str] = []
    isolation = "none"
    for _ in range(n):
        start = time.perf_counter()
        result = run_diagnostics("print(1)", table, limits=Limits(wall_s=60),
                                 allow_weak_isolation=allow_weak_isolation)
        times.append(time.perf_counter() - start)
        statuses.append(result.status)
        isolation = result.isolation
    return {
        "sandbox_overhead_s": round(statistics.median(times), 4),
        "sandbox_overhead_min_s": round(min(times), 4),
        "sandbox_overhead_max_s": round(max(times), 4),
        "sandbox_runs": n,
        "sandbox_all_ok": all(s == "ok" for s in statuses),
        "sandbox_isolation": isolation,
    }
