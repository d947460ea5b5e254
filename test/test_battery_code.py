"""The offline battery's sandbox code lives in real `.py` files (ruff checks them; the
layering test imports them): `refine_core/analyst/offline/battery_code.py` (helpers and
generic checks) and each task's `diagnostic_checks.py`. The battery sends the lines between
their marker lines as text; here that code runs in this process, as the sandbox composes it,
on real rollout and demonstration tables."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

from refine_core.analyst.offline import battery, battery_code
from refine_core.analyst.offline.catalogue import parse_results
from refine_core.loop import analyst_table
from refine_core.policy.contract import build_policy, validate_policy
from refine_core.policy.programs import starter_program
from refine_core.rollout.demo import record_demonstration
from refine_core.rollout.runner import run_episode
from refine_core.rollout.schema import RolloutSchema
from refine_core.tasks import get_task
from refine_core.tasks.registry import task_file, task_part

STEPS = 60


@pytest.fixture(scope="module", params=["car_racing", "door_open", "pendulum"])
def tables(request):
    """(task, analyst spec, rollout table, demonstration table, starter source) of one task."""
    task = get_task(request.param)
    source = starter_program(task.spec.name)
    policy = build_policy(source, task.spec)
    demo = record_demonstration(task, max_steps=STEPS)
    roll = run_episode(task, policy, task.spec.diagnostic_seeds[0], mode="mean", max_steps=STEPS,
                       ids={"episode": 0, "seed": task.spec.diagnostic_seeds[0]}).table
    info = validate_policy(policy, task.spec)
    return task, info, analyst_table(task.spec, roll), analyst_table(task.spec, demo.table), source


def _printed(fn, *args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue()


def test_the_battery_sends_the_code_between_the_markers_and_no_stand_in(tables):
    task, info, _, _, source = tables
    schema = RolloutSchema.for_task(task.spec.for_analyst(), info.keys).columns
    script = battery.diagnostic_battery(task.spec, source, schema)
    assert battery.sandbox_code(battery.CODE_FILE.read_text()) in script
    own = task_file(task.spec.name, battery.TASK_CODE_FILE)
    assert (own is not None) == (task.spec.name != "pendulum")
    if own is not None:
        assert battery.sandbox_code(own) in script
    assert "Stand-ins" not in script and "df = demo = None" not in script and battery.BEGIN not in script
    with pytest.raises(ValueError, match="needs the lines"):
        battery.sandbox_code("print(1)\n")


def test_the_generic_checks_judge_real_tables(tables, monkeypatch):
    """The helpers module, loaded as a module, with the sandbox's names set on it."""
    task, info, roll, demo, _ = tables
    monkeypatch.setattr(battery_code, "df", roll)
    monkeypatch.setattr(battery_code, "demo", demo)
    monkeypatch.setattr(battery_code, "EXPERT", set())
    names = RolloutSchema.for_task(task.spec)
    monkeypatch.setattr(battery_code, "COLUMNS", {f: dict(zip(names.action_names, names.family(f), strict=True))
                                                  for f in ("mean", "act", "expert")})
    action = task.spec.actions[0]
    column = task.spec.for_analyst().observation_columns[0]
    out = "".join(_printed(battery_code._run, *call) for call in (
        ("table", battery_code._table_check),
        ("metric.generic", battery_code._metric_generic),
        (f"saturation.{action.name}", battery_code._saturation_check, action.name, action.low, action.high),
        (f"temporal.{action.name}", battery_code._temporal_check, action.name),
        (f"shift.{column}", battery_code._shift_check, column),
        ("missing", battery_code._shift_check, "no_such_column"),
    ))
    results = parse_results(out)
    assert results["table"].values["rows"] == STEPS and results["table"].values["demo_rows"] == STEPS
    assert results["metric.generic"].number("mean_return") == pytest.approx(float(roll["reward"].sum()), rel=1e-3)  # 4 digits
    assert results[f"saturation.{action.name}"].status in ("PASS", "FAIL")
    assert results[f"shift.{column}"].status in ("PASS", "FAIL", "INFO")
    assert results["missing"].status == "SKIP" and results["missing"].values["missing"] == "no_such_column"
    assert not [r for r in results.values() if r.status == "ERROR"], out
    # the same column moved far from the demonstration's is a shift
    monkeypatch.setattr(battery_code, "df", roll.assign(**{column: roll[column] + 100.0}))
    assert parse_results(_printed(battery_code._run, "s", battery_code._shift_check, column))["s"].status == "FAIL"


def test_each_task_s_own_checks_run_on_its_tables_as_the_sandbox_composes_them(tables):
    """Helpers, then the task's checks, then its calls, in one namespace: the script's order."""
    task, _, roll, demo, _ = tables
    calls = getattr(task_part(task.spec.name, "diagnostics"), "check_calls", None)
    if calls is None:
        pytest.skip(f"{task.spec.name} has no checks of its own (the battery runs the generic ones)")
    spec = task.spec.for_analyst()
    namespace = {"df": roll, "demo": demo, "np": np}
    exec(battery.sandbox_code(battery.CODE_FILE.read_text()), namespace)  # noqa: S102
    exec(battery.sandbox_code(task_file(task.spec.name, battery.TASK_CODE_FILE)), namespace)  # noqa: S102
    out = _printed(exec, "\n".join(calls(spec)), namespace)
    results = parse_results(out)
    ids = [line.split("'")[1] for line in calls(spec)]
    assert sorted(results) == sorted(ids), out
    assert not [r for r in results.values() if r.status == "ERROR"], out
    metric = results[f"metric.{task.spec.name}"]
    assert metric.status == "INFO" and len(metric.values) >= 3
