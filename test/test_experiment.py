"""`refine experiment --smoke`: every condition of the published table, tiny budgets."""

import pandas as pd
import pytest

from refine_core.cli import main
from refine_core.experiment.conditions import conditions

CONDITIONS = [c.name for c in conditions(1, 2)]


def _smoke(tmp_path, task, *extra):
    out = tmp_path / "results"
    assert main(["experiment", "--task", task, "--smoke", "--out", str(out), "--date", "t", *extra]) == 0
    return out / task / "t"


def test_smoke_runs_every_condition_and_writes_the_outputs(tmp_path):
    folder = _smoke(tmp_path, "car_racing", "--workers", "2")
    for name in ("table.md", "episodes.csv", "pvalues.md", "summary.json", "experiment.db",
                 "refined_program.py", "refinement_rounds.png", "rl_curves.png"):
        assert (folder / name).exists(), name
    episodes = pd.read_csv(folder / "episodes.csv")
    assert sorted(episodes["condition"].unique()) == sorted(CONDITIONS)
    assert (episodes.groupby("condition").size() == 2).all()
    table = (folder / "table.md").read_text()
    assert "refined structure + RL" in table and "scaled down" in table and "| analyst calls |" in table
    assert "| mean action: return (mean ± std) | success | sampled | RL weights |" in table
    assert "best on the selection seeds: update" in table and "window 10 (published 150)" in table
    pvalues = (folder / "pvalues.md").read_text()
    assert "## mean action (primary)" in pvalues and "refined_rl_low | refined_il" in pvalues
    updates = pd.read_csv(folder / "rl_updates.csv")
    assert set(updates["condition"]) == {c for c in CONDITIONS if "_rl_" in c}
    assert {"return_mean", "clip_frac", "approx_kl", "entropy", "ratio_q50", "params"} <= set(updates.columns)
    assert (folder / "rl_updates_refined_rl_high.png").exists()
    from refine_core.store.experiment import read_table

    stored = read_table(folder / "experiment.db", "episodes")
    assert len(stored) == len(episodes) and set(stored["condition"]) == set(CONDITIONS)
    assert len(read_table(folder / "experiment.db", "conditions")) == len(CONDITIONS)


@pytest.mark.slow
def test_ray_jobs_reproduce_the_local_numbers(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is an optional extra")
    local = pd.read_csv(_smoke(tmp_path / "local", "door_open", "--workers", "1") / "episodes.csv")
    on_ray = pd.read_csv(_smoke(tmp_path / "ray", "door_open", "--workers", "2", "--ray", "local") / "episodes.csv")
    assert not ray.is_initialized(), "the runner shuts down the Ray instance it started"
    cols = ["condition", "seed", "return", "metric", "success"]
    pd.testing.assert_frame_equal(local[cols], on_ray[cols])


def test_rl_settings_are_rlconfig_fields_and_the_mlp_keeps_the_published_step_by_default():
    from refine_core.experiment.conditions import Condition
    from refine_core.experiment.runner import ExperimentOptions, parse_rl_settings, rl_config

    settings = parse_rl_settings(["std_scale=0.25", 'param_lr={"log_std": 0}', "checkpoint=final"])
    assert settings == {"std_scale": 0.25, "param_lr": {"log_std": 0}, "checkpoint": "final"}
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        parse_rl_settings(["learning_rate=0.1"])
    opts = ExperimentOptions(task="car_racing", rl={"std_scale": 0.5})
    mlp = rl_config(Condition("mlp_rl_low", "mlp", 400), opts)
    assert "lr" not in mlp and mlp["std_scale"] == 0.5 and mlp["reset_budget"] == 400
    opts.mlp_rl_lr = 3e-4
    assert rl_config(Condition("mlp_rl_low", "mlp", 400), opts)["lr"] == 3e-4
    assert "lr" not in rl_config(Condition("refined_rl_low", "refined", 400), opts)
    with pytest.raises(ValueError, match="std_scale"):
        rl_config(Condition("refined_rl_low", "refined", 400), ExperimentOptions(task="car_racing", rl={"std_scale": 0}))
