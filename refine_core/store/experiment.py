"""The experiment database: every job of one `refine experiment`, in one SQLite file.

Why a second file beside the run database: an experiment is many trainings and evaluations of
a few programs, not a refinement run; its tables are flat (one row per condition, episode, RL
update, refinement round) and are rewritten whole on each run, so they live in their own file
(`results/<task>/<date>/experiment.db`) that anyone can open with sqlite-utils or Datasette.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import sqlite_utils

TABLES = ("experiment", "conditions", "episodes", "rl_updates", "refinement_rounds")


def write_experiment(path: Path, options: Mapping[str, Any], refined_run: str, conditions: Iterable[Mapping],
                     episodes: pd.DataFrame, rl_updates: pd.DataFrame, rounds: Iterable[Mapping]) -> None:
    """Replace `path` with a database holding one experiment's results."""
    path = Path(path)
    if path.exists():
        path.unlink()
    db = sqlite_utils.Database(path)
    try:
        db["experiment"].insert({"options": json.dumps(dict(options), default=str), "refined_run": refined_run})
        db["conditions"].insert_all([dict(c) for c in conditions])
        db["episodes"].insert_all(episodes.to_dict("records"))
        if len(rl_updates):
            db["rl_updates"].insert_all(rl_updates.to_dict("records"))
        db["refinement_rounds"].insert_all([dict(r) for r in rounds])
    finally:
        db.close()


def read_table(path: Path, table: str) -> pd.DataFrame:
    """One table of an experiment database as a frame (empty if the table is absent)."""
    if table not in TABLES:
        raise ValueError(f"an experiment database has no table {table!r}; tables: {', '.join(TABLES)}")
    db = sqlite_utils.Database(Path(path))
    try:
        return pd.DataFrame(list(db[table].rows)) if db[table].exists() else pd.DataFrame()
    finally:
        db.close()
