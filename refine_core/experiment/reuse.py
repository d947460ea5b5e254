"""Rows an earlier experiment already measured, taken instead of trained again.

Why: a 2,000-reset RL training of the car takes hours on a shared machine, and the published-
settings rows do not change when our own preset does. A row is reused only when nothing that
decides its numbers can differ: the earlier folder trained the same program source with the
same RL settings (every field that shapes the kept weights; only final-weight rows, whose
weights no selection evaluation touches), and the program's IL row, trained and evaluated
here again, reproduces the earlier IL row seed for seed in both action modes. The IL row
pins the demonstration, the IL fit, the evaluation seeds and the code that runs them; RL then
starts from identical weights. Every reused row is named in the table.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

SELECTION_ONLY = ("select_every", "selection_episodes", "selection_seeds", "selection_mode", "accept_alpha")
"""RL fields that never change the final weights (selection runs on its own seeds and streams)."""
COMPARED = ("metric", "mean_action_metric", "return", "mean_action_return")
"""Episode columns an IL row must reproduce exactly for its program's RL rows to be reused."""


@dataclass
class Earlier:
    """An earlier results folder: its episodes, RL records and programs."""

    folder: Path
    episodes: pd.DataFrame
    rl: dict[str, dict]
    """Condition -> its RL record (summary.json, without the curve)."""
    curves: dict[str, list[dict]]
    """Condition -> its per-update records (rl_updates.csv)."""
    sources: dict[str, str]
    """Program key -> its source (program_<key>.py; the MLP's is not stored)."""


def load(folder: Path) -> Earlier:
    folder = Path(folder)
    summary = json.loads((folder / "summary.json").read_text())
    episodes = pd.read_csv(folder / "episodes.csv")
    curves: dict[str, list[dict]] = {}
    updates = folder / "rl_updates.csv"
    if updates.exists():
        for name, frame in pd.read_csv(updates).groupby("condition"):
            records = frame.drop(columns=["condition"]).to_dict("records")
            for r in records:
                r["params"] = json.loads(r["params"]) if isinstance(r.get("params"), str) else {}
            curves[str(name)] = records
    sources = {p.stem.removeprefix("program_"): p.read_text() for p in folder.glob("program_*.py")}
    return Earlier(folder, episodes, summary.get("rl", {}), curves, sources)


def comparable(config: dict) -> dict:
    """The RL settings that shape a final-weights row, with the published preset filling what
    an older record did not have (no trust region before there was one)."""
    from refine_core.learn.rl import RLConfig

    known = {f.name for f in fields(RLConfig)}
    full = {**asdict(RLConfig.preset("published")), **{k: v for k, v in config.items() if k in known}}
    full = {k: (list(v) if isinstance(v, tuple) else v) for k, v in full.items()}
    if full.get("target_kl") is None:
        full.pop("kl_backtracks", None)  # no trust region: its halvings never happen
    return {k: v for k, v in full.items() if k not in SELECTION_ONLY}


def same_episodes(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    """Seed for seed, the same numbers (NaN equal to NaN) in every compared column."""
    cols = [c for c in COMPARED if c in a and c in b]
    if not cols or len(a) != len(b):
        return False
    a, b = a.sort_values("seed"), b.sort_values("seed")
    if not np.array_equal(a["seed"].to_numpy(dtype=float), b["seed"].to_numpy(dtype=float)):
        return False
    return all(np.allclose(a[c].to_numpy(dtype=float), b[c].to_numpy(dtype=float), rtol=0, atol=1e-9, equal_nan=True)
               for c in cols)


def find(earlier: Earlier, program_key: str, source: str, il_episodes: pd.DataFrame, config: dict) -> str | None:
    """The earlier condition to reuse for this program's RL training with `config`, or None."""
    if config.get("checkpoint") != "final":
        return None
    if program_key in earlier.sources and earlier.sources[program_key] != source:
        return None
    old_il = earlier.episodes[earlier.episodes["condition"] == f"{program_key}_il"]
    if not same_episodes(old_il, il_episodes):
        return None
    wanted = comparable(config)
    for name, record in earlier.rl.items():
        if not name.startswith(f"{program_key}_rl_") or record.get("checkpoint", "final") != "final":
            continue
        if comparable(record.get("config", {})) == wanted:
            return name
    return None


def reused_job(earlier: Earlier, name: str, il_report: dict) -> dict:
    """A training job's result rebuilt from the earlier folder (no weights: its evaluation
    episodes are reused too)."""
    rl = {**earlier.rl[name], "curve": earlier.curves.get(name, [])}
    return {"bundle": None, "il": il_report, "rl": rl, "reused_from": f"{earlier.folder}/{name}"}


def reused_episodes(earlier: Earlier, name: str) -> list[dict]:
    rows = earlier.episodes[earlier.episodes["condition"] == name]
    return [{k: v for k, v in r.items() if k not in ("condition", "label")} for r in rows.to_dict("records")]
