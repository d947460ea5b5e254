"""How episodes become numbers: the one per-episode summary and the one group summary.

Why here: the local loop, the ROS learner, `refine eval` and the experiment all report the
same figures (mean ± std of the task metric and the return, success rate); when each computed
them itself they drifted (population vs sample std, NaN handling).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from refine_core.tasks.base import Task


def episode_summary(task: Task, observations: Sequence[Any], rewards: Sequence[float],
                    infos: Sequence[dict]) -> dict[str, Any]:
    """The task's own summary (return, metric, success, ...); an episode the task cannot
    summarise (e.g. cut at step 0) still gets a return and a NaN metric, with the reason."""
    try:
        return dict(task.episode_summary(observations, rewards, infos))
    except Exception as exc:  # noqa: BLE001 - a broken episode is a result, not a crash
        return {"return": float(np.sum(rewards)) if len(rewards) else 0.0, "metric": math.nan,
                "success": 0.0, "summary_error": f"{type(exc).__name__}: {exc}"}


def _stat(fn, values: np.ndarray) -> float:
    return float(fn(values)) if values.size and np.isfinite(values).any() else math.nan


def summarise(summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Mean and population std of the metric and the return over episodes (NaN ignored), the
    success rate, the seeds and how many episodes failed."""
    rows = list(summaries)
    metric = np.array([r.get("metric", math.nan) for r in rows], dtype=float)
    ret = np.array([r.get("return", math.nan) for r in rows], dtype=float)
    success = np.array([r.get("success", 0.0) or 0.0 for r in rows], dtype=float)
    return {
        "episodes": len(rows),
        "seeds": [r.get("seed") for r in rows],
        "metric_mean": _stat(np.nanmean, metric), "metric_std": _stat(np.nanstd, metric),
        "return_mean": _stat(np.nanmean, ret), "return_std": _stat(np.nanstd, ret),
        "success_rate": float(success.mean()) if len(rows) else math.nan,
        "errors": sum(1 for r in rows if r.get("error")),
    }
