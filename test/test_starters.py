"""The bundled starter programs: contract-following, simple, and fittable on one demonstration."""

from __future__ import annotations

import numpy as np
import pytest

from refine_core.analyst.offline.catalogue import render
from refine_core.learn.il import ILConfig, fit_il
from refine_core.policy.contract import build_policy
from refine_core.policy.programs import NoStarterProgramError, program_path, starter_program
from refine_core.policy.static_check import check_program_source
from refine_core.rollout.demo import record_demonstration
from refine_core.tasks.registry import get_task

TASKS = ("car_racing", "door_open")


@pytest.mark.parametrize("task_name", TASKS)
def test_starter_builds_and_passes_static_check(task_name: str) -> None:
    source = starter_program(task_name)
    check_program_source(source)
    spec = get_task(task_name).spec
    policy = build_policy(source, spec)
    assert sum(p.numel() for p in policy.parameters()) > 0
    assert program_path(task_name).read_text(encoding="utf-8") == source


@pytest.mark.parametrize("task_name", TASKS)
def test_starter_is_the_catalogue_root(task_name: str) -> None:
    # The offline analyst grows the starter edit by edit; both must be the same program.
    assert starter_program(task_name) == render(task_name, ())


def test_unknown_task_has_no_starter() -> None:
    with pytest.raises(NoStarterProgramError, match="LLM"):
        starter_program("moon_landing")
    with pytest.raises(NoStarterProgramError):
        program_path("no_such_program")


def test_door_starter_fits_one_demonstration() -> None:
    task = get_task("door_open")
    demo = record_demonstration(task, max_steps=150)
    policy = build_policy(starter_program("door_open"), task.spec)
    report = fit_il(policy, demo.inputs, demo.actions, ILConfig(max_epochs=200, progress=False),
                    spec=task.spec)
    assert report.best_val_nll < report.initial_val_nll
    # moving toward the handle and pulling it: the fitted gains keep the author's sign
    weights = report.weights
    gains = ("k_approach_xy", "k_approach_z", "k_pull")
    assert all(float(np.asarray(weights[k]).ravel()[0]) > 0 for k in gains)
