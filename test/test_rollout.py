"""Rollouts on the real door (MuJoCo) and car (Box2D) simulators, and their step tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import build_policy, validate_policy
from refine_core.policy.programs import starter_program
from refine_core.rollout.demo import Demonstration, record_demonstration
from refine_core.rollout.runner import run_episode, run_episodes
from refine_core.rollout.schema import ID_COLUMNS, RolloutSchema
from refine_core.store import RunDatabase
from refine_core.tasks.registry import get_task

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module", params=["door_open", "car_racing"])
def task(request):
    return get_task(request.param)


@pytest.fixture(scope="module")
def door():
    return get_task("door_open")


def _starter(task):
    source = starter_program(task.spec.name)
    policy = build_policy(source, task.spec)
    return source, policy, validate_policy(policy, task.spec)


def test_rollout_table_has_every_semantic_column(task):
    spec = task.spec
    _, policy, schema = _starter(task)
    ids = {"run_id": 3, "round": 1, "kind": "diagnostic", "episode": 4}
    result = run_episode(task, policy, 200, mode="sample", ids=ids, max_steps=30, label_expert=True)
    table = result.table
    assert result.error is None and result.summary["steps"] == 30 and len(table) == 30
    assert list(table.columns) == RolloutSchema.for_task(spec, schema.keys, expert=True).columns
    obs = list(spec.observation_columns)
    assert set(obs) <= set(table.columns)
    assert schema.weights and schema.latents
    for action in spec.actions:
        for prefix in ("mean", "act", "expert", "std"):
            assert f"{prefix}_{action.name}" in table
        assert table[f"act_{action.name}"].between(action.low, action.high).all()
    assert table[list(ID_COLUMNS)].iloc[0].tolist() == [3, 1, "diagnostic", 4, 200, 0]
    assert table["step"].tolist() == list(range(30))
    # next_ columns are the following row's observation
    for column in obs[:6]:
        np.testing.assert_array_equal(table[f"next_{column}"].to_numpy()[:-1],
                                      table[column].to_numpy()[1:])
    assert table["done"].tolist() == [0] * 29 + [1]
    # weights are constant through an episode; the expert label is a real action, not a copy
    weight = schema.weights[0]
    assert table[weight].nunique() == 1
    assert table[[f"expert_{a}" for a in spec.action_names]].notna().all().all()
    assert np.isfinite(table.drop(columns=["kind"]).to_numpy(dtype=float)).all()


def test_mean_mode_executes_the_clipped_mean(door):
    _, policy, _ = _starter(door)
    table = run_episode(door, policy, 201, mode="mean", max_steps=20).table
    for action in door.spec.actions:
        expected = table[f"mean_{action.name}"].clip(action.low, action.high)
        np.testing.assert_allclose(table[f"act_{action.name}"], expected, rtol=0, atol=1e-6)


def test_rollouts_are_deterministic_per_seed_and_rng_seed(door):
    _, policy, _ = _starter(door)
    a = run_episode(door, policy, 1000, mode="sample", rng_seed=5, max_steps=25)
    b = run_episode(door, policy, 1000, mode="sample", rng_seed=5, max_steps=25)
    c = run_episode(door, policy, 1000, mode="sample", rng_seed=6, max_steps=25)
    pd.testing.assert_frame_equal(a.table, b.table)
    assert not np.allclose(a.table["act_dx"], c.table["act_dx"])


class _Breaks(nn.Module):
    """Acts sensibly, then fails at step `at` the way an untrusted program might."""

    def __init__(self, at: int, how: str) -> None:
        super().__init__()
        self.k = nn.Parameter(torch.tensor([0.5]))
        self.calls, self.at, self.how = 0, at, how

    def forward(self, features):
        self.calls += 1
        mean = torch.tanh(self.k * features[:, :4])
        if self.calls > self.at:
            if self.how == "raise":
                raise ZeroDivisionError("the program divided by zero")
            if self.how == "keys":
                return mean, torch.diag_embed(torch.full_like(mean, 0.1)), {"latent_new": mean[:, 0]}
            mean = mean * float("nan")
        tril = torch.diag_embed(torch.full_like(mean, 0.1))
        return mean, tril, {"weight_k": self.k, "latent_x": features[:, 0]}


@pytest.mark.parametrize(
    "how, message",
    [("raise", "ZeroDivisionError"), ("nan", "non-finite"), ("keys", "info keys changed")],
)
def test_policy_failure_mid_episode_is_a_recorded_error(door, how, message):
    result = run_episode(door, _Breaks(7, how), 1000, max_steps=50)
    assert result.error is not None and message in result.error and "step 7" in result.error
    assert not result.complete and result.summary["complete"] is False
    assert len(result.table) == 7 and result.summary["steps"] == 7
    assert np.isfinite(result.summary["return"])


def test_parallel_runner_matches_serial(door):
    source, policy, _ = _starter(door)
    bundle = PolicyBundle.from_module(source, policy)
    seeds = [1000, 1001, 1002]
    options = dict(mode="sample", rng_seed=3, max_steps=40, ids={"run_id": 1, "kind": "eval"})
    serial = run_episodes(door, bundle, seeds, workers=1, progress=False, **options)
    parallel = run_episodes(door, bundle, seeds, workers=2, progress=False, **options)
    assert [r.summary["seed"] for r in parallel] == seeds
    for s, p in zip(serial, parallel, strict=True):
        assert s.summary == p.summary
        pd.testing.assert_frame_equal(s.table, p.table)
    assert [r.table["episode"].iloc[0] for r in parallel] == [0, 1, 2]
    with pytest.raises(ValueError, match="PolicyBundle"):
        run_episodes(door, policy, seeds, workers=2)


def test_demonstration_records_and_round_trips(task, run_dir):
    spec = task.spec
    demo = record_demonstration(task)
    assert demo.seed == spec.demo_seed and demo.steps == len(demo.table) > 100
    assert demo.summary["success"] == 1.0
    for inp in spec.inputs:
        assert demo.inputs[inp.name].shape == (demo.steps, *inp.shape)
        assert demo.inputs[inp.name].dtype == np.float32
    assert demo.actions.shape == (demo.steps, len(spec.actions))
    # the inputs are what the policy's forward would have received on the demo states
    env = task.make_env()
    obs, _ = env.reset(seed=spec.demo_seed)
    env.close()
    for name, value in task.split_observation(obs).items():
        np.testing.assert_array_equal(demo.inputs[name][0], value)
    np.testing.assert_array_equal(demo.table[[f"act_{a}" for a in spec.action_names]],
                                  demo.actions)

    with RunDatabase(run_dir) as db:
        run_id = db.create_run(spec.name)
        demo.save(db, run_id)
    with RunDatabase(run_dir) as db:
        back = Demonstration.load(db, run_id)
    assert (back.task, back.seed, back.steps) == (demo.task, demo.seed, demo.steps)
    for name in demo.inputs:
        np.testing.assert_array_equal(back.inputs[name], demo.inputs[name])
    np.testing.assert_array_equal(back.actions, demo.actions)
    np.testing.assert_array_equal(back.rewards, demo.rewards)
    pd.testing.assert_frame_equal(back.table.drop(columns=["run_id", "round"]),
                                  demo.table.drop(columns=["run_id", "round"]), check_dtype=False)
    assert (back.table["run_id"] == run_id).all() and back.table["round"].isna().all()
