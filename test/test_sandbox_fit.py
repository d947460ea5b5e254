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


def _with_forward_prelude(line: str) -> str:
    source = starter_program("car_racing")
    head = "def forward(self, tiles, indicators):"
    assert head in source
    return source.replace(head, f"{head}\n        {line}", 1)


def test_a_forward_that_never_returns_is_refused_by_the_validation_phase(car, record_property):
    """Not after the fit's long wall-clock limit: when the validation phase has used its CPU
    budget (however long a loaded machine's clock takes for it), saying which phase stopped and why.
    A budget of 6 s rather than the default's 20 (`FIT_VALIDATION_S`, what the learner and the
    loop pass): the hanging forward burns every second of it."""
    import time

    budget = 6.0
    source = _with_forward_prelude("while True:\n            pass")
    started = time.monotonic()
    result = fit(source, car[1], limits=Limits(wall_s=600.0), validation_s=budget)
    took = time.monotonic() - started
    record_property("hanging_forward_refused_s", round(float(took), 2))
    assert result.status == "timeout" and result.phase == "validation", result.error
    assert result.error.startswith("validation phase:") and "never returns" in result.error
    assert f"within {budget:g} s of CPU time" in result.error, result.error
    assert "long fit was not started" in result.error
    assert budget <= result.result.checkpoint_cpu_s < budget + 1.0, result.result
    assert fit(starter_program("car_racing"), car[1]).ok


def test_a_fit_that_cannot_end_within_its_limit_is_refused_after_two_epochs(car):
    """The two timed epochs of the validation phase show the least time early stopping needs;
    a program too slow for the limit is refused then, not killed at the end of it."""
    import time

    # twenty SVDs per forward: one was fast enough on a quick CI machine to finish all 1000 epochs
    source = _with_forward_prelude("for _ in range(20):\n            torch.linalg.svd(torch.ones(300, 300))")
    started = time.monotonic()
    result = fit_in_sandbox(source, "car_racing", car[1].inputs, car[1].actions,
                            {**IL, "max_epochs": 1000, "patience": 1000}, timeout_s=30.0)
    assert time.monotonic() - started < 25.0
    assert result.status == "fit_error" and result.phase == "validation", result.error
    assert "at least 1000 epochs" in result.error and "30 s limit" in result.error
    quick = fit(starter_program("car_racing"), car[1])
    assert quick.ok and quick.phase is None and quick.result.checkpoint_reached is True
    assert "checkpoint" not in quick.result.stdout, "the phase marker is not the program's output"


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


def test_progress_is_heard_per_epoch_and_a_cancelled_fit_stops_at_once(car):
    """The learner's FitProgram action reports epochs as feedback and honours a cancel: both
    ride on these two hooks of the sandboxed fit."""
    import threading
    import time

    _, demo = car
    heard: list[tuple[int, int]] = []
    cancel = threading.Event()

    def on_epoch(epoch: int, most: int) -> None:
        heard.append((epoch, most))
        if epoch == 3:
            cancel.set()

    config = {**IL, "max_epochs": 400, "patience": 400}
    started = time.monotonic()
    result = fit_in_sandbox(starter_program("car_racing"), "car_racing", demo.inputs, demo.actions, config,
                            timeout_s=300.0, on_epoch=on_epoch, cancel=cancel)
    assert result.status == "cancelled", (result.status, result.error)
    assert result.weights is None and "cancelled by the caller after" in result.error
    assert [e for e, _ in heard[:3]] == [1, 2, 3] and all(most == 400 for _, most in heard)
    assert len(heard) < 400 and time.monotonic() - started < 120.0

    finished: list[int] = []
    done = fit_in_sandbox(starter_program("car_racing"), "car_racing", demo.inputs, demo.actions, IL,
                          timeout_s=120.0, on_epoch=lambda epoch, _most: finished.append(epoch))
    assert done.status == "ok"
    assert finished == list(range(1, done.report["epochs"] + 1))
