"""RL update records: stored in the run database as they arrive, read back intact, and plotted
by `refine report`."""

import html
import math

import pytest
from drift_task import DriftPolicy, DriftTask

from refine_core.cli import main
from refine_core.learn.rl import RLConfig, train_rl
from refine_core.store.db import RunDatabase


@pytest.fixture
def db(run_dir):
    database = RunDatabase(run_dir)
    yield database
    database.close()


def _record(update: int, **extra) -> dict:
    return {"update": update, "resets": 20 * update, "return_mean": 900.0 + update, "return_std": 3.0,
            "selection_metric": math.nan, "selection_return": math.nan, "entropy": -2.2, "entropy_coef": 0.01,
            "approx_kl": 0.001, "clip_frac": 0.3, "ratio_q05": 0.7, "ratio_q50": 1.0, "ratio_q95": 1.4,
            "grad_norm": 2.5, "loss": -0.1, "window_starts": 17000,
            "params": {"v_straight": {"delta_norm": 0.01, "delta_max": 0.01, "value": [1.07]}}, **extra}


def test_update_records_round_trip_and_replace(db):
    run = db.create_run("car_racing")
    db.log_rl_update(run, 3, _record(1))
    db.log_rl_update(run, 3, _record(2, selection_metric=931.5, selection_return=931.5))
    db.log_rl_update(run, 3, _record(2, selection_metric=935.0, selection_return=935.0))  # a re-run of update 2
    db.log_rl_update(run, 3, _record(1), label="rl_2000")
    frame = db.rl_updates(run, round=3, label="rl")
    assert frame["update"].tolist() == [1, 2]
    assert math.isnan(frame["selection_metric"][0]) and frame["selection_metric"][1] == 935.0
    assert frame["window_starts"].tolist() == [17000, 17000]  # record-only figures come back too
    assert frame["params"][0]["v_straight"]["value"] == [1.07]
    assert db.rl_labels(run) == [(3, "rl"), (3, "rl_2000")]
    assert len(db.rl_updates(run)) == 3


def test_train_rl_records_stream_into_the_database_and_the_report_plots_them(db, run_dir):
    run = db.create_run("car_racing")  # the report reads the task's metric name from its spec
    config = RLConfig(group_size=4, reset_budget=12, lr=0.05, window=5, select_every=1)  # ours: accepted checkpoint
    report = train_rl(DriftTask(), DriftPolicy(), config, progress=False,
                      on_update=lambda r: db.log_rl_update(run, 0, r, label="post-refinement"))
    stored = db.rl_updates(run, round=0)
    assert stored["update"].tolist() == [1, 2, 3]
    assert stored["selection_metric"].tolist() == pytest.approx([s["metric"] for s in report.selection[1:]])
    assert stored["clip_frac"].tolist() == pytest.approx([r["clip_frac"] for r in report.curve])
    db.close()
    assert main(["report", "--run", str(run_dir)]) == 0
    page = (run_dir / "report.html").read_text()
    assert html.escape("RL 'post-refinement' after round 0") in page
    assert page.count("alt='RL updates'") == 1
