"""The offline analyst's diagnostic battery: analysis code generated from a program and a schema.

Why generated and not a fixed script: which checks make sense depends on the program (which
weights it reports and what sign its author expected, which latents are closed-form
combinations that can be recomputed) and on the table's columns, and METHOD.md has the
diagnostics written from the program and the column names only, before any rollout number is
seen. The output is plain Python over `df` (the rollout) and `demo` (the demonstration) using
NumPy, pandas and SciPy.

The reference for "how should it behave" is the demonstration, which every run has; expert
relabels (expert_<action> columns) are privileged information that is switched off by
default, so checks that need them are generated only when the schema has them, and every
check the catalogue triggers on has a demonstration-based form. Every check prints one line

    CHECK <id> <PASS|FAIL|INFO|SKIP|ERROR> key=value ...

and runs inside its own guard, so a missing column or a NaN makes that one line SKIP or
ERROR instead of ending the script.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from refine_core.analyst.offline.introspect import read_program
from refine_core.rollout.schema import WEIGHT_PREFIX, RolloutSchema, is_latent, is_weight
from refine_core.tasks.spec import TaskSpec

CODE_FILE = Path(__file__).with_name("battery_code.py")
"""The battery's helpers and generic checks (sandbox code kept in a real `.py` file)."""
TASK_CODE_FILE = "diagnostic_checks.py"
"""A task folder's own checks (sandbox code), beside its `diagnostics.py` (the calls)."""
BEGIN, END = "# ---- sandbox code begins ----", "# ---- sandbox code ends ----"


def sandbox_code(text: str) -> str:
    """The lines of a sandbox-code file between its two marker lines: what the sandbox runs."""
    lines = text.splitlines()
    try:
        start, stop = lines.index(BEGIN), lines.index(END)
    except ValueError:
        raise ValueError(f"a sandbox-code file needs the lines {BEGIN!r} and {END!r}") from None
    return "\n".join(lines[start + 1:stop]) + "\n"


def _families(names: RolloutSchema) -> dict[str, dict[str, str]]:
    """{family: {action: column}} for the families the battery's code reads."""
    return {family: dict(zip(names.action_names, names.family(family), strict=True))
            for family in ("mean", "act", "expert")}


def _quote(name: str) -> str:
    return repr(str(name))


def _task_features(spec: TaskSpec) -> tuple[dict[str, str], list[str], str]:
    """(state features for the hot spots as expressions, the task's helper code, its check
    calls), from the task's own folder (`diagnostics.py` and the sandbox code of
    `diagnostic_checks.py`) when `spec` is the spec of a registered task with the same
    columns; else only a generic metric."""
    from refine_core.tasks.registry import task_file, task_part

    diagnostics = task_part(spec.name, "diagnostics") if _registered_task(spec) else None
    features = diagnostics.features(spec) if hasattr(diagnostics, "features") else {}
    calls = diagnostics.check_calls(spec) if hasattr(diagnostics, "check_calls") else []
    code = task_file(spec.name, TASK_CODE_FILE) if calls else None
    helpers = [sandbox_code(code)] if code is not None else []
    if not calls:
        calls = ["_run('metric.generic', _metric_generic)"]
    return features, helpers, "\n".join(calls)


def _registered_task(spec: TaskSpec) -> bool:
    """Whether `spec` describes a registered task, under the same description variant, whose
    analyst column names are `spec`'s (the names the battery's code will read)."""
    from refine_core.tasks.registry import UnknownDescriptionError, UnknownTaskError, get_task

    try:
        task = get_task(spec.name, spec.description_variant)
    except (UnknownTaskError, UnknownDescriptionError):
        return False
    return task.spec.for_analyst().observation_columns == spec.observation_columns


@cache
def _prelude() -> str:
    return sandbox_code(CODE_FILE.read_text(encoding="utf-8"))


def diagnostic_battery(spec: TaskSpec, program: str, schema: list[str]) -> str:
    """Analysis code for `program`'s rollout table with columns `schema`.

    Only the program text, the task spec and the column names are read; no rollout values.
    Checks whose columns are absent from `schema` are not generated at all; checks that meet a
    missing column at run time print a SKIP line.
    """
    spec = spec.for_analyst()  # the battery's code reads the analyst's column names
    columns = [str(c) for c in schema]
    present = set(columns)
    facts = read_program(program or "", spec)
    weights = [c for c in columns if is_weight(c)]
    latents = [c for c in columns if is_latent(c)]
    observations = [c for c in spec.observation_columns if c in present]
    actions = [(a.name, float(a.low), float(a.high)) for a in spec.actions]
    names = RolloutSchema.for_task(spec)
    mean, act = dict(zip(spec.action_names, names.mean(), strict=True)), dict(zip(spec.action_names, names.act(), strict=True))
    expert = [a for a, column in zip(spec.action_names, names.expert_columns(), strict=True) if column in present]
    features, helpers, metric_call = _task_features(spec)
    # The program's own features: closed-form latents of the observation alone (no weights),
    # which can be recomputed on the demonstration's states.
    own = {k: v for k, v in facts.reconstructions.items() if k in present and WEIGHT_PREFIX not in v}

    lines = [
        "# Diagnostic battery written by the offline (rule-based) analyst from the program and",
        f"# the column schema of task {spec.name!r}; it reads `df` (rollout) and `demo`.",
        _prelude(),
        *helpers,
        "",
        "",
        "# Observation columns present in the table (searched for disagreement correlates).",
        f"OBSERVATIONS = {observations!r}",
        "# Actions with expert relabels in the table (empty unless they were switched on).",
        f"EXPERT = {set(expert)!r}" if expert else "EXPERT = set()",
        "# Each action's column per family (the rollout schema's names).",
        f"COLUMNS = {_families(names)!r}",
        "",
        "# --- what the table holds and how the task went",
        "_run('table', _table_check)",
        metric_call,
        "",
        "# --- fitted weights against the sign their author expected",
    ]
    for key in weights:
        if key in facts.initial:
            lines.append(f"_run({_quote('sign.' + key)}, _sign_check, {_quote(key)}, {facts.initial[key]!r})")
    lines.append("")
    lines.append("# --- latents recomputed from their declared inputs")
    for key in latents:
        expr = facts.reconstructions.get(key)
        if expr is not None:
            lines.append(f"_run({_quote('recon.' + key)}, _recon_check, {_quote(key)}, lambda: {expr})")
    lines.append("")
    lines.append("# --- actions: saturation and oscillation against the demonstration, and how much of")
    lines.append("# --- the demonstrated action the program's own features explain")
    own_dict = "{" + ", ".join(f"{_quote(k)}: lambda: {v}" for k, v in sorted(own.items())) + "}"
    for name, low, high in actions:
        if act[name] in present and mean[name] in present:
            lines.append(f"_run({_quote('saturation.' + name)}, _saturation_check, {_quote(name)}, {low!r}, {high!r})")
        if mean[name] in present:
            lines.append(f"_run({_quote('temporal.' + name)}, _temporal_check, {_quote(name)})")
            if own:
                lines.append(f"_run({_quote('demofit.' + name)}, _demofit_check, {_quote(name)}, {own_dict})")
    if expert:
        lines.append("")
        lines.append("# --- expert relabels (switched on for this run): agreement on the policy's own states")
    for name, low, high in actions:
        if name in expert and mean[name] in present:
            lines.append(f"_run({_quote('expert.' + name)}, _expert_check, {_quote(name)}, {low!r}, {high!r})")
            for feature, expr in features.items():
                check = f"hotspot.{name}.{feature}"
                lines.append(
                    f"_run({_quote(check)}, _hotspot_check, {_quote(name)}, {low!r}, {high!r}, lambda: {expr})"
                )
            lines.append(
                f"_run({_quote('disagreement.' + name)}, _disagreement_check, {_quote(name)}, "
                f"{low!r}, {high!r}, OBSERVATIONS)"
            )
    lines.append("")
    lines.append("# --- latents against actions")
    for latent in latents:
        for name, _, _ in actions:
            if mean[name] in present:
                check = f"corr.{latent}.{name}"
                lines.append(f"_run({_quote(check)}, _corr_check, {_quote(latent)}, {_quote(name)})")
    lines.append("")
    lines.append("# --- rollout against demonstration: states visited and actions taken")
    for column in observations:
        lines.append(f"_run({_quote('shift.' + column)}, _shift_check, {_quote(column)})")
    for name, _, _ in actions:
        if act[name] in present:
            lines.append(f"_run({_quote('shift.' + act[name])}, _shift_check, {_quote(act[name])})")
    return "\n".join(lines) + "\n"
