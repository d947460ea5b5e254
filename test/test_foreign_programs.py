"""Programs written elsewhere to the contract load, fit and run here, unedited."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from refine_core.backends import LocalFitter
from refine_core.experiment.foreign import foreign_programs, foreign_table
from refine_core.rollout.demo import record_demonstration
from refine_core.rollout.runner import run_episode
from refine_core.tasks.registry import get_task

FOLDER = Path(__file__).parent / "fixtures" / "foreign_programs"
PROGRAMS = sorted(p for p in FOLDER.glob("*.py") if p.stem.endswith(("_car_racing", "_door_open")))
DEMOS: dict[str, object] = {}


def _demo(task):
    if task.spec.name not in DEMOS:
        DEMOS[task.spec.name] = record_demonstration(task, max_steps=120)
    return DEMOS[task.spec.name]


def test_at_least_three_authors_per_task():
    for task_name in ("car_racing", "door_open"):
        assert len(foreign_programs(FOLDER, task_name)) >= 3


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_a_foreign_program_fits_in_the_sandbox_and_drives(path):
    task = get_task("car_racing" if path.stem.endswith("car_racing") else "door_open")
    fit = LocalFitter(task, il={"max_epochs": 30}).fit(path.read_text(), _demo(task))
    assert not fit.failed, fit.error
    assert fit.info_schema.latents and fit.info_schema.weights
    result = run_episode(task, fit.bundle.build(task.spec), task.spec.eval_seeds[0], mode="mean", max_steps=40)
    assert result.error is None and len(result.table) == 40
    assert np.isfinite(result.table[[f"act_{a}" for a in task.spec.action_names]].to_numpy()).all()


def test_the_foreign_table_puts_the_mean_action_first_and_keeps_failures():
    import pandas as pd

    episodes = pd.DataFrame([
        {"program": "a", "seed": 1, "metric": 10.0, "success": 1.0, "mean_action_metric": 20.0,
         "mean_action_success": 0.0, "error": None},
        {"program": "a", "seed": 2, "metric": 30.0, "success": 0.0, "mean_action_metric": 40.0,
         "mean_action_success": 1.0, "error": None},
        {"program": "b", "seed": None, "error": "SyntaxError: bad"},
    ])
    table = foreign_table(episodes, "return", True).set_index("program")
    assert list(table.columns[:3]) == ["episodes", "error", "mean_action_mean"]
    assert table.loc["a", "mean_action_mean"] == 30.0 and table.loc["a", "sampled_mean"] == 20.0
    assert table.loc["a", "mean_action_success"] == 0.5
    assert table.loc["b", "episodes"] == 0 and "SyntaxError" in table.loc["b", "error"]
