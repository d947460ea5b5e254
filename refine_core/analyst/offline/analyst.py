"""The offline analyst: deterministic, rule-based, no network, and plain about not being an LLM.

Why it exists: the method must run (and be tested, and demoed) where no model endpoint is
configured. For the bundled tasks it starts from the bundled starter program, writes the
generated diagnostic battery, and revises by picking the first catalogue edit whose trigger
fires on the printed results. Its revisions are pre-written programs for the two bundled
tasks, so a run with it demonstrates the machinery and is never evidence for the method.
Everything it knows about a program's history is in the program text (`# refine-edit:`
lines) and in the conversation it is handed back, so the same inputs give the same answer.

It needs no expert relabels: its triggers read checks against the demonstration, and the
expert checks appear in its battery only when the table has expert_<action> columns.
Its conversations are records of what it was given and what it answered (no model reads
them); a continued `revise` reads the earlier results from them.
"""

from __future__ import annotations

from refine_core.analyst.base import (
    Analyst,
    Conversation,
    Decision,
    DiagnosticsAnswer,
    ProgramAnswer,
)
from refine_core.analyst.offline.battery import diagnostic_battery
from refine_core.analyst.offline.catalogue import (
    CheckResult,
    Edit,
    applied_edits,
    catalogue_for,
    parse_results,
    program_structure,
    render,
)
from refine_core.analyst.offline.introspect import info_keys
from refine_core.rollout.schema import OUTCOME_COLUMNS, action_column, family_columns
from refine_core.tasks.spec import TaskSpec

IDENTITY = "Offline rule-based analyst (deterministic, no network; this is not an LLM)."
PREWRITTEN = (
    "Its revisions are pre-written programs from a catalogue for the two bundled tasks, "
    "chosen by fixed rules; they are not analysis and not LLM output."
)
RESULTS_HEADER = "Printed results:"
NEEDS_LLM = (
    "the offline analyst has no starter program or edit catalogue for task {task!r}; "
    "an LLM endpoint is needed (configure --analyst openai with a model, base URL and key)"
)
NO_CATALOGUE = (
    "the offline analyst has no catalogue of edits for task {task!r}, so it stops after "
    "diagnosing; revising the program needs an LLM endpoint (configure --analyst openai)"
)
FOCUS_MARKER = "focus.requested"
SAFE_MARKER = "# refine-structure: safe"


def safe_program(spec: TaskSpec) -> str:
    """The simplest contract-following program for `spec`: a constant action (each action's
    mid-range) with a learned diagonal scale. It cannot fail to build or fit, so it is the
    fallback when a richer program did."""
    args = ", ".join(s.name for s in spec.inputs)
    first = spec.inputs[0].name
    mids = ", ".join(repr(float((a.low + a.high) / 2.0)) for a in spec.actions)
    n = len(spec.actions)
    weights = "\n".join(
        f'            "weight_mean_{_key(a.name)}": self.action_mean[{i}:{i + 1}],'
        for i, a in enumerate(spec.actions)
    )
    return f'''{SAFE_MARKER}
"""Fallback policy: a constant action per dimension (no state dependence)."""

import torch
from torch import nn


class {spec.policy_class}(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        # Mid-range of each action's bounds.
        self.action_mean = nn.Parameter(torch.tensor([{mids}]))
        self.log_std = nn.Parameter(torch.full(({n},), -1.0))

    def forward(self, {args}):
        batch = torch.ones_like(torch.nan_to_num({first}).reshape({first}.shape[0], -1)[:, 0])
        mean = batch[:, None] * self.action_mean[None, :]
        scale_tril = torch.diag_embed(torch.exp(self.log_std).expand_as(mean))
        info = {{
{weights}
            "latent_constant": batch,
        }}
        return mean, scale_tril, info
'''


def _task_starter(task_name: str) -> str | None:
    """The starter program a registered task ships with (its folder's `programs/starter.py`), if any."""
    from refine_core.policy.programs import find_starter

    return find_starter(task_name)


def _key(name: str) -> str:
    cleaned = "".join(c if c.isalnum() else "_" for c in name.lower())
    return cleaned.strip("_") or "action"


class OfflineAnalyst(Analyst):
    name = "offline"
    is_llm = False
    reads_demonstration = True  # its catalogue triggers read checks against the demonstration

    # -- generation -------------------------------------------------------------------------
    def generate(
        self,
        spec: TaskSpec,
        *,
        failed_program: str | None = None,
        error: str | None = None,
        context: Conversation | None = None,
    ) -> ProgramAnswer:
        # `context` is not needed: what a rule-based repair depends on (the edits applied) is
        # written in the failed program itself.
        answer = self._generate(spec, failed_program=failed_program, error=error)
        ask = (
            f"Write the first program for task {spec.name}."
            if failed_program is None and error is None
            else f"The program failed to build or fit: {error or 'no error text'}"
        )
        answer.conversation = _exchange(
            context if failed_program is not None or error is not None else None,
            ask,
            _with_code(answer.reasoning if answer.program else f"{answer.reasoning}\n{answer.error}",
                       answer.program),
        )
        return answer

    def _generate(
        self, spec: TaskSpec, *, failed_program: str | None, error: str | None
    ) -> ProgramAnswer:
        if not catalogue_for(spec.name):
            starter = _task_starter(spec.name)
            if starter is None:
                return ProgramAnswer(
                    program=None,
                    reasoning=f"{IDENTITY} It cannot write a program for a task it does not know.",
                    error=NEEDS_LLM.format(task=spec.name),
                )
            if failed_program is None:
                return ProgramAnswer(
                    program=starter,
                    reasoning=(
                        f"{IDENTITY} Starting from the starter program that task {spec.name} "
                        f"ships with; {NO_CATALOGUE.format(task=spec.name)}."
                    ),
                )
        if failed_program is None:
            return ProgramAnswer(
                program=render(spec.name, ()),
                reasoning=(
                    f"{IDENTITY} Starting from the bundled starter program for {spec.name}, a "
                    "zero-shot program written independently from the generation prompt."
                ),
            )
        if failed_program.startswith(SAFE_MARKER):
            return ProgramAnswer(
                program=None,
                reasoning=f"{IDENTITY} Even the constant-action fallback failed; nothing simpler exists.",
                error=f"the fallback program failed: {error or 'unknown error'}",
            )
        applied = applied_edits(failed_program)
        if program_structure(failed_program) == spec.name and applied:
            # A revision failed: step back to the same structure without its last edit.
            return ProgramAnswer(
                program=render(spec.name, applied[:-1]),
                reasoning=(
                    f"{IDENTITY} The revised program failed ({error or 'no error text'}). A "
                    f"rule-based analyst cannot repair code, so it withdraws the last edit "
                    f"{applied[-1]!r} and returns the simpler structure it was applied to."
                ),
            )
        return ProgramAnswer(
            program=safe_program(spec),
            reasoning=(
                f"{IDENTITY} The previous program failed ({error or 'no error text'}). A rule-based "
                "analyst cannot repair arbitrary code, so it falls back to the simplest safe "
                "program: a constant action per dimension, which always builds and fits."
            ),
        )

    # -- diagnostics ------------------------------------------------------------------------
    def diagnose(self, spec: TaskSpec, program: str, schema: list[str], *, demo: bool = True) -> DiagnosticsAnswer:
        columns = [str(c) for c in schema]
        code = diagnostic_battery(spec, program, columns)
        expert = sorted(family_columns(columns, "expert"))
        relabels = (
            f"expert relabels are in the table ({', '.join(expert)}), so expert-agreement checks "
            "are included"
            if expert
            else "there are no expert relabels, so every check compares the rollout with the "
            "demonstration and with the program's own intent"
        )
        if not demo:
            relabels += ("; the run gives the analysis code no demonstration table, so the checks that compare "
                         "with it print that it is missing and the catalogue edits they trigger cannot fire")
        reasoning = (
            f"{IDENTITY} Generated battery from the program and {len(columns)} column names "
            f"(no rollout numbers): weight signs against their initial signs, reconstruction "
            f"of closed-form latents, action saturation and oscillation against the "
            f"demonstration, how much of the demonstrated action the program's own features "
            f"explain, rollout-vs-demonstration shift of states and actions, task-specific "
            f"behaviour checks and the task metric; {relabels}."
        )
        ask = (
            f"Write diagnostics for task {spec.name}.\nProgram edits applied: "
            f"{', '.join(applied_edits(program)) or 'none'}\nColumns: {', '.join(columns)}"
        )
        return DiagnosticsAnswer(
            code=code,
            reasoning=reasoning,
            conversation=_exchange(None, ask, _with_code(reasoning, code)),
        )

    # -- revision ---------------------------------------------------------------------------
    def revise(
        self,
        spec: TaskSpec,
        program: str,
        results: str,
        *,
        conversation: Conversation | None = None,
        demo: bool = True,
    ) -> Decision:
        earlier = _earlier_results(conversation)
        decision = self._decide(spec, program, "\n".join([*earlier, results or ""]))
        text = f"DECISION: {_DECISION_WORD[decision.kind]}\n{decision.reasoning}"
        decision.conversation = _exchange(
            conversation, f"{RESULTS_HEADER}\n{results or ''}", _with_code(text, decision.program or decision.tests)
        )
        return decision

    def _decide(self, spec: TaskSpec, program: str, results: str) -> Decision:
        edits = catalogue_for(spec.name)
        if not edits:
            missing = NO_CATALOGUE if _task_starter(spec.name) is not None else NEEDS_LLM
            return Decision(
                kind="stop",
                reasoning=f"{IDENTITY} Diagnostics ran, but {missing.format(task=spec.name)}.",
                headline=f"{missing.format(task=spec.name)} (the offline analyst is not an LLM)",
            )
        if program_structure(program) != spec.name:
            return Decision(
                kind="stop",
                reasoning=(
                    f"{IDENTITY} The program was not built from the offline catalogue for "
                    f"{spec.name}, so no catalogue edit applies; revising it needs an LLM endpoint."
                ),
                headline="the program is not from the offline catalogue, so no catalogue edit applies",
            )
        parsed = parse_results(results)
        applied = applied_edits(program)
        summary = _summary(parsed)
        waiting: list[tuple[Edit, list[str]]] = []
        for edit in edits:
            if not edit.eligible(applied):
                continue
            fires, held, missing = edit.trigger.evaluate(parsed)
            if fires:
                return Decision(
                    kind="program",
                    program=edit.apply(program),
                    reasoning=(
                        f"{IDENTITY} {PREWRITTEN} {summary} Applying catalogue edit {edit.id!r} "
                        f"because {'; '.join(held)}. {edit.description}"
                    ),
                    headline=f"catalogue edit {edit.id!r} because {'; '.join(held)}",
                )
            if missing and len(missing) == len(edit.trigger.conditions()):
                waiting.append((edit, missing))
        if waiting and FOCUS_MARKER not in parsed:
            checks = sorted({m.split(" ")[0].rsplit(".", 1)[0] for _, ms in waiting for m in ms})
            table = parsed.get("table")
            expert = bool(table is not None and (table.number("expert") or 0) > 0)
            return Decision(
                kind="tests",
                tests=focused_tests(spec, program, checks, expert=expert),
                reasoning=(
                    f"{IDENTITY} The results lack the checks that decide edits "
                    f"{[e.id for e, _ in waiting]}; asking once for a focused re-run of {checks}."
                ),
                headline=f"a focused re-run of {checks}",
            )
        remaining = [e.id for e in edits if e.eligible(applied)]
        why = (
            "every catalogue edit is already applied"
            if not remaining
            else f"no trigger fired for the remaining edits {remaining}"
        )
        return Decision(kind="stop", reasoning=f"{IDENTITY} {summary} Stopping: {why}.", headline=why)


_DECISION_WORD = {"program": "revise", "tests": "more_tests", "stop": "stop"}


def _with_code(text: str, code: str | None) -> str:
    return f"{text.strip()}\n\n```python\n{code.rstrip()}\n```" if code else text.strip()


def _exchange(previous: Conversation | None, ask: str, answer: str) -> Conversation:
    """`previous` (or a new record opened by the identity line) plus one question and answer."""
    history = [dict(m) for m in previous if isinstance(m, dict)] if isinstance(previous, list) else []
    if not history:
        history = [{"role": "system", "content": IDENTITY}]
    return history + [{"role": "user", "content": ask}, {"role": "assistant", "content": answer}]


def _earlier_results(conversation: Conversation | None) -> list[str]:
    """The printed results handed to earlier `revise` calls of this exchange, oldest first."""
    if not isinstance(conversation, list):
        return []
    out = []
    for message in conversation:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str) and content.startswith(RESULTS_HEADER):
            out.append(content[len(RESULTS_HEADER):].lstrip("\n"))
    return out


def _summary(parsed: dict[str, CheckResult]) -> str:
    failed = sorted(c for c, r in parsed.items() if r.status == "FAIL")
    metric = next((r for c, r in parsed.items() if c.startswith("metric.")), None)
    parts = [f"{len(parsed)} checks read, {len(failed)} failed"]
    if failed:
        parts.append("failed: " + ", ".join(failed[:8]) + (" ..." if len(failed) > 8 else ""))
    if metric is not None:
        shown = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in
                         list(metric.values.items())[:4])
        parts.append(f"{metric.check}: {shown}")
    return "; ".join(parts) + "."


def focused_tests(spec: TaskSpec, program: str, checks: list[str], *, expert: bool = False) -> str:
    """The battery restricted to `checks` (by id prefix), on the schema the program implies
    (with expert columns only when the table has them), plus a marker line so the analyst
    asks for focused tests only once."""
    schema = list(spec.observation_columns) + list(info_keys(program, spec))
    for a in spec.action_names:
        schema += [action_column(family, a) for family in ("mean", "act", *(("expert",) if expert else ()))]
    schema += list(OUTCOME_COLUMNS)
    code = diagnostic_battery(spec, program, schema)
    kept: list[str] = []
    for line in code.splitlines():
        if line.startswith("_run("):
            check = line.split("'", 2)[1] if "'" in line else ""
            if not any(check == c or check.startswith(c + ".") for c in checks):
                continue
        kept.append(line)
    kept.append(f"_emit({FOCUS_MARKER!r}, 'INFO', checks={','.join(checks)!r})")
    return "\n".join(kept) + "\n"
