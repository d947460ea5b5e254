"""The offline analyst's catalogue of structural edits, one ordered list per bundled task.

Each task folder may provide its own catalogue, found by task name: the edits as plain data
(`tasks/<task>/offline_catalogue.py`: `EDITS`, a tuple of dicts) and the template they apply
to (`tasks/<task>/programs/offline_template.py`); this module is the machinery that reads them
(`Edit`, `Trigger`, `Condition`), so a task folder never imports the analyst.

Why templates with regions instead of one file per revision: edits fire in whatever order the
diagnostics ask for, so any subset of a task's edits must yield a valid program. Each task has
one template: the bundled starter program with edit regions added, so
rendering it with no edit gives the starter byte for byte. Lines are grouped into regions
``# >>> <id>`` ... ``# <<< <id>`` (kept when the edit is applied), ``# >>> not <id>`` ...
``# <<< not <id>`` (kept while it is not) and ``# >>> <a>|<b>`` (kept when either is). The
applied edits are recorded in the program text as ``# refine-edit: <id>`` lines, so revising is
a pure function of the program text: stateless, deterministic and resumable.

Every trigger reads checks that need no expert relabels (the demonstration, the rollout and
the program are enough), because relabels are switched off by default and unavailable on a
robot. The edits are pre-written programs, not analysis: they show the machinery working,
never evidence for the method.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

STRUCTURE_RE = re.compile(r"^# refine-structure: ([a-z0-9_]+)[ \t]*$", re.MULTILINE)
EDIT_RE = re.compile(r"^# refine-edit: ([a-z0-9_]+)[ \t]*$", re.MULTILINE)
_REGION_OPEN = re.compile(r"^\s*# >>> (not )?([a-z0-9_]+(?:\|[a-z0-9_]+)*)\s*$")
_REGION_CLOSE = re.compile(r"^\s*# <<< (not )?([a-z0-9_]+(?:\|[a-z0-9_]+)*)\s*$")


class TemplateError(ValueError):
    """A catalogue template has unbalanced or unknown regions (a packaging bug, not user input)."""


@dataclass(frozen=True)
class CheckResult:
    """One parsed ``CHECK <id> <STATUS> key=value ...`` line."""

    check: str
    status: str
    values: dict[str, float | str]

    def number(self, key: str) -> float | None:
        value = self.values.get(key)
        return value if isinstance(value, float) and not math.isnan(value) else None


def parse_results(text: str) -> dict[str, CheckResult]:
    """Every CHECK line of a diagnostics printout, by check id; a later line with the same id
    wins (a focused re-test replaces the battery's line). Other lines are ignored."""
    out: dict[str, CheckResult] = {}
    for line in (text or "").splitlines():
        parts = line.strip().split()
        if len(parts) < 3 or parts[0] != "CHECK":
            continue
        values: dict[str, float | str] = {}
        for token in parts[3:]:
            key, sep, raw = token.partition("=")
            if not sep:
                continue
            try:
                values[key] = float(raw)
            except ValueError:
                values[key] = raw
        out[parts[1]] = CheckResult(parts[1], parts[2], values)
    return out


_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    "abs>": lambda a, b: abs(a) > b,
}


@dataclass(frozen=True)
class Condition:
    """`<check>.<key> <op> <threshold>` on the parsed results."""

    check: str
    key: str
    op: str
    threshold: float

    def evaluate(self, results: dict[str, CheckResult]) -> bool | None:
        """True/False, or None when the check or key is missing from the results."""
        result = results.get(self.check)
        value = None if result is None else result.number(self.key)
        if value is None:
            return None
        return _OPS[self.op](value, self.threshold)

    def describe(self, results: dict[str, CheckResult] | None = None) -> str:
        text = f"{self.check}.{self.key} {self.op} {self.threshold:g}"
        if results is not None:
            result = results.get(self.check)
            value = None if result is None else result.number(self.key)
            text += " (missing)" if value is None else f" (measured {value:.4g})"
        return text


@dataclass(frozen=True)
class Trigger:
    """Fires when every condition of `all_of` holds and, if `any_of` is not empty, at least one
    of `any_of` holds. `all_of` states what the problem is; `any_of` lists the symptoms."""

    all_of: tuple[Condition, ...] = ()
    any_of: tuple[Condition, ...] = ()

    def conditions(self) -> tuple[Condition, ...]:
        return self.all_of + self.any_of

    def evaluate(self, results: dict[str, CheckResult]) -> tuple[bool, list[str], list[str]]:
        """(fires, reasons that held, conditions whose checks were missing)."""
        missing = [c.describe() for c in self.conditions() if c.evaluate(results) is None]
        held = [c.describe(results) for c in self.conditions() if c.evaluate(results)]
        all_ok = all(c.evaluate(results) for c in self.all_of)
        any_ok = not self.any_of or any(c.evaluate(results) for c in self.any_of)
        return bool(all_ok and any_ok), held, missing


@dataclass(frozen=True)
class Edit:
    """One structural change to a bundled task's program, tied to the diagnostics that call
    for it."""

    id: str
    task: str
    description: str
    trigger: Trigger
    #: Edits this one builds on (e.g. a gate it reuses); it is eligible only after them.
    requires: tuple[str, ...] = ()

    def eligible(self, applied: tuple[str, ...]) -> bool:
        return self.id not in applied and all(r in applied for r in self.requires)

    def apply(self, program: str) -> str:
        """The program with this edit added to the ones it already carries."""
        applied = applied_edits(program)
        missing = [r for r in self.requires if r not in applied]
        if missing:
            raise TemplateError(f"edit {self.id!r} needs {missing} applied first")
        if self.id not in applied:
            applied = applied + (self.id,)
        return render(self.task, applied)


TEMPLATE_FILE = "programs/offline_template.py"
"""Where a task folder keeps its catalogue template (read as text, never imported)."""
CATALOGUE_PART = "offline_catalogue"
"""The task folder's module holding its edits as plain data (`EDITS`)."""
EDIT_KEYS = frozenset({"id", "description", "all_of", "any_of", "requires"})


def template_text(task: str) -> str:
    """The task's catalogue template, from its folder."""
    catalogue = _task_catalogue(task)
    if catalogue is None:
        raise TemplateError(f"task {task!r} has no offline catalogue")
    return catalogue[0]


def edit_from_data(task: str, data: dict) -> Edit:
    """One edit of a task folder's `EDITS` as the analyst uses it. The data: `id`,
    `description`, the trigger's `all_of` (every condition holds: what the problem is) and
    `any_of` (at least one holds: its symptoms), each condition `(check, key, op, threshold)`
    on the battery's `CHECK` lines, and optionally `requires` (edits it builds on)."""
    unknown = sorted(set(data) - EDIT_KEYS)
    if unknown or not {"id", "description"} <= set(data):
        raise TemplateError(f"task {task!r}: a catalogue edit needs 'id' and 'description' and may have "
                            f"{sorted(EDIT_KEYS - {'id', 'description'})}; got {sorted(data)}")

    def conditions(key: str) -> tuple[Condition, ...]:
        return tuple(Condition(str(c), str(k), str(op), float(t)) for c, k, op, t in data.get(key, ()))

    return Edit(id=str(data["id"]), task=task, description=str(data["description"]),
                trigger=Trigger(all_of=conditions("all_of"), any_of=conditions("any_of")),
                requires=tuple(data.get("requires", ())))


@cache
def _task_catalogue(task: str) -> tuple[str, tuple[Edit, ...]] | None:
    """(template text, edits) from the task's folder; None when it has no catalogue."""
    from refine_core.tasks.registry import UnknownTaskError, task_file, task_part

    try:
        template, data = task_file(task, TEMPLATE_FILE), task_part(task, CATALOGUE_PART)
    except UnknownTaskError:
        return None
    if template is None or data is None:
        return None
    return template, tuple(edit_from_data(task, edit) for edit in data.EDITS)


def program_structure(program: str) -> str | None:
    """The catalogue task a program was rendered for, or None for a foreign program."""
    match = STRUCTURE_RE.search(program or "")
    return match.group(1) if match else None


def applied_edits(program: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(EDIT_RE.findall(program or "")))


def render(task: str, applied: tuple[str, ...] | list[str] | set[str]) -> str:
    """The task's program with exactly the edits in `applied` (header lists them in catalogue
    order, so the same set always gives the same text)."""
    known = [e.id for e in catalogue_for(task)]
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise TemplateError(f"task {task!r} has no catalogue edits {unknown}")
    chosen = set(applied)
    lines = template_text(task).splitlines()
    out: list[str] = []
    stack: list[tuple[str, bool]] = []
    for number, line in enumerate(lines, 1):
        opened = _REGION_OPEN.match(line)
        closed = _REGION_CLOSE.match(line)
        if opened:
            negate, name = bool(opened.group(1)), opened.group(2)
            ids = name.split("|")
            for edit_id in ids:
                if edit_id not in known:
                    raise TemplateError(f"{task}.py line {number}: unknown edit {edit_id!r}")
            applies = any(edit_id in chosen for edit_id in ids)
            stack.append(((("not " if negate else "") + name), applies != negate))
            continue
        if closed:
            name = ("not " if closed.group(1) else "") + closed.group(2)
            if not stack or stack[-1][0] != name:
                raise TemplateError(f"{task}.py line {number}: unbalanced region end {name!r}")
            stack.pop()
            continue
        if all(keep for _, keep in stack):
            out.append(line)
            if STRUCTURE_RE.match(line):
                out.extend(f"# refine-edit: {e}" for e in known if e in chosen)
    if stack:
        raise TemplateError(f"{task}.py: region {stack[-1][0]!r} never closed")
    return "\n".join(out) + "\n"


def catalogue_for(task: str) -> tuple[Edit, ...]:
    """The task's edits in the order the analyst tries them (none for a task without one)."""
    catalogue = _task_catalogue(task)
    return () if catalogue is None else tuple(catalogue[1])
