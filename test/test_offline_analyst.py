"""The offline analyst: generated battery, catalogue edits, decisions, and real improvement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from refine_core.analyst.base import Decision
from refine_core.analyst.offline import OfflineAnalyst
from refine_core.analyst.offline.analyst import FOCUS_MARKER
from refine_core.analyst.offline.catalogue import (
    CATALOGUE,
    applied_edits,
    parse_results,
    render,
)
from refine_core.learn.il import ILConfig, fit_il
from refine_core.policy.contract import build_policy, validate_policy
from refine_core.policy.programs import starter_program
from refine_core.policy.static_check import check_program_source
from refine_core.rollout.demo import record_demonstration
from refine_core.rollout.runner import concat_tables, run_episodes
from refine_core.sandbox.diagnostics import run_diagnostics
from refine_core.tasks.registry import get_task
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

TASKS = ("car_racing", "door_open")


def _subsets(task: str):
    edits = CATALOGUE[task]
    ids = [e.id for e in edits]
    needs = {e.id: e.requires for e in edits}
    for r in range(len(ids) + 1):
        for sub in itertools.combinations(ids, r):
            if all(q in sub for e in sub for q in needs[e]):
                yield sub


@pytest.mark.parametrize("task_name", TASKS)
def test_every_edit_combination_follows_the_contract(task_name: str) -> None:
    spec = get_task(task_name).spec
    seen = set()
    for sub in _subsets(task_name):
        source = render(task_name, sub)
        check_program_source(source)
        schema = validate_policy(build_policy(source, spec), spec)
        assert applied_edits(source) == tuple(e.id for e in CATALOGUE[task_name] if e.id in sub)
        seen.add(schema.keys)
    assert len(seen) == len(list(_subsets(task_name)))  # each edit changes the info schema


def test_edits_compose_on_the_revised_program() -> None:
    first, second = CATALOGUE["car_racing"][:2]
    revised = second.apply(first.apply(starter_program("car_racing")))
    assert applied_edits(revised) == (first.id, second.id)
    assert "latent_heading_near" in revised and "latent_target_speed" in revised


@pytest.fixture(scope="module")
def door_rollout():
    task = get_task("door_open")
    demo = record_demonstration(task, max_steps=120)
    source = starter_program("door_open")
    policy = build_policy(source, task.spec)
    fit_il(policy, demo.inputs, demo.actions, ILConfig(max_epochs=150, progress=False),
           spec=task.spec)
    results = run_episodes(task, policy, [200], mode="mean", max_steps=120, progress=False)
    return task, source, demo.table, concat_tables(results)


def test_battery_is_generated_from_the_schema(door_rollout) -> None:
    task, source, _, table = door_rollout
    analyst = OfflineAnalyst()
    schema = list(table.columns)
    answer = analyst.diagnose(task.spec, source, schema)
    assert answer.ok and "not an LLM" in answer.reasoning
    compile(answer.code, "<battery>", "exec")
    assert answer.code == analyst.diagnose(task.spec, source, schema).code
    assert "_sign_check, 'weight_k_x', 10.0" in answer.code
    # no column, no check
    fewer = analyst.diagnose(task.spec, source, [c for c in schema if c != "weight_k_x"]).code
    assert "sign.weight_k_x" not in fewer


@pytest.mark.parametrize("program", ["def broken(:", "", "class OpenDoorPolicy: pass"])
def test_battery_for_unreadable_programs_is_still_valid_python(door_rollout, program) -> None:
    task, _, _, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec, program, list(table.columns)).code
    compile(code, "<battery>", "exec")
    assert "sign." not in code and "recon." not in code and "expert.dx" in code


def test_battery_runs_in_the_sandbox_on_a_real_rollout(door_rollout) -> None:
    task, source, demo_table, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec, source, list(table.columns)).code
    result = run_diagnostics(code, table, demo_table, allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    parsed = parse_results(result.stdout)
    assert all(line.startswith("CHECK ") for line in result.stdout.strip().splitlines())
    for check in ("table", "metric.door_open", "sign.weight_k_x", "recon.latent_dx",
                  "saturation.dx", "expert.dz", "hotspot.dz.handle_gripper_distance",
                  "corr.latent_dx.dx", "shift.gripper_x"):
        assert check in parsed, check
    assert parsed["recon.latent_dx"].status == "PASS"
    assert parsed["metric.door_open"].number("min_handle_target") == pytest.approx(
        float(np.min(np.linalg.norm(
            table[["handle_x", "handle_y", "handle_z"]].to_numpy()
            - table[["target_x", "target_y", "target_z"]].to_numpy(), axis=1))), rel=1e-3)


def test_battery_survives_missing_columns_and_nans(door_rollout) -> None:
    task, source, demo_table, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec, source, list(table.columns)).code
    broken = table.drop(columns=["expert_dz", "weight_k_x"]).copy()
    broken.loc[broken.index[:10], "gripper_x"] = np.nan
    result = run_diagnostics(code, broken, None, allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    parsed = parse_results(result.stdout)
    assert parsed["expert.dz"].status == "SKIP"
    assert parsed["sign.weight_k_x"].status == "SKIP"
    assert parsed["shift.gripper_x"].status == "SKIP"  # no demonstration table


def test_trigger_picks_the_first_firing_edit() -> None:
    spec = get_task("car_racing").spec
    analyst = OfflineAnalyst()
    starter = starter_program("car_racing")
    results = "CHECK metric.car_racing INFO mean_return=-60 offtrack_frac=0.9\n"
    decision = analyst.revise(spec, starter, "", results)
    assert decision.kind == "program" and applied_edits(decision.program) == ("car_lookahead",)
    assert decision == analyst.revise(spec, starter, "", results)  # deterministic
    # with the lookahead in place, brake disagreement calls for the speed controller
    results = ("CHECK metric.car_racing INFO offtrack_frac=0.5\n"
               "CHECK expert.brake FAIL rmse=0.2 r=nan\n")
    second = analyst.revise(spec, decision.program, "", results)
    assert applied_edits(second.program) == ("car_lookahead", "car_speed")
    # nothing fires -> stop
    calm = ("CHECK expert.steer PASS r=0.95\nCHECK expert.brake PASS rmse=0.01\n"
            "CHECK expert.gas PASS rmse=0.1 r=0.9\nCHECK metric.car_racing INFO offtrack_frac=0\n"
            "CHECK hotspot.steer.heading_ahead INFO r_err=0.1\nCHECK hotspot.gas.bend INFO r_err=0\n"
            "CHECK hotspot.steer.yaw_rate INFO r_err=0.05\nCHECK temporal.steer INFO flip_ratio=1\n")
    stop = analyst.revise(spec, starter, "", calm)
    assert stop.kind == "stop" and "no trigger fired" in stop.reasoning


def test_missing_results_ask_for_focused_tests_once() -> None:
    spec = get_task("door_open").spec
    analyst = OfflineAnalyst()
    starter = starter_program("door_open")
    first = analyst.revise(spec, starter, "", "nothing parseable here")
    assert first.kind == "tests" and "expert.dz" in first.reasoning
    compile(first.tests, "<focused>", "exec")
    again = analyst.revise(spec, starter, "", f"CHECK {FOCUS_MARKER} INFO checks=x\n")
    assert again.kind == "stop"


def _toy_spec() -> TaskSpec:
    return TaskSpec(
        name="pendulum_toy", env_id="none", description="swing up", policy_class="PendulumPolicy",
        inputs=(InputSpec("obs", (3,), ("cos_theta", "sin_theta", "omega")),),
        actions=(ActionSpec("torque", -2.0, 2.0),),
        metric=MetricSpec("return", True), episode_steps=200,
    )


def test_unknown_task_needs_an_llm_endpoint() -> None:
    spec = _toy_spec()
    analyst = OfflineAnalyst()
    answer = analyst.generate(spec)
    assert answer.program is None and "LLM endpoint" in answer.error
    battery = analyst.diagnose(spec, "class PendulumPolicy: pass", ["cos_theta", "mean_torque",
                                                                   "act_torque", "reward"])
    assert battery.ok and "metric.generic" in battery.code
    compile(battery.code, "<battery>", "exec")
    decision = analyst.revise(spec, "class PendulumPolicy: pass", battery.code, "")
    assert isinstance(decision, Decision) and decision.kind == "stop"
    assert "LLM endpoint" in decision.reasoning


def test_generate_falls_back_to_a_safe_program_after_an_error() -> None:
    spec = get_task("car_racing").spec
    analyst = OfflineAnalyst()
    first = analyst.generate(spec)
    assert first.program == starter_program("car_racing") and "not an LLM" in first.reasoning
    retry = analyst.generate(spec, failed_program=first.program, error="FitError: NaN loss")
    assert retry.ok and "NaN loss" in retry.reasoning
    build_policy(retry.program, spec)
    assert analyst.generate(spec, failed_program=retry.program, error="boom").error
    revised = CATALOGUE["car_racing"][0].apply(first.program)
    back = analyst.generate(spec, failed_program=revised, error="FitError: NaN loss")
    assert back.program == first.program and "car_lookahead" in back.reasoning


def _fit_eval(task, source, demo, seeds):
    policy = build_policy(source, task.spec)
    fit_il(policy, demo.inputs, demo.actions, ILConfig(progress=False), spec=task.spec)
    policy.eval()
    return policy, run_episodes(task, policy, seeds, mode="mean", progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("task_name", TASKS)
def test_first_revision_improves_the_metric(task_name: str) -> None:
    task = get_task(task_name)
    spec = task.spec
    analyst = OfflineAnalyst()
    demo = record_demonstration(task)
    starter = analyst.generate(spec).program
    policy, diag = _fit_eval(task, starter, demo, spec.diagnostic_seeds[:1])
    table = concat_tables(diag)
    code = analyst.diagnose(spec, starter, list(table.columns)).code
    result = run_diagnostics(code, table, demo.table, allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    decision = analyst.revise(spec, starter, code, result.stdout)
    assert decision.kind == "program", decision.reasoning
    seeds = spec.selection_seeds[:2]
    before = np.mean([r.summary["metric"] for r in _fit_eval(task, starter, demo, seeds)[1]])
    after = np.mean([r.summary["metric"] for r in _fit_eval(task, decision.program, demo, seeds)[1]])
    assert spec.metric.better(after, before), (before, after)
