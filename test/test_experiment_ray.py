"""`refine experiment` on Ray: the same numbers as local processes."""

import pandas as pd
import pytest
from experiment_smoke import smoke


@pytest.mark.slow
def test_ray_jobs_reproduce_the_local_numbers(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is an optional extra")
    # one preset's RL rows and one evaluation seed: every kind of job still goes through Ray
    # (fits, RL training, evaluations); the other rows are test_experiment.py's
    small = ("--rl-presets", "ours", "--seeds", "1")
    local_folder = smoke(tmp_path / "local", "door_open", "--workers", "1", *small)
    local = pd.read_csv(local_folder / "episodes.csv")
    # the refinement run is not a job (it runs in the calling process either way): Ray's run
    # takes its programs from the local run's refinement instead of repeating it
    refined = local_folder / "refinement"
    on_ray = pd.read_csv(smoke(tmp_path / "ray", "door_open", "--workers", "2", "--ray", "local", *small,
                               "--refined-run", str(refined)) / "episodes.csv")
    assert len(on_ray) >= 4, on_ray
    assert not ray.is_initialized(), "the runner shuts down the Ray instance it started"
    cols = ["condition", "seed", "return", "metric", "success"]
    pd.testing.assert_frame_equal(local[cols], on_ray[cols])
