"""How fast step rows reach the run database (issue target: >= 20,000 rows/s at 60 columns)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from refine_core.rollout.schema import LATENT_PREFIX
from refine_core.store.db import RunDatabase


def step_frame(rows: int, columns: int = 60, *, seed: int = 0) -> pd.DataFrame:
    """A rollout-shaped frame: the 6 id columns plus float columns up to `columns` in total."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "run_id": np.ones(rows, dtype=np.int64),
        "round": np.zeros(rows, dtype=np.int64),
        "kind": "eval",
        "episode": np.arange(rows, dtype=np.int64) // 500,
        "seed": 1000 + np.arange(rows, dtype=np.int64) // 500,
        "step": np.arange(rows, dtype=np.int64) % 500,
    })
    values = rng.standard_normal((rows, columns - frame.shape[1]))
    extra = pd.DataFrame(values, columns=[f"{LATENT_PREFIX}c{i}" for i in range(values.shape[1])])
    return pd.concat([frame, extra], axis=1)


def bench_sqlite(rows: int = 20000, columns: int = 60) -> dict[str, float]:
    """Insert `rows` step rows into a fresh on-disk database (WAL, one transaction) and time it;
    the columns already exist, as they do for every episode after a round's first."""
    frame = step_frame(rows, columns)
    with tempfile.TemporaryDirectory(prefix="refine_bench_") as tmp:
        with RunDatabase(Path(tmp) / "run.db") as db:
            db.insert_steps(frame.iloc[:1])  # creates the columns
            start = time.perf_counter()
            db.insert_steps(frame)
            elapsed = time.perf_counter() - start
            stored = db.conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    if stored != rows + 1:
        raise RuntimeError(f"bench wrote {stored} rows, expected {rows + 1}")
    return {"sqlite_step_rows_per_s": rows / elapsed}
