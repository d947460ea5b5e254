"""The structured-policy contract: each rule a program can break gives its own error type, the
loader accepts programs written for another class name, and the distribution/bundle helpers
behave as the rest of the project relies on."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from programs.specs import CAR, DOOR
from scipy.stats import multivariate_normal

from refine_core.policy import (
    InputBatchError,
    PolicyBundle,
    build_policy,
    clip_actions,
    dummy_batch,
    load_policy_class,
    log_prob,
    mlp_program,
    policy_forward,
    sample_actions,
    to_batch,
    validate_policy,
)
from refine_core.policy import errors as E
from refine_core.policy.bundle import BundleFormatError

PROGRAMS = Path(__file__).parent / "programs"
DOOR_SRC = (PROGRAMS / "door_basic.py").read_text()
CAR_SRC = (PROGRAMS / "car_basic.py").read_text()


def edit(old: str, new: str, source: str = DOOR_SRC) -> str:
    assert source.count(old) == 1, f"test program must contain {old!r} exactly once"
    return source.replace(old, new)


RETURN = "        return mean, tril, info"
INFO = '        info = {"weight_gain": self.gain, "latent_dx": delta[:, 0]}'


def test_valid_programs_build_and_report_their_info_schema():
    door = build_policy(DOOR_SRC, DOOR)
    schema = validate_policy(door, DOOR)
    assert schema.weights == ("weight_gain",)
    assert schema.latents == ("latent_dx",)
    assert schema.warnings == ()
    car_schema = validate_policy(build_policy(CAR_SRC, CAR), CAR)
    assert car_schema.keys == ("weight_k_lateral", "latent_lateral", "latent_speed")


def test_error_types_are_distinct_contract_errors_with_rule_ids():
    classes = [c for c in vars(E).values() if isinstance(c, type) and issubclass(c, E.ContractError)]
    rules = [c.rule for c in classes if c is not E.ContractError]
    assert len(rules) == len(set(rules)) >= 15
    err = E.InfoShapeError("info['latent_x'] must have shape (5,)")
    assert err.rule == "info_shape" and "[info_shape]" in str(err)


def test_syntax_error_names_the_line():
    source = edit("    def forward(self, features):", "    def forward(self, features)")
    with pytest.raises(E.ProgramSyntaxError) as info:
        build_policy(source, DOOR)
    assert info.value.lineno == source.splitlines().index("    def forward(self, features)") + 1
    assert f"line {info.value.lineno}" in str(info.value)


def test_missing_class_lists_what_was_found():
    with pytest.raises(E.MissingClassError, match="no torch.nn.Module subclass"):
        load_policy_class("import torch\nx = torch.zeros(1)\n", DOOR)
    two = DOOR_SRC.replace("OpenDoorPolicy", "DoorA") + "\n\nclass DoorB(DoorA):\n    pass\n"
    with pytest.raises(E.MissingClassError) as info:
        load_policy_class(two, DOOR)
    assert set(info.value.found) == {"DoorA", "DoorB"}
    assert "DoorA" in str(info.value) and "OpenDoorPolicy" in str(info.value)


def test_program_with_another_class_name_loads_unchanged():
    renamed = DOOR_SRC.replace("OpenDoorPolicy", "MyDoorController")
    policy = build_policy(renamed, DOOR)
    assert type(policy).__name__ == "MyDoorController"


def test_named_class_wins_over_helper_modules():
    helper = "\n\nclass Helper(nn.Module):\n    def forward(self, x):\n        return x\n"
    cls = load_policy_class(DOOR_SRC + helper, DOOR)
    assert cls.__name__ == "OpenDoorPolicy"


def test_top_level_error_is_typed():
    with pytest.raises(E.ProgramImportError, match="ZeroDivisionError"):
        load_policy_class(DOOR_SRC + "\nRATE = 1 / 0\n", DOOR)


def test_constructor_needing_arguments():
    source = edit("    def __init__(self):", "    def __init__(self, gain):")
    with pytest.raises(E.ConstructionError, match="without arguments"):
        build_policy(source, DOOR)


def test_constructor_raising():
    source = edit("        super().__init__()", "        super().__init__()\n        raise ValueError('bad init')")
    with pytest.raises(E.ConstructionError, match="bad init"):
        build_policy(source, DOOR)


def test_no_trainable_parameters():
    source = (
        DOOR_SRC.replace("nn.Parameter(torch.tensor([5.0]))", "torch.tensor([5.0])")
        .replace("nn.Parameter(torch.tensor([0.5]))", "torch.tensor([0.5])")
        .replace("nn.Parameter(torch.tensor([-1.0]))", "torch.tensor([-1.0])")
    )
    with pytest.raises(E.NoParametersError, match="nn.Parameter"):
        build_policy(source, DOOR)


def test_forward_raising_carries_the_traceback_tail():
    source = edit("        move = torch.tanh(self.gain * delta)", "        move = torch.tanh(self.gain @ delta)")
    with pytest.raises(E.ForwardError) as info:
        build_policy(source, DOOR)
    message = str(info.value)
    assert "forward(features: (5, 39))" in message
    assert "self.gain @ delta" in message  # the program's own line, via linecache


@pytest.mark.parametrize(
    ("new_return", "error", "fragment"),
    [
        ("        return mean, tril", E.OutputStructureError, "tuple of length 2"),
        ("        return mean", E.OutputStructureError, "Tensor"),
        ("        return mean, tril, [info]", E.OutputStructureError, "info must be a dict"),
        ("        return mean[:, :3], tril, info", E.ActionShapeError, "(5, 4)"),
        ("        return mean.sum(dim=1), tril, info", E.ActionShapeError, "got (5,)"),
        ("        return mean.long(), tril, info", E.ActionShapeError, "float tensor"),
        ("        return mean, torch.diagonal(tril, dim1=1, dim2=2), info", E.ScaleTrilShapeError, "(5, 4, 4)"),
        ("        return mean, tril + torch.triu(torch.ones(4, 4), diagonal=1), info",
         E.ScaleTrilNotLowerTriangularError, "above the diagonal"),
        ("        return mean, -tril, info", E.ScaleTrilDiagonalError, "positive"),
        ("        return mean, tril * 0.0, info", E.ScaleTrilDiagonalError, "positive"),
        ("        return mean * float('nan'), tril, info", E.NonFiniteOutputError, "action_mean"),
        ("        return mean, tril * float('inf'), info", E.NonFiniteOutputError, "scale_tril"),
    ],
)
def test_output_violations(new_return, error, fragment):
    with pytest.raises(error) as info:
        build_policy(edit(RETURN, new_return), DOOR)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("new_info", "error", "fragment"),
    [
        ('        info = {"gain": self.gain}', E.InfoKeyError, "'gain'"),
        ('        info = {"Weight_gain": self.gain}', E.InfoKeyError, "'Weight_gain'"),
        ('        info = {"latent_dX": delta[:, 0]}', E.InfoKeyError, "'latent_dX'"),
        ('        info = {"latent_": delta[:, 0]}', E.InfoKeyError, "'latent_'"),
        ('        info = {"weight_gain": 5.0}', E.InfoKeyError, "must be a torch.Tensor"),
        ('        info = {"latent_delta": delta}', E.InfoShapeError, "(5,)"),
        ('        info = {"weight_gain": self.gain.expand(2)}', E.InfoShapeError, "(1,)"),
        ('        info = {"latent_dx": delta[:1, 0]}', E.InfoShapeError, "'latent_dx'"),
        ('        info = {"latent_dx": delta[:, 0] / 0.0}', E.NonFiniteOutputError, "latent_dx"),
    ],
)
def test_info_violations(new_info, error, fragment):
    with pytest.raises(error) as info:
        build_policy(edit(INFO, new_info), DOOR)
    assert fragment in str(info.value)


def test_program_that_only_works_at_one_batch_size_is_caught_at_batch_size_one():
    source = edit(
        "        tril = torch.diag_embed(torch.exp(self.log_std).expand(batch, 4))",
        "        tril = torch.diag_embed(torch.exp(self.log_std).expand(5, 4))",
    )
    with pytest.raises(E.ScaleTrilShapeError, match=r"\(1, 4, 4\)"):
        build_policy(source, DOOR)


def test_nan_input_makes_a_warning_not_a_failure():
    source = edit("        features = torch.nan_to_num(features)", "        features = features * 1.0")
    schema = validate_policy(build_policy(source, DOOR), DOOR)
    assert any("NaN" in w and "obs_0" in w for w in schema.warnings)


def test_outputs_that_ignore_the_parameters_give_a_warning():
    source = edit(RETURN, "        return mean.detach(), tril.detach(), info")
    schema = validate_policy(build_policy(source, DOOR), DOOR)
    assert any("trainable parameter" in w for w in schema.warnings)


@pytest.mark.parametrize("spec", [CAR, DOOR], ids=["car", "door"])
def test_mlp_program_follows_the_contract(spec):
    source = mlp_program(spec, hidden=(16, 8))
    policy = build_policy(source, spec)
    schema = validate_policy(policy, spec)
    assert schema.latents == ()
    assert len(schema.weights) == len(spec.actions)
    assert schema.warnings == ()
    assert type(policy).__name__ == spec.policy_class
    sizes = [m.out_features for m in policy.modules() if isinstance(m, torch.nn.Linear)]
    assert sizes == [16, 8, len(spec.actions)]


def test_mlp_build_is_deterministic_and_input_stats_change_the_output():
    source = mlp_program(DOOR)
    a, b = build_policy(source, DOOR), build_policy(source, DOOR)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(x, y), name
    batch = dummy_batch(DOOR, 3)
    before = policy_forward(a, batch, DOOR)[0]
    a.set_input_stats(torch.full((39,), 0.3), torch.full((39,), 2.0))
    after = policy_forward(a, batch, DOOR)[0]
    assert not torch.allclose(before, after)


def test_dummy_batch_is_deterministic_plausible_and_honours_task_ranges():
    first, second = dummy_batch(CAR, 6), dummy_batch(CAR, 6)
    assert list(first) == ["tiles", "indicators"]
    assert first["tiles"].shape == (6, 12, 4) and first["indicators"].shape == (6, 7)
    assert torch.equal(first["tiles"], second["tiles"])
    borders = first["tiles"][:, :, 3]
    assert set(borders.unique().tolist()) <= {0.0, 1.0}
    assert (first["indicators"][:, 0] > 0).all()  # speed is non-negative
    assert len(first["tiles"][:, :, 0].unique()) > 30  # varied, not a constant fill
    ranged = CAR.__class__(**{**CAR.__dict__, "extra": {"column_ranges": {"speed": (0.9, 1.0)}}})
    speed = dummy_batch(ranged, 20)["indicators"][:, 0]
    assert bool(((speed >= 0.9) & (speed <= 1.0)).all())


def test_to_batch_shapes_order_and_nan_passthrough():
    tiles = np.zeros((12, 4))
    tiles[0, 0] = np.nan
    one = to_batch(CAR, {"indicators": np.ones(7), "tiles": tiles, "extra": np.ones(2)}, batched=False)
    assert list(one) == ["tiles", "indicators"]
    assert one["tiles"].dtype == torch.float32 and one["tiles"].shape == (1, 12, 4)
    assert torch.isnan(one["tiles"][0, 0, 0])
    with pytest.raises(InputBatchError, match="indicators"):
        to_batch(CAR, {"tiles": np.zeros((3, 12, 4))})
    with pytest.raises(InputBatchError, match=r"\(B, 12, 4\)"):
        to_batch(CAR, {"tiles": np.zeros((3, 4, 12)), "indicators": np.zeros((3, 7))})
    with pytest.raises(InputBatchError, match="batch size"):
        to_batch(CAR, {"tiles": np.zeros((3, 12, 4)), "indicators": np.zeros((2, 7))})
    with pytest.raises(InputBatchError, match="numeric"):
        to_batch(DOOR, {"features": [["a"] * 39]})


def test_log_prob_matches_scipy_and_samples_are_reproducible():
    mean = torch.tensor([[0.2, -0.1, 0.5]], dtype=torch.float64)
    tril = torch.tensor([[[0.5, 0.0, 0.0], [0.1, 0.3, 0.0], [-0.2, 0.05, 0.4]]], dtype=torch.float64)
    x = torch.tensor([[0.0, 0.1, 0.2]], dtype=torch.float64)
    cov = (tril[0] @ tril[0].T).numpy()
    expected = multivariate_normal(mean[0].numpy(), cov).logpdf(x[0].numpy())
    assert float(log_prob(mean, tril, x)[0]) == pytest.approx(expected, rel=1e-9)

    big_mean, big_tril = mean.expand(20000, 3), tril.expand(20000, 3, 3)
    a = sample_actions(big_mean, big_tril, torch.Generator().manual_seed(3))
    b = sample_actions(big_mean, big_tril, torch.Generator().manual_seed(3))
    assert torch.equal(a, b)
    assert np.allclose(np.cov(a.numpy().T), cov, atol=0.01)


def test_clip_actions_keeps_the_type():
    raw = np.array([[-3.0, 2.0, -0.5], [0.3, 0.4, 0.5]])
    clipped = clip_actions(raw, CAR)
    assert isinstance(clipped, np.ndarray)
    assert np.allclose(clipped, [[-1.0, 1.0, 0.0], [0.3, 0.4, 0.5]])
    tensor = clip_actions(torch.tensor(raw, dtype=torch.float32), CAR)
    assert isinstance(tensor, torch.Tensor) and torch.allclose(tensor, torch.tensor(clipped).float())


def test_bundle_round_trip_without_pickle():
    policy = build_policy(DOOR_SRC, DOOR)
    with torch.no_grad():
        policy.gain.fill_(-3.25)
    bundle = PolicyBundle.from_module(DOOR_SRC, policy)
    data = bundle.to_npz_bytes()
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:  # readable without pickle
        assert all(npz[name].dtype != object for name in npz.files)
    restored = PolicyBundle.from_npz_bytes(data)
    assert restored.source == DOOR_SRC and restored.digest() == bundle.digest()
    rebuilt = restored.build(DOOR)
    batch = dummy_batch(DOOR, 4)
    for x, y in zip(policy_forward(policy, batch)[:2], policy_forward(rebuilt, batch)[:2], strict=True):
        assert torch.equal(x, y)
    assert json.dumps(sorted(restored.weights))  # names survive as plain strings


def test_bundle_refuses_pickles_garbage_and_mismatched_weights():
    buffer = io.BytesIO()
    np.savez(buffer, format=np.array("refine-policy-bundle-1"), source=np.array(DOOR_SRC),
             **{"w:gain": np.array([object()], dtype=object)})
    with pytest.raises(BundleFormatError):
        PolicyBundle.from_npz_bytes(buffer.getvalue())
    with pytest.raises(BundleFormatError):
        PolicyBundle.from_npz_bytes(b"not a zip file")
    with pytest.raises(BundleFormatError, match="non-numeric"):
        PolicyBundle(DOOR_SRC, {"gain": np.array(["x"])})
    weights = PolicyBundle.from_module(DOOR_SRC, build_policy(DOOR_SRC, DOOR)).weights
    with pytest.raises(E.WeightsMismatchError, match="missing"):
        PolicyBundle(DOOR_SRC, {k: v for k, v in weights.items() if k != "gain"}).build(DOOR)
    with pytest.raises(E.WeightsMismatchError, match="shape"):
        PolicyBundle(DOOR_SRC, {**weights, "gain": np.zeros(3, np.float32)}).build(DOOR)


def test_validation_leaves_the_program_state_as_it_was():
    source = edit(
        "        self.log_std = nn.Parameter(torch.tensor([-1.0]))",
        "        self.log_std = nn.Parameter(torch.tensor([-1.0]))\n"
        "        self.register_buffer(\"calls\", torch.zeros(1))",
    )
    source = edit("        batch = features.shape[0]", "        batch = features.shape[0]\n        self.calls += 1", source)
    policy = build_policy(source, DOOR)
    assert float(policy.calls) == 0.0
    validate_policy(policy, DOOR)
    assert float(policy.calls) == 0.0
