"""Building and fitting policy programs in the sandbox, on a real (short) expert demonstration.

The sandboxed fit must give exactly the weights an in-process fit gives (the sandbox changes
where the code runs, not what it computes), and every kind of bad program must come back as a
typed result while the next fit still works.
"""

from __future__ import annotations

import numpy as np
import pytest

from refine_core.learn.il import ILConfig, fit_il
from refine_core.policy.contract import build_policy
from refine_core.policy.programs import starter_program
from refine_core.rollout.demo import record_demonstration
from refine_core.sandbox import Limits, SandboxConfigError, fit_in_sandbox
from refine_core.sandbox import bwrap as bwrap_mod
from refine_core.sandbox.runner import REQUIRE_ENV, require_sandbox
from refine_core.tasks.registry import get_task

IL = {"max_epochs": 60, "patience": 20, "seed": 0, "progress": False}


@pytest.fixture(autouse=True)
def _sandbox_available():
    ok, why = bwrap_mod.probe()
    if not ok:
        if require_sandbox():
            pytest.fail(f"{REQUIRE_ENV} is set but the sandbox is unavailable: {why}")
        pytest.skip(f"namespace sandbox unavailable here: {why}")


@pytest.fixture(scope="module")
def car():
    task = get_task("car_racing")
    return task, record_demonstration(task, max_steps=150)


def fit(source, demo, **kwargs):
    kwargs.setdefault("limits", Limits(wall_s=120.0))
    return fit_in_sandbox(source, "car_racing", demo.inputs, demo.actions, IL, **kwargs)


def test_starter_program_fits_like_it_does_in_process(car):
    task, demo = car
    source = starter_program("car_racing")
    result = fit_in_sandbox(source, "car_racing", demo.inputs, demo.actions, ILConfig(**IL),
                            timeout_s=120.0)
    assert result.status == "ok", (result.error, result.result.stderr_tail)
    assert result.result.isolation == "namespaces"
    report = result.report
    assert report["best_val_nll"] <= report["initial_val_nll"]
    assert report["info_schema"]["weights"] and report["info_schema"]["latents"]

    local = build_policy(source, task.spec)
    expected = fit_il(local, demo.inputs, demo.actions, ILConfig(**IL), spec=task.spec)
    assert set(result.weights) == set(expected.weights)
    for name, value in expected.weights.items():
        assert result.weights[name].dtype == value.dtype
        np.testing.assert_allclose(result.weights[name], value, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("source", [
    "import os\nimport torch\nclass RacecarPolicy(torch.nn.Module):\n    pass\n",
    "import torch\nSYSTEM = torch.os.system\nclass RacecarPolicy(torch.nn.Module):\n    pass\n",
    "import subprocess\n",
])
def test_forbidden_programs_never_reach_a_process(car, source):
    result = fit(source, car[1])
    assert result.status == "contract_error"
    assert result.error_type == "ForbiddenCodeError"
    assert result.rule == "forbidden_code"
    assert result.result.status == "refused"
    assert result.result.duration_s == 0.0  # refused before any sandbox process started
    assert fit(starter_program("car_racing"), car[1]).ok


def test_contract_violation_comes_back_typed(car):
    source = (
        "import torch\n"
        "class RacecarPolicy(torch.nn.Module):\n"
        "    def forward(self, tiles, indicators):\n"
        "        return tiles\n"
    )
    result = fit(source, car[1])
    assert result.status == "contract_error"
    assert result.error_type == "NoParametersError"
    assert result.rule == "no_parameters"
    assert result.weights is None


def test_program_that_hangs_is_timed_out(car):
    source = (
        "import torch\n"
        "class RacecarPolicy(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.k = torch.nn.Parameter(torch.tensor([1.0]))\n"
        "        while True:\n"
        "            pass\n"
    )
    result = fit(source, car[1], limits=Limits(wall_s=10.0))
    assert result.status == "timeout"
    assert fit(starter_program("car_racing"), car[1]).ok


def test_bad_config_and_task_are_typed(car):
    demo = car[1]
    bad_key = fit_in_sandbox(starter_program("car_racing"), "car_racing", demo.inputs,
                             demo.actions, {"no_such_option": 1}, limits=Limits(wall_s=120.0))
    assert bad_key.status == "fit_error" and bad_key.error_type == "TypeError"
    unknown = fit_in_sandbox(starter_program("car_racing"), "no_such_task", demo.inputs,
                             demo.actions, IL, limits=Limits(wall_s=120.0))
    assert unknown.status == "fit_error" and unknown.error_type == "UnknownTaskError"
    with pytest.raises(SandboxConfigError):
        fit_in_sandbox("x = 1", "car_racing", demo.inputs, demo.actions, "lr=1")  # type: ignore[arg-type]
    with pytest.raises(SandboxConfigError):
        fit_in_sandbox("x = 1", "car_racing", {"tiles": np.array(["a"])}, demo.actions, IL)
