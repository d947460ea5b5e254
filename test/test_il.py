"""Imitation learning on synthetic demonstrations from a known rule: the fit lowers the held-out
NLL, recovers the rule's signs, restores the best-validation weights, is bit-for-bit
deterministic, and turns bad data or a broken program into a typed `FitError`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from programs.specs import DOOR

from refine_core.learn import FitError, ILConfig, fit_il
from refine_core.learn.il import _split
from refine_core.policy import PolicyBundle, build_policy, log_prob, mlp_program, to_batch

PROGRAMS = Path(__file__).parent / "programs"
LINEAR_SRC = (PROGRAMS / "door_linear.py").read_text()
TRUE_GAIN = np.array([-2.0, 1.5, -0.7])
TRUE_BIAS = np.array([0.1, -0.2, 0.05, 0.8])


def linear_demo(steps: int = 500, noise: float = 0.05, seed: int = 1):
    rng = np.random.default_rng(seed)
    features = rng.uniform(-0.5, 0.5, size=(steps, 39)).astype(np.float32)
    delta = features[:, 4:7] - features[:, 0:3]
    actions = np.concatenate([delta * TRUE_GAIN, np.zeros((steps, 1))], axis=1) + TRUE_BIAS
    actions = actions + noise * rng.standard_normal(actions.shape)
    return {"features": features}, actions.astype(np.float32)


def test_fit_lowers_validation_nll_and_recovers_the_rule():
    inputs, actions = linear_demo()
    policy = build_policy(LINEAR_SRC, DOOR)
    report = fit_il(policy, inputs, actions, ILConfig(max_epochs=600, patience=50), spec=DOOR)
    assert report.n_train == 400 and report.n_val == 100
    assert report.best_val_nll < report.initial_val_nll - 3.0
    assert report.best_val_nll < -1.0  # noise std 0.05 -> NLL about -1.2 per action dim summed
    gain = policy.gain.detach().numpy()
    assert np.all(np.sign(gain) == np.sign(TRUE_GAIN)), gain
    assert np.allclose(gain, TRUE_GAIN, atol=0.15)
    assert np.allclose(policy.bias.detach().numpy()[:3], TRUE_BIAS[:3], atol=0.05)
    assert report.wall_time_s > 0  # recorded; how fast a fit is belongs to `refine bench --only il`, not a test
    assert report.epochs == len(report.train_nll) == len(report.val_nll)
    assert report.val_nll[-1] < report.val_nll[0]


def test_best_validation_checkpoint_is_restored_and_reported():
    inputs, actions = linear_demo(steps=200)
    policy = build_policy(LINEAR_SRC, DOOR)
    config = ILConfig(lr=0.05, max_epochs=400, patience=20, seed=3)
    report = fit_il(policy, inputs, actions, config, spec=DOOR)
    assert report.best_epoch >= 1
    assert report.best_val_nll == pytest.approx(min(report.val_nll))
    assert report.val_nll[report.best_epoch - 1] == report.best_val_nll
    # The restored weights really give the best validation NLL, and are the reported weights.
    _, val_idx = _split(200, config.val_fraction, config.seed)
    batch = to_batch(DOOR, {"features": inputs["features"][val_idx]})
    with torch.no_grad():
        mean, tril, _ = policy(batch["features"])
        nll = -log_prob(mean, tril, torch.from_numpy(actions[val_idx])).mean()
    assert float(nll) == pytest.approx(report.best_val_nll, abs=1e-5)
    for name, value in policy.state_dict().items():
        assert np.array_equal(report.weights[name], value.numpy())


def test_early_stopping_ends_before_max_epochs():
    inputs, actions = linear_demo(steps=200)
    report = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions,
                    ILConfig(lr=0.05, max_epochs=5000, patience=10))
    assert report.stopped_early and report.epochs < 5000
    assert report.epochs - report.best_epoch == 10


def test_same_seed_gives_identical_weights_and_another_seed_does_not():
    inputs, actions = linear_demo(steps=300)
    config = ILConfig(max_epochs=150, patience=150, seed=7)
    threads = torch.get_num_threads()
    first = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, config)
    assert torch.get_num_threads() == threads  # the fit's single-thread setting is undone
    second = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, config)
    other = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, ILConfig(max_epochs=150, seed=8))
    for name in first.weights:
        assert np.array_equal(first.weights[name], second.weights[name]), name
    assert first.train_nll == second.train_nll and first.val_nll == second.val_nll
    assert not np.array_equal(first.weights["gain"], other.weights["gain"])


def test_minibatch_fit_is_deterministic_too():
    inputs, actions = linear_demo(steps=300)
    config = ILConfig(max_epochs=20, batch_size=64, seed=2)
    a = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, config)
    b = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, config)
    assert all(np.array_equal(a.weights[k], b.weights[k]) for k in a.weights)
    assert a.best_val_nll < a.initial_val_nll


def test_mlp_fit_sets_input_stats_from_the_training_split_and_round_trips():
    inputs, actions = linear_demo(steps=300)
    inputs["features"][:, 10] = 3.0 + 2.0 * inputs["features"][:, 10]
    source = mlp_program(DOOR, hidden=(16, 16))
    policy = build_policy(source, DOOR)
    config = ILConfig(max_epochs=200, patience=200, seed=0)
    report = fit_il(policy, inputs, actions, config, spec=DOOR)
    train_idx, _ = _split(300, 0.2, 0)
    column = inputs["features"][train_idx, 10]
    assert float(policy.input_mean[10]) == pytest.approx(column.mean(), abs=1e-4)
    assert float(policy.input_std[10]) == pytest.approx(column.std(), rel=1e-3)
    assert report.best_val_nll < report.initial_val_nll
    rebuilt = PolicyBundle.from_npz_bytes(PolicyBundle(source, report.weights).to_npz_bytes()).build(DOOR)
    batch = to_batch(DOOR, inputs)
    with torch.no_grad():
        assert torch.equal(policy(batch["features"])[0], rebuilt(batch["features"])[0])


def test_report_to_dict_is_json_safe_and_has_no_weights():
    inputs, actions = linear_demo(steps=100)
    report = fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, ILConfig(max_epochs=5))
    data = report.to_dict()
    assert "weights" not in data
    assert json.loads(json.dumps(data))["epochs"] == 5


def test_nan_inputs_the_program_does_not_handle_raise_a_fit_error():
    inputs, actions = linear_demo(steps=100)
    inputs["features"][17, 5] = np.nan
    with pytest.raises(FitError, match="non-finite NLL.*NaN inputs"):
        fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, ILConfig(max_epochs=5))


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda i, a: (i, a[:, :3]), None),  # wrong action width reaches the likelihood
        (lambda i, a: (i, a[:50]), "disagree on the number of steps"),
        (lambda i, a: (i, np.where(np.arange(a.size).reshape(a.shape) == 3, np.inf, a)), "NaN or infinity"),
        (lambda i, a: (i, a[:, 0]), r"shape \(T, A\)"),
        (lambda i, a: ({"features": i["features"][:1]}, a[:1]), "at least 2"),
        (lambda i, a: ({"features": i["features"][:, :30]}, a), "do not match the task"),
    ],
    ids=["action_width", "length", "inf_action", "action_rank", "too_short", "input_shape"],
)
def test_bad_demonstrations_raise_fit_errors(mutate, fragment):
    inputs, actions = mutate(*linear_demo(steps=100))
    with pytest.raises(FitError, match=fragment):
        fit_il(build_policy(LINEAR_SRC, DOOR), inputs, actions, ILConfig(max_epochs=3), spec=DOOR)


def test_invalid_config_is_refused():
    with pytest.raises(ValueError, match="val_fraction"):
        ILConfig(val_fraction=1.0)
    with pytest.raises(ValueError, match="lr"):
        ILConfig(lr=0.0)


STATE_SCALE_SRC = '''
import torch
from torch import nn
import torch.nn.functional as F


class OpenDoorPolicy(nn.Module):
    """Linear mean; a full lower-triangular scale whose diagonal grows with |feature 0|."""

    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.full((3,), 0.1))
        self.bias = nn.Parameter(torch.zeros(4))
        self.base = nn.Parameter(torch.full((4,), -2.0))
        self.growth = nn.Parameter(torch.zeros(4))
        self.coupling = nn.Parameter(torch.zeros(1))

    def forward(self, features):
        features = torch.nan_to_num(features)
        delta = features[:, 4:7] - features[:, 0:3]
        mean = torch.cat([self.gain * delta, torch.zeros_like(delta[:, :1])], dim=1) + self.bias
        spread = features[:, 0:1].abs()
        diag = F.softplus(self.base + self.growth * spread) + 1e-4
        low = torch.zeros_like(diag)
        row1 = torch.stack([self.coupling.expand_as(spread[:, 0]), low[:, 1], low[:, 2], low[:, 3]], dim=1)
        off = torch.stack([low, row1, low, low], dim=1)
        tril = torch.diag_embed(diag) + off
        return mean, tril, {"weight_coupling": self.coupling, "latent_spread": spread[:, 0]}
'''


def test_a_state_dependent_full_scale_passes_the_contract_and_is_fitted():
    """The published rule asks for a variance per output and allows a diagonal factor and a
    state-dependent scale: a program whose Cholesky factor depends on the state and couples
    two actions builds, passes the contract, and IL fits the dependence it can see."""
    rng = np.random.default_rng(4)
    steps = 600
    features = rng.uniform(-0.5, 0.5, size=(steps, 39)).astype(np.float32)
    delta = features[:, 4:7] - features[:, 0:3]
    mean = np.concatenate([delta * TRUE_GAIN, np.zeros((steps, 1))], axis=1) + TRUE_BIAS
    noise = rng.standard_normal((steps, 4)) * (0.02 + 0.4 * np.abs(features[:, :1]))  # grows with |f0|
    noise[:, 1] += 0.5 * noise[:, 0]  # dy's noise follows dx's: an off-diagonal term
    actions = (mean + noise).astype(np.float32)
    policy = build_policy(STATE_SCALE_SRC, DOOR)  # static check + contract on random probes
    report = fit_il(policy, {"features": features}, actions, ILConfig(max_epochs=800, patience=80), spec=DOOR)
    assert report.best_val_nll < report.initial_val_nll - 2.0
    growth = policy.growth.detach().numpy()
    assert np.all(growth[:3] > 0.2), growth  # the fitted scale depends on the state (started at 0)
    assert float(policy.coupling.detach()) > 0.0  # and couples dy to dx
    constant = build_policy(LINEAR_SRC, DOOR)
    baseline = fit_il(constant, {"features": features}, actions, ILConfig(max_epochs=800, patience=80), spec=DOOR)
    assert report.best_val_nll < baseline.best_val_nll, "the state-dependent scale explains the data better"
