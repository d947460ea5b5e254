"""The words sent to the model: one system text and one message builder per question.

Prompts are built only from their arguments (no clock, no randomness), so the same
question gives byte-identical messages; the replay transcript relies on that to find the
recorded answer. The answer formats requested here are exactly the ones `parser` reads.

Three questions start an exchange (zero-shot generation, diagnostics, and a revision or
repair with nothing to continue); the others continue one by appending a single user
message, because the method has the model read results and errors next to what it said
before: its program, its statement of expected behaviour and its hypotheses.

What the model may know is what a robot owner could tell it: no text here names a simulator
or a library, and the episodes are "rollouts" wherever they run. The analysis code receives
the rollout table `df` only, as published; the demonstration table `demo` is an option of the
run (`RefineConfig.diagnostics_see_demo`), and the words about it appear only when it is on
(`demo=True`), so a model is never told of a table its code cannot read. With it on, the
diagnostic and revision texts are, byte for byte, those the runs recorded before the option
existed were sent (they all had it on), so those runs replay exactly; their system text and
task description are the `legacy_published` variant's (`system_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from refine_core.tasks.spec import TaskSpec

Messages = list[dict[str, str]]

# Keep prompts bounded even when a sandbox prints a lot or an error is long.
RESULTS_MAX_CHARS = 20_000
ERROR_MAX_CHARS = 6_000
#: The published default for how many "more tests" answers one round honours.
DEFAULT_MAX_TEST_REQUESTS = 5
_ROLES = ("system", "user", "assistant")

SYSTEM = """\
You design and debug structured control policies: small PyTorch programs whose \
intermediate quantities have a physical meaning. Your programs are fitted to one expert \
demonstration by maximum likelihood and then run on the task; every step of these rollouts \
is logged as a table row. You then test the program against that table with analysis code, \
like unit tests for a controller, and fix its structure where the tests show a flaw."""

LEGACY_SYSTEM = """\
You design and debug structured control policies: small PyTorch programs whose \
intermediate quantities have a physical meaning. Your programs are fitted to one expert \
demonstration by maximum likelihood, rolled out in a simulator, and every rollout step is \
logged as a table row. You then test the program against that table with analysis code, \
like unit tests for a controller, and fix its structure where the tests show a flaw."""
"""The system text the runs recorded with the `legacy_published` description were sent (it
named a simulator); only that variant uses it, so those runs replay exactly."""

CONTRACT = """\
Program contract (a program that breaks it is rejected before fitting):
1. Exactly one torch.nn.Module subclass named {cls}, constructible as {cls}() with no \
arguments. Import what you use (torch, torch.nn, torch.nn.functional, math, numpy, typing \
only); no file, network, process or environment access, no eval/exec, no torch.load/save.
2. forward({args}) receives batched float32 tensors (first dimension B) and returns a \
tuple (action_mean, scale_tril, info): action_mean has shape (B, {n_act}); scale_tril has \
shape (B, {n_act}, {n_act}) and is a lower-triangular Cholesky factor with a positive \
diagonal, one per batch row. Actions are sampled from MultivariateNormal(action_mean, \
scale_tril=scale_tril) outside the module and then clipped to the bounds.
3. info is a dict of tensors: 'weight_<name>' with shape (1,) for every coefficient you \
want inspected, and 'latent_<name>' with shape (B,) for every meaningful intermediate \
quantity (one key per scalar; split vectors into several named keys). These keys become \
columns of the rollout table, so name them for what they mean.
4. Every tunable coefficient is an nn.Parameter initialised to a value with the sign and \
scale you expect from the physics, never random. Do not hide constants in forward: make \
them named parameters or named module constants with a comment saying where they come from.
5. forward is differentiable end to end (no argmax or rounding on the path to the action \
mean, no .item(), no numpy inside forward), does not modify tensors in place, and stays \
finite when inputs contain NaN or inf (use torch.nan_to_num on the inputs)."""

GENERATION_RULES = """\
How to write the program:
- Keep it simple: a handful of terms a person can read and check, each with a physical \
meaning stated in a comment.
- Prefer linear combinations of meaningful features (offsets, heading errors, distances, \
speed errors) with one coefficient each; add a bias term only where the physics needs one.
- Do not use sigmoid or tanh to shape actions; clip each action mean to its bounds instead \
(torch.clamp), action by action.
- Estimate a variance for every action dimension. A diagonal scale_tril (for example \
torch.diag_embed of a positive standard deviation per action) is allowed but not required: \
off-diagonal terms may couple actions, and the scale may depend on the inputs.
- Build every new tensor from existing ones with torch.stack or torch.cat; do not write \
into slices of a tensor and do not use register_buffer.
- Do not name variables, parameters or attributes after PyTorch or Python keywords or \
built-ins (for example input, max, min, abs, sum, type, lambda)."""

REPAIR_INTRO = "Your previous program could not be used."
#: How every correction message begins (lets tools tell corrections from questions).
CORRECTION_INTRO = "Your answer could not be used"

PROGRAM_FORMAT = """\
Answer with a short explanation of the structure, then the complete program in one \
```python code block. Do not split the program over several blocks."""

_DIAGNOSTICS_RULES_DEMO = """\
Diagnostic code rules:
- The code runs as a script with two pandas DataFrames already defined: `df`, the logged \
rollouts of the fitted policy (one row per step; several episodes, told apart by the \
`episode` column), and `demo`, the demonstration the program was fitted to (check \
`demo.columns` before relying on a column). numpy (as np), pandas (as pd) and scipy are \
importable; nothing else is needed. There is no file, network or process access, and no \
plotting.
- Print every result with a short label, e.g. print("sign of weight_k_steer:", value). \
Only printed text comes back to you, truncated if very long, so print compact summaries \
(numbers rounded, no full tables).
- Test concrete hypotheses about how a correct controller for this task behaves: signs and \
magnitudes of weights against the intent of the program; whether each latent matches what \
its name claims (recompute it from the observation columns and compare); correlations and \
simple regressions between observations, latents and actions; saturation rate of each \
action; abrupt changes or oscillation over time; behaviour in specific states (for example, \
in the steps where the state is bad, does the action push it back?); where the rollout \
visits states the demonstration never visited, and how the policy's actions in the rollout \
compare with the demonstration's actions in similar states."""

_DIAGNOSTICS_RULES_ROLLOUT = """\
Diagnostic code rules:
- The code runs as a script with one pandas DataFrame already defined: `df`, the logged \
rollouts of the fitted policy (one row per step; several episodes, told apart by the \
`episode` column). It is the only data the code receives. numpy (as np), pandas (as pd) and \
scipy are importable; nothing else is needed. There is no file, network or process access, \
and no plotting.
- Print every result with a short label, e.g. print("sign of weight_k_steer:", value). \
Only printed text comes back to you, truncated if very long, so print compact summaries \
(numbers rounded, no full tables).
- Test concrete hypotheses about how a correct controller for this task behaves: signs and \
magnitudes of weights against the intent of the program; whether each latent matches what \
its name claims (recompute it from the observation columns and compare); correlations and \
simple regressions between observations, latents and actions; saturation rate of each \
action; abrupt changes or oscillation over time; behaviour in specific states (for example, \
in the steps where the state is bad, does the action push it back?)."""

_DIAGNOSTICS_RULES_EXPERT = """\
- The table also holds expert_<action> columns: the expert's action in the policy's own \
states. Find where they disagree most with the policy's action and what the state looks \
like there."""

_DIAGNOSTICS_RULES_GUARD = """\
- Write the code defensively: guard against missing columns, NaN values and empty \
selections, and wrap each check in its own try/except that prints the error, so one failed \
check does not hide the others."""

DIAGNOSTICS_FORMAT = (
    "Answer in two parts. First a statement with these five headed parts, in this order:\n"
    "1. Task analysis: what a good controller for this task must do and what limits the "
    "metric.\n"
    "2. Model summary: what the program computes, term by term, and what each weight and "
    "latent means.\n"
    "3. Expected nominal behaviour: what the table should show if the program works as "
    "intended (signs, ranges, relations between columns).\n"
    "4. Anomalies to look for: the observable symptoms of each way it could fail.\n"
    "5. Hypotheses: the concrete hypotheses your code tests, one per check.\n"
    "Then all the code in one ```python code block."
)

_TABLE_CONVENTIONS = """\
Column conventions: run_id, round, kind, episode, seed, step identify the row; then one \
observation column per coordinate of forward's inputs, in input order (row-major for inputs \
with several dimensions); latent_* and weight_* are the program's info keys; \
mean_<action> is the policy's action mean, std_<action> its standard deviation (the norm \
of that action's row of scale_tril), act_<action> the executed (clipped) action{expert}; \
reward, done; next_<observation> is the observation after the step."""

_DEMO_CONVENTIONS = """\
 The demonstration table `demo` has the observation columns and act_<action> for the \
demonstrated actions, but not the program's latents or weights."""

_REVISION_FORMAT = """\
Choose exactly one of three answers and begin your answer with the matching line:
DECISION: revise — the results show a structural flaw; write the complete model summary of \
the revised program, then the complete revised program (same contract, same class name) in \
one ```python block. Change the structure, not only initial values: fitting will \
re-estimate the coefficients from the demonstration.
DECISION: more_tests — the results are not conclusive; give only the additional diagnostic \
code in one ```python block (the earlier checks are not run again; same rules: {tables}, \
print the results; print(list(df.columns)) if you need the column names).
DECISION: stop — the program behaves as intended and further changes are unlikely to help.
After the DECISION line, explain in a few sentences which results led to your choice."""
REVISION_FORMAT = _REVISION_FORMAT.format(tables="only `df` is defined")
"""The three-way answer format when the analysis code reads the rollout table only."""
REVISION_FORMAT_DEMO = _REVISION_FORMAT.format(tables="`df` and `demo` are defined")
"""The same when it also reads the demonstration (the wording every earlier run was sent)."""
REVISION_FORMATS = (REVISION_FORMAT, REVISION_FORMAT_DEMO)

_REVISION_COMPARE = """\
Compare these results with the statement you wrote before your code (model summary, \
expected nominal behaviour, anomalies, hypotheses): for each hypothesis, say whether the \
results support it, name every anomaly they show, and trace it to the part of the program's \
structure that causes it. Assume the fit to the demonstration converged: what the results \
show comes from the program's structure, not from an unfinished fit."""

_FRESH_REVISION_INTRO = """\
No diagnostic code of yours could be run for this program; below is what is known about \
its rollout."""

_REGENERATE_ASK = """\
Fix the cause of this error and keep the parts that were sound; what you concluded earlier \
in this conversation still holds. Give the complete corrected program."""


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 3 // 4
    tail = limit - head
    return f"{text[:head]}\n... [{len(text) - limit} characters omitted] ...\n{text[-tail:]}"


def contract(spec: TaskSpec) -> str:
    return CONTRACT.format(
        cls=spec.policy_class,
        args=", ".join(s.name for s in spec.inputs),
        n_act=len(spec.actions),
    )


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _results_block(results: str, limit: int) -> str:
    text = _clip((results or "").strip(), limit) or "(nothing was printed)"
    return f"```text\n{text}\n```"


def system_text(spec: TaskSpec) -> str:
    """The system message: `LEGACY_SYSTEM` for the legacy description only (the runs recorded
    with it were sent that), `SYSTEM` for every other."""
    from refine_core.tasks.spec import LEGACY_VARIANT

    return LEGACY_SYSTEM if spec.description_variant == LEGACY_VARIANT else SYSTEM


def _system(spec: TaskSpec) -> dict[str, str]:
    return {"role": "system", "content": system_text(spec)}


def _user(*parts: str) -> dict[str, str]:
    return {"role": "user", "content": "\n\n".join(p for p in parts if p)}


def has_expert_columns(schema: Sequence[str]) -> bool:
    from refine_core.rollout.schema import family_columns

    return bool(family_columns(schema, "expert"))


def diagnostics_rules(*, expert: bool, demo: bool = False) -> str:
    """The diagnostic rules; the demonstration table and expert columns are described only
    when the code receives them, so a model is never told about information it cannot use."""
    parts = [_DIAGNOSTICS_RULES_DEMO if demo else _DIAGNOSTICS_RULES_ROLLOUT]
    if expert:
        parts.append(_DIAGNOSTICS_RULES_EXPERT)
    parts.append(_DIAGNOSTICS_RULES_GUARD)
    return "\n".join(parts)


def table_conventions(*, expert: bool, demo: bool = False) -> str:
    extra = ", expert_<action> the expert's action in the same state" if expert else ""
    return _TABLE_CONVENTIONS.format(expert=extra) + (_DEMO_CONVENTIONS if demo else "")


def revision_format(*, demo: bool = False) -> str:
    """The three-way answer format; its more-tests line names the tables the code receives."""
    return REVISION_FORMAT_DEMO if demo else REVISION_FORMAT


def revision_instructions(max_test_requests: int, *, demo: bool = False) -> str:
    """What to answer after results: the comparison asked for, the three-way format, the
    more-tests budget and the rules a revised program follows."""
    budget = (
        f"One round honours at most {max_test_requests} requests for more tests; after "
        "that the round ends without a revision."
    )
    return "\n\n".join([_REVISION_COMPARE, revision_format(demo=demo), budget,
                         "A revised program follows these rules:\n" + GENERATION_RULES])


def clean_conversation(conversation: object) -> Messages:
    """A copy of `conversation` holding only well-formed chat messages, or [] when nothing
    usable is left (then the caller starts a fresh exchange instead of continuing)."""
    if not isinstance(conversation, (list, tuple)):
        return []
    out: Messages = []
    for message in conversation:
        if not isinstance(message, dict):
            continue
        role, content = message.get("role"), message.get("content")
        if role in _ROLES and isinstance(content, str):
            out.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in out):
        return []
    return out


def generation_messages(spec: TaskSpec) -> Messages:
    """Zero-shot generation from the task description, the contract and the rules."""
    return [
        _system(spec),
        _user(spec.describe(), contract(spec), GENERATION_RULES,
              f"Write a first version of {spec.policy_class} for this task.", PROGRAM_FORMAT),
    ]


def regeneration_messages(
    spec: TaskSpec,
    *,
    failed_program: str | None = None,
    error: str | None = None,
    context: object = None,
) -> Messages:
    """Repair of a program that failed to build or fit.

    With a usable `context` the request continues it, and the failed program is quoted only
    if the context's last answer does not already contain it; without one the request is a
    fresh exchange carrying the task, the contract, the rules and the program."""
    history = clean_conversation(context)
    error_part = (
        "Error while building or fitting it:\n" + _clip(error.strip(), ERROR_MAX_CHARS)
        if error is not None
        else "(no error text was given)"
    )
    if history:
        last = history[-1]["content"] if history[-1]["role"] == "assistant" else ""
        quoted = (
            "The program that failed:\n" + _fence(failed_program)
            if failed_program is not None and failed_program.strip() not in last
            else ""
        )
        return history + [_user(REPAIR_INTRO, quoted, error_part, _REGENERATE_ASK, PROGRAM_FORMAT)]
    quoted = "Previous program:\n" + _fence(failed_program) if failed_program is not None else ""
    return [
        _system(spec),
        _user(spec.describe(), contract(spec), GENERATION_RULES, REPAIR_INTRO, quoted, error_part,
              "Fix the cause of this error and keep the parts that were sound.", PROGRAM_FORMAT),
    ]


def diagnostics_messages(spec: TaskSpec, program: str, schema: list[str], *, demo: bool = False) -> Messages:
    """Ask for the statement and the analysis code from the program and the column names
    only (no numbers); `demo`: the code also receives the demonstration table."""
    expert = has_expert_columns(schema)
    columns = ", ".join(str(c) for c in schema)
    return [
        _system(spec),
        _user(
            spec.describe(),
            contract(spec),
            "The program below has been fitted to the demonstration and rolled out:\n"
            + _fence(program),
            f"The rollout table `df` has these columns ({len(schema)}):\n{columns}",
            table_conventions(expert=expert, demo=demo),
            diagnostics_rules(expert=expert, demo=demo),
            "Write diagnostic code that tests whether this program behaves as its structure "
            "intends and finds the structural flaws that limit its performance on the metric.",
            DIAGNOSTICS_FORMAT,
        ),
    ]


def revision_messages(
    spec: TaskSpec,
    program: str,
    results: str,
    *,
    conversation: object = None,
    results_max_chars: int = RESULTS_MAX_CHARS,
    max_test_requests: int = DEFAULT_MAX_TEST_REQUESTS,
    demo: bool = False,
) -> Messages:
    """Ask for the three-way answer after diagnostic code ran over the rollout table (`demo`:
    and over the demonstration table).

    With a usable `conversation` (the diagnostics exchange, or the exchange that asked for
    more tests) one user message with the results and the instructions is appended; without
    one, a fresh exchange carries the task, the contract, the program and the results."""
    history = clean_conversation(conversation)
    instructions = revision_instructions(max_test_requests, demo=demo)
    block = _results_block(results, results_max_chars)
    if history:
        followup = any(
            m["role"] == "user" and any(f in m["content"] for f in REVISION_FORMATS) for m in history[1:]
        )
        header = (
            "Printed results of your additional tests:"
            if followup
            else "Your diagnostic code ran over the rollout table. Its printed results:"
        )
        return history + [_user(header + "\n" + block, instructions)]
    return [
        _system(spec),
        _user(
            spec.describe(),
            contract(spec),
            "Current program (fitted to the demonstration, then rolled out):\n" + _fence(program),
            _FRESH_REVISION_INTRO + "\n" + block,
            instructions.replace(_REVISION_COMPARE + "\n\n", ""),
        ),
    ]


def correction_message(problem: str, expected: str) -> dict[str, str]:
    """Sent after an unusable answer, so the model can fix the format rather than start over."""
    return {
        "role": "user",
        "content": (
            f"{CORRECTION_INTRO}: {problem}.\n\n"
            f"Please answer again. {expected}"
        ),
    }
