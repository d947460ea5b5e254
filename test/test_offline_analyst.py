"""The offline analyst: generated battery, catalogue edits, decisions, and real improvement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from refine_core.analyst.base import Decision
from refine_core.analyst.offline import OfflineAnalyst
from refine_core.analyst.offline.analyst import FOCUS_MARKER
from refine_core.analyst.offline.catalogue import (
    applied_edits,
    catalogue_for,
    parse_results,
    render,
)
from refine_core.learn.il import ILConfig, fit_il
from refine_core.loop import analyst_table
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
    edits = catalogue_for(task)
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
        assert applied_edits(source) == tuple(e.id for e in catalogue_for(task_name) if e.id in sub)
        seen.add(schema.keys)
    assert len(seen) == len(list(_subsets(task_name)))  # each edit changes the info schema


def test_edits_compose_on_the_revised_program() -> None:
    first, second = catalogue_for("car_racing")[:2]
    revised = second.apply(first.apply(starter_program("car_racing")))
    assert applied_edits(revised) == (first.id, second.id)
    assert "latent_corner_limit" in revised and "weight_k_steer_coast" in revised
    assert "weight_k_slip_slowdown" not in revised  # the planner it replaced is gone


@pytest.mark.parametrize("task_name", TASKS)
def test_the_template_without_edits_is_the_starter_as_written(task_name: str) -> None:
    # The bundled starter is the foreign program plus a header naming its origin; the
    # catalogue template adds only edit regions to it.
    starter = starter_program(task_name)
    assert render(task_name, ()) == starter
    header = starter.splitlines()[:3]
    assert header[0] == f"# refine-structure: {task_name}"
    assert "written independently from the generation prompt" in " ".join(header)


@pytest.fixture(scope="module")
def door_rollout():
    task = get_task("door_open")
    demo = record_demonstration(task, max_steps=120)
    source = starter_program("door_open")
    policy = build_policy(source, task.spec)
    fit_il(policy, demo.inputs, demo.actions, ILConfig(max_epochs=150, progress=False),
           spec=task.spec)
    results = run_episodes(task, policy, [200], mode="mean", max_steps=120, progress=False,
                           label_expert=True)
    # what the analyst reads: the published description's column names (door_x, not handle_x)
    return task, source, analyst_table(task.spec, demo.table), analyst_table(task.spec, concat_tables(results))


def _without_expert(table):
    return table[[c for c in table.columns if not c.startswith("expert_")]]


def test_battery_is_generated_from_the_schema(door_rollout) -> None:
    task, source, _, table = door_rollout
    analyst = OfflineAnalyst()
    schema = list(table.columns)
    answer = analyst.diagnose(task.spec.for_analyst(), source, schema)
    assert answer.ok and "not an LLM" in answer.reasoning
    compile(answer.code, "<battery>", "exec")
    assert answer.code == analyst.diagnose(task.spec.for_analyst(), source, schema).code
    assert "_sign_check, 'weight_k_approach_xy', 10.0" in answer.code
    # no column, no check
    fewer = analyst.diagnose(task.spec.for_analyst(), source,
                             [c for c in schema if c != "weight_k_approach_xy"]).code
    assert "sign.weight_k_approach_xy" not in fewer


def test_no_expert_columns_no_expert_checks(door_rollout) -> None:
    task, source, _, table = door_rollout
    schema = list(_without_expert(table).columns)
    answer = OfflineAnalyst().diagnose(task.spec.for_analyst(), source, schema)
    for marker in ("_expert_check", "_hotspot_check", "_disagreement_check", "expert_dx"):
        assert marker not in answer.code.split("# --- what the table holds")[1], marker
    assert "EXPERT = set()" in answer.code and "no expert relabels" in answer.reasoning
    with_expert = OfflineAnalyst().diagnose(task.spec.for_analyst(), source, list(table.columns))
    assert "_run('expert.dx'" in with_expert.code and "expert relabels are in" in with_expert.reasoning


@pytest.mark.parametrize("program", ["def broken(:", "", "class OpenDoorPolicy: pass"])
def test_battery_for_unreadable_programs_is_still_valid_python(door_rollout, program) -> None:
    task, _, _, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec.for_analyst(), program, list(table.columns)).code
    compile(code, "<battery>", "exec")
    assert "sign." not in code and "recon." not in code and "expert.dx" in code


def test_battery_runs_in_the_sandbox_on_a_real_rollout(door_rollout) -> None:
    task, source, demo_table, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec.for_analyst(), source, list(table.columns)).code
    result = run_diagnostics(code, table, demo_table, allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    parsed = parse_results(result.stdout)
    assert all(line.startswith("CHECK ") for line in result.stdout.strip().splitlines())
    for check in ("table", "metric.door_open", "door.approach", "door.pull",
                  "sign.weight_k_approach_xy", "recon.latent_gripper_opening", "saturation.dx",
                  "demofit.dx", "expert.dz", "hotspot.dz.handle_gripper_distance",
                  "corr.latent_closeness.dx", "shift.gripper_x", "shift.act_dx"):
        assert check in parsed, check
    assert parsed["recon.latent_gripper_opening"].status == "PASS"
    assert parsed["table"].number("expert") == 4
    assert parsed["metric.door_open"].number("min_handle_target") == pytest.approx(
        float(np.min(np.linalg.norm(
            table[["door_x", "door_y", "door_z"]].to_numpy()
            - table[["target_x", "target_y", "target_z"]].to_numpy(), axis=1))), rel=1e-3)


def test_battery_survives_missing_columns_and_nans(door_rollout) -> None:
    task, source, demo_table, table = door_rollout
    code = OfflineAnalyst().diagnose(task.spec.for_analyst(), source, list(table.columns)).code
    broken = table.drop(columns=["expert_dz", "weight_k_approach_xy"]).copy()
    broken.loc[broken.index[:10], "gripper_x"] = np.nan
    result = run_diagnostics(code, broken, None, allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    parsed = parse_results(result.stdout)
    assert parsed["expert.dz"].status == "SKIP"
    assert parsed["sign.weight_k_approach_xy"].status == "SKIP"
    assert parsed["shift.gripper_x"].status == "SKIP"  # no demonstration table
    assert parsed["door.approach"].status == "SKIP"


# What the battery prints for the fitted car starter without expert relabels (abridged).
CAR_STARTER_RESULTS = """\
CHECK table INFO rows=2000 episodes=2 columns=160 demo_rows=784 expert=0
CHECK metric.car_racing INFO mean_return=186.6 offtrack_frac=0.622 mean_speed=0.2652
CHECK offtrack PASS roll_per_1000=3 demo_per_1000=6.378 ratio=0.4704
CHECK bend.speed PASS roll_speed=0.3875 demo_speed=0.6526 ratio=0.5937
CHECK traction FAIL spin_excess=0.861 gas_hard_excess=0.9647
CHECK sign.weight_k_curvature_slowdown PASS initial=0.4 fitted=0.322 ratio=0.8051
CHECK sign.weight_k_offset_slowdown PASS initial=1 fitted=0.5783 ratio=0.5783
CHECK sign.weight_k_slip_slowdown FAIL initial=1 fitted=-0.4438 ratio=-0.4438
"""


def test_triggers_fire_from_checks_without_expert_columns() -> None:
    spec = get_task("car_racing").spec
    analyst = OfflineAnalyst()
    starter = starter_program("car_racing")
    first = analyst.revise(spec, starter, CAR_STARTER_RESULTS)
    assert first.kind == "program" and applied_edits(first.program) == ("car_corner_speed",)
    assert "sign.weight_k_slip_slowdown.ratio < 0 (measured -0.4438)" in first.reasoning
    assert "not an LLM" in first.reasoning and "pre-written" in first.reasoning
    assert "expert" not in first.reasoning.lower()
    assert first == analyst.revise(spec, starter, CAR_STARTER_RESULTS)  # deterministic
    # Still spinning with the new planner: cut the gas while steering.
    spinning = "CHECK traction FAIL spin_excess=0.8575 gas_hard_excess=0.9949\n"
    second = analyst.revise(spec, first.program, spinning)
    assert applied_edits(second.program) == ("car_corner_speed", "car_coast")
    # Grip restored but the car still leaves the track: the steering law is next.
    offtrack = ("CHECK traction PASS spin_excess=0.05 gas_hard_excess=0.1\n"
                "CHECK metric.car_racing INFO offtrack_frac=0.3\n")
    third = analyst.revise(spec, second.program, offtrack)
    assert applied_edits(third.program) == ("car_corner_speed", "car_coast", "car_pursuit")
    # Spinning cars are not given a new steering law (the pursuit trigger needs grip).
    assert analyst.revise(spec, second.program, offtrack.replace("0.05", "0.5")).kind == "stop"
    calm = ("CHECK traction PASS spin_excess=0.1 gas_hard_excess=0.1\n"
            "CHECK metric.car_racing INFO offtrack_frac=0.02\nCHECK offtrack PASS ratio=1.0\n")
    stop = analyst.revise(spec, second.program, calm)
    assert stop.kind == "stop" and "no trigger fired" in stop.reasoning
    done = analyst.revise(spec, third.program, calm)
    assert done.kind == "stop" and "already applied" in done.reasoning


def test_door_triggers_fire_from_demonstration_comparisons() -> None:
    spec = get_task("door_open").spec
    analyst = OfflineAnalyst()
    starter = starter_program("door_open")
    slow = ("CHECK metric.door_open INFO min_handle_target=0.0224 demo_min=0.0224 gap=0\n"
            "CHECK door.approach FAIL contact_ratio=1.655 wait_excess=17.5\n"
            "CHECK door.pull PASS lost_frac=0\n")
    first = analyst.revise(spec, starter, slow)
    assert applied_edits(first.program) == ("door_hover_release",)
    stuck = slow.replace("gap=0", "gap=0.4")
    second = analyst.revise(spec, first.program, stuck)
    assert applied_edits(second.program) == ("door_hover_release", "door_pull_follow")
    assert analyst.revise(spec, first.program, slow).kind == "stop"


def test_decisions_carry_their_exchange_and_read_earlier_results() -> None:
    spec = get_task("car_racing").spec
    analyst = OfflineAnalyst()
    starter = starter_program("car_racing")
    diag = analyst.diagnose(spec, starter, ["tile0_x", "mean_steer", "act_steer"])
    assert [m["role"] for m in diag.conversation] == ["system", "user", "assistant"]
    assert diag.code in diag.conversation[-1]["content"]
    # Nothing decides an edit yet: one focused re-run, asked inside the same exchange.
    first = analyst.revise(spec, starter, "CHECK table INFO expert=0\n",
                           conversation=diag.conversation)
    assert first.kind == "tests" and first.conversation[:3] == diag.conversation
    assert "expert" not in first.tests.split("# --- what the table holds")[1]
    compile(first.tests, "<focused>", "exec")
    # The re-run's results alone decide nothing, but with the earlier ones they do.
    focus = f"CHECK {FOCUS_MARKER} INFO checks=x\n"
    earlier = analyst.revise(spec, starter, CAR_STARTER_RESULTS, conversation=diag.conversation)
    assert earlier.kind == "program"
    again = analyst.revise(spec, starter, focus, conversation=earlier.conversation)
    assert again.kind == "program" and applied_edits(again.program) == ("car_corner_speed",)
    alone = analyst.revise(spec, starter, focus)
    assert alone.kind == "stop"


def test_missing_results_ask_for_focused_tests_once() -> None:
    spec = get_task("door_open").spec
    analyst = OfflineAnalyst()
    starter = starter_program("door_open")
    first = analyst.revise(spec, starter, "nothing parseable here")
    assert first.kind == "tests" and "door.approach" in first.reasoning
    compile(first.tests, "<focused>", "exec")
    assert "_run('door.approach'" in first.tests and "_run('expert." not in first.tests
    again = analyst.revise(spec, starter, f"CHECK {FOCUS_MARKER} INFO checks=x\n")
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
    decision = analyst.revise(spec, "class PendulumPolicy: pass", "",
                              conversation=battery.conversation)
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
    revised = catalogue_for("car_racing")[0].apply(first.program)
    back = analyst.generate(spec, failed_program=revised, error="FitError: NaN loss",
                            context=[{"role": "user", "content": "earlier"}])
    assert back.program == first.program and "car_corner_speed" in back.reasoning
    assert back.conversation[0] == {"role": "user", "content": "earlier"}
    assert "NaN loss" in back.conversation[-2]["content"]


def _fit_eval(task, source, demo, seeds):
    policy = build_policy(source, task.spec)
    fit_il(policy, demo.inputs, demo.actions, ILConfig(progress=False), spec=task.spec)
    policy.eval()
    return policy, run_episodes(task, policy, seeds, mode="mean", progress=False,
                                label_expert=False)


def _one_round(analyst, task, demo, program, conversation=None):
    """Fit, roll out without expert relabels, run the battery in the sandbox, revise."""
    spec = task.spec.for_analyst()  # as the loop does: the analyst's names, tables renamed to them
    _, rollouts = _fit_eval(task, program, demo, spec.diagnostic_seeds[:2])
    table = analyst_table(task.spec, concat_tables(rollouts))
    assert not any(c.startswith("expert_") for c in table.columns)
    diag = analyst.diagnose(spec, program, list(table.columns))
    result = run_diagnostics(diag.code, table, analyst_table(task.spec, demo.table), allow_weak_isolation=True)
    assert result.status == "ok", result.stderr_tail
    return analyst.revise(spec, program, result.stdout, conversation=diag.conversation)


@pytest.mark.slow
@pytest.mark.parametrize("task_name, edit", [("car_racing", "car_corner_speed"),
                                             ("door_open", "door_hover_release")])
def test_offline_analyst_revises_the_bundled_starters_without_expert_columns(
    task_name: str, edit: str
) -> None:
    task = get_task(task_name)
    analyst = OfflineAnalyst()
    demo = record_demonstration(task)
    starter = analyst.generate(task.spec).program
    decision = _one_round(analyst, task, demo, starter)
    assert decision.kind == "program", decision.reasoning
    assert applied_edits(decision.program) == (edit,)
    assert "pre-written" in decision.reasoning


@pytest.mark.slow
def test_offline_refinement_of_the_car_beats_its_starter() -> None:
    task = get_task("car_racing")
    spec = task.spec
    analyst = OfflineAnalyst()
    demo = record_demonstration(task)
    starter = program = analyst.generate(spec).program
    for _ in range(len(catalogue_for("car_racing")) + 1):
        decision = _one_round(analyst, task, demo, program)
        if decision.kind != "program":
            break
        program = decision.program
    assert {"car_corner_speed", "car_coast"} <= set(applied_edits(program))
    seeds = spec.selection_seeds[:2]
    before = np.mean([r.summary["metric"] for r in _fit_eval(task, starter, demo, seeds)[1]])
    after = np.mean([r.summary["metric"] for r in _fit_eval(task, program, demo, seeds)[1]])
    assert after > before + 200, (before, after)
