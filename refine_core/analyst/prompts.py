"""The words sent to the model: one system text and one message builder per question.

Prompts are built only from their arguments (no clock, no randomness), so the same
question gives byte-identical messages; the replay transcript relies on that to find the
recorded answer. The answer formats requested here are exactly the ones `parser` reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from refine_core.tasks.spec import TaskSpec

Messages = list[dict[str, str]]

# Keep prompts bounded even when a sandbox prints a lot or history grows.
RESULTS_MAX_CHARS = 20_000
HISTORY_VALUE_MAX_CHARS = 4_000

SYSTEM = """\
You design and debug structured control policies: small PyTorch programs whose \
intermediate quantities have a physical meaning. Your programs are fitted to one expert \
demonstration by maximum likelihood, rolled out in a simulator, and every rollout step is \
logged as a table row. You then test the program against that table with analysis code, \
like unit tests for a controller, and fix its structure where the tests show a flaw."""

CONTRACT = """\
Program contract (a program that breaks it is rejected before fitting):
1. Exactly one torch.nn.Module subclass named {cls}, constructible as {cls}() with no \
arguments. Import what you use (torch, torch.nn, torch.nn.functional, math, numpy, typing \
only); no file, network, process or environment access, no eval/exec, no torch.load/save.
2. forward({args}) receives batched float32 tensors (first dimension B) and returns a \
tuple (action_mean, scale_tril, info): action_mean has shape (B, {n_act}); scale_tril has \
shape (B, {n_act}, {n_act}) and is a lower-triangular Cholesky factor with a positive \
diagonal (a diagonal matrix built from a learnable log-std is fine). Actions are sampled \
from MultivariateNormal(action_mean, scale_tril=scale_tril) outside the module and then \
clipped to the bounds.
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
- Estimate a variance for every action dimension: a learnable log standard deviation per \
action, so scale_tril is diagonal and positive.
- Build every new tensor from existing ones with torch.stack or torch.cat; do not write \
into slices of a tensor and do not use register_buffer.
- Do not name variables, parameters or attributes after PyTorch or Python keywords or \
built-ins (for example input, max, min, abs, sum, type, lambda)."""

REPAIR_INTRO = "Your previous program could not be used."

PROGRAM_FORMAT = """\
Answer with a short explanation of the structure, then the complete program in one \
```python code block. Do not split the program over several blocks."""

DIAGNOSTICS_RULES = """\
Diagnostic code rules:
- The code runs as a script with two pandas DataFrames already defined: `df`, the logged \
rollouts of the fitted policy (one row per step; several episodes, told apart by the \
`episode` column), and `demo`, the expert demonstration (check `demo.columns` before \
relying on a column). numpy (as np), pandas (as pd) and scipy are importable; nothing else \
is needed. There is no file, network or process access, and no plotting.
- Print every result with a short label, e.g. print("sign of weight_k_steer:", value). \
Only printed text comes back to you, truncated if very long, so print compact summaries \
(numbers rounded, no full tables).
- Test concrete hypotheses about how a correct controller for this task behaves: signs and \
magnitudes of weights against the intent of the program; whether each latent matches what \
its name claims (recompute it from the observation columns and compare); correlations and \
simple regressions between observations, latents and actions; saturation rate of each \
action; abrupt changes or oscillation over time; behaviour in specific states (for example, \
in the steps where the state is bad, does the action push it back?); where the rollout \
visits states the demonstration never visited; and where the expert action on the \
policy's own states (expert_<action> columns) disagrees most with the policy.
- Guard against missing columns and empty selections so one failed check does not hide \
the others (wrap each check in its own try/except and print the error)."""

DIAGNOSTICS_FORMAT = """\
Answer with one sentence per hypothesis you test, then all the code in one ```python \
code block."""

TABLE_CONVENTIONS = """\
Column conventions: run_id, round, kind, episode, seed, step identify the row; observation \
columns are named as in the task description; latent_* and weight_* are the program's info \
keys; mean_<action> is the policy's action mean, act_<action> the executed (clipped) \
action, expert_<action> the expert's action in the same state; reward, done; \
next_<observation> is the observation after the step."""

REVISION_FORMAT = """\
Choose exactly one of three answers and begin your answer with the matching line:
DECISION: revise — the results show a structural flaw; give the complete revised program \
(same contract, same class name) in one ```python block. Change the structure, not only \
initial values: fitting will re-estimate the coefficients from the demonstration.
DECISION: more_tests — the results are not conclusive; give additional diagnostic code in \
one ```python block (same rules: `df` and `demo` are defined, print the results; print(list(df.columns)) if you need the column names).
DECISION: stop — the program behaves as intended and further changes are unlikely to help.
After the DECISION line, explain in a few sentences which results led to your choice."""


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


def _system() -> dict[str, str]:
    return {"role": "system", "content": SYSTEM}


def generation_messages(
    spec: TaskSpec, *, failed_program: str | None = None, error: str | None = None
) -> Messages:
    """Zero-shot generation, or repair of a program that failed to build or fit."""
    parts = [spec.describe(), contract(spec), GENERATION_RULES]
    if failed_program is not None or error is not None:
        parts.append(REPAIR_INTRO)
        if failed_program is not None:
            parts.append("Previous program:\n" + _fence(failed_program))
        if error is not None:
            parts.append("Error while building or fitting it:\n" + _clip(error.strip(), 6_000))
        parts.append("Fix the cause of this error and keep the parts that were sound.")
    else:
        parts.append(f"Write a first version of {spec.policy_class} for this task.")
    parts.append(PROGRAM_FORMAT)
    return [_system(), {"role": "user", "content": "\n\n".join(parts)}]


def diagnostics_messages(spec: TaskSpec, program: str, schema: list[str]) -> Messages:
    """Ask for analysis code from the program and the column names only (no numbers)."""
    columns = ", ".join(str(c) for c in schema)
    parts = [
        spec.describe(),
        contract(spec),
        "The program below has been fitted to the demonstration and rolled out:\n"
        + _fence(program),
        f"The rollout table `df` has these columns ({len(schema)}):\n{columns}",
        TABLE_CONVENTIONS,
        DIAGNOSTICS_RULES,
        "Write diagnostic code that tests whether this program behaves as its structure "
        "intends and finds the structural flaws that limit its performance on the metric.",
        DIAGNOSTICS_FORMAT,
    ]
    return [_system(), {"role": "user", "content": "\n\n".join(parts)}]


def render_history(history: list[dict] | None) -> str:
    """Earlier exchanges, oldest first. Each entry is a dict; the keys round, decision,
    metric, reasoning, tests and results are shown in that order, any other key after them
    as `key: value`."""
    if not history:
        return ""
    known = ("round", "decision", "metric", "reasoning", "tests", "results")
    out: list[str] = []
    for i, entry in enumerate(history, 1):
        if not isinstance(entry, dict):
            entry = {"note": entry}
        lines = [f"Entry {i}:"]
        keys = [k for k in known if k in entry] + sorted(
            (str(k) for k in entry if k not in known), key=str
        )
        for key in keys:
            value = entry.get(key)
            if value is None:
                continue
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            text = _clip(text.strip(), HISTORY_VALUE_MAX_CHARS)
            if key == "tests":
                lines.append("tests:\n" + _fence(text))
            elif "\n" in text:
                lines.append(f"{key}:\n{text}")
            else:
                lines.append(f"{key}: {text}")
        out.append("\n".join(lines))
    return "\n\n".join(out)


def revision_messages(
    spec: TaskSpec,
    program: str,
    diagnostics: str,
    results: str,
    *,
    history: list[dict] | None = None,
    results_max_chars: int = RESULTS_MAX_CHARS,
) -> Messages:
    """Ask for the three-way answer after the diagnostics ran over the rollout table."""
    parts = [
        spec.describe(),
        contract(spec),
        "Current program (fitted to the demonstration, then rolled out):\n" + _fence(program),
    ]
    earlier = render_history(history)
    if earlier:
        parts.append("Earlier in this refinement:\n" + earlier)
    parts += [
        "Diagnostic code that was run over the rollout table:\n" + _fence(diagnostics),
        "Its printed results:\n```text\n"
        + (_clip(results.strip(), results_max_chars) or "(nothing was printed)")
        + "\n```",
        REVISION_FORMAT,
    ]
    return [_system(), {"role": "user", "content": "\n\n".join(parts)}]


def correction_message(problem: str, expected: str) -> dict[str, str]:
    """Sent after an unusable answer, so the model can fix the format rather than start over."""
    return {
        "role": "user",
        "content": (
            f"Your answer could not be used: {problem}.\n\n"
            f"Please answer again. {expected}"
        ),
    }
