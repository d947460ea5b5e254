"""The offline analyst's catalogue of structural edits, one ordered list per bundled task.

Why templates with regions instead of one file per revision: edits fire in whatever order the
diagnostics ask for, so any subset of a task's edits must yield a valid program. Each task has
one template (``edits/<task>.py``, itself a valid contract-following program with every edit
applied) whose lines are grouped into regions ``# >>> <id>`` ... ``# <<< <id>`` (kept when the
edit is applied) and ``# >>> not <id>`` ... ``# <<< not <id>`` (kept while it is not). The
applied edits are recorded in the program text as ``# refine-edit: <id>`` lines, so revising is
a pure function of the program text: stateless, deterministic and resumable.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

STRUCTURE_RE = re.compile(r"^# refine-structure: ([a-z0-9_]+)[ \t]*$", re.MULTILINE)
EDIT_RE = re.compile(r"^# refine-edit: ([a-z0-9_]+)[ \t]*$", re.MULTILINE)
_REGION_OPEN = re.compile(r"^\s*# >>> (not )?([a-z0-9_]+)\s*$")
_REGION_CLOSE = re.compile(r"^\s*# <<< (not )?([a-z0-9_]+)\s*$")


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


def template_text(task: str) -> str:
    return resources.files("refine_core.analyst.offline.edits").joinpath(f"{task}.py").read_text(
        encoding="utf-8"
    )


def program_structure(program: str) -> str | None:
    """The catalogue task a program was rendered for, or None for a foreign program."""
    match = STRUCTURE_RE.search(program or "")
    return match.group(1) if match else None


def applied_edits(program: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(EDIT_RE.findall(program or "")))


def render(task: str, applied: tuple[str, ...] | list[str] | set[str]) -> str:
    """The task's program with exactly the edits in `applied` (header lists them in catalogue
    order, so the same set always gives the same text)."""
    known = [e.id for e in CATALOGUE.get(task, ())]
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
            negate, edit_id = bool(opened.group(1)), opened.group(2)
            if edit_id not in known:
                raise TemplateError(f"{task}.py line {number}: unknown edit {edit_id!r}")
            stack.append(((("not " if negate else "") + edit_id), (edit_id in chosen) != negate))
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


def _c(check: str, key: str, op: str, threshold: float) -> Condition:
    return Condition(check, key, op, threshold)


CAR_EDITS: tuple[Edit, ...] = (
    Edit(
        id="car_lookahead",
        task="car_racing",
        description=(
            "Add steering terms from the road ahead: the mean heading of the near tiles (1-4) and "
            "of the far tiles (5-11), and the far tiles' lateral offset, so the car turns into a "
            "bend before its nearest-tile offset grows."
        ),
        trigger=Trigger(
            any_of=(
                _c("hotspot.steer.heading_ahead", "r_err", "abs>", 0.3),
                _c("metric.car_racing", "offtrack_frac", ">", 0.05),
                _c("expert.steer", "r", "<", 0.8),
            )
        ),
    ),
    Edit(
        id="car_speed",
        task="car_racing",
        description=(
            "Replace constant gas and brake by a target speed that falls with the bend ahead "
            "(mean |heading| of the far tiles); gas is a logistic switch on the speed error, "
            "brake its mirror."
        ),
        trigger=Trigger(
            any_of=(
                _c("expert.brake", "rmse", ">", 0.1),
                _c("expert.gas", "rmse", ">", 0.3),
                _c("expert.gas", "r", "<", 0.5),
                _c("hotspot.gas.bend", "r_err", "abs>", 0.3),
            )
        ),
    ),
    Edit(
        id="car_yaw_damping",
        task="car_racing",
        description=(
            "Add the angular velocity to the steering command so the car does not overshoot "
            "when leaving a bend."
        ),
        trigger=Trigger(
            any_of=(
                _c("hotspot.steer.yaw_rate", "r_err", "abs>", 0.2),
                _c("temporal.steer", "flip_ratio", ">", 2.0),
            )
        ),
    ),
)

DOOR_EDITS: tuple[Edit, ...] = (
    Edit(
        id="door_approach_above",
        task="door_open",
        description=(
            "Hover above the handle until aligned with it in the horizontal plane, then descend "
            "(a `hovering` gate on the horizontal distance), so the gripper reaches the handle "
            "from above instead of sweeping into the door on the way."
        ),
        trigger=Trigger(
            any_of=(
                _c("expert.dz", "r", "<", 0.7),
                _c("hotspot.dz.handle_gripper_distance", "r_abs", ">", 0.5),
            )
        ),
    ),
    Edit(
        id="door_pull_phase",
        task="door_open",
        description=(
            "Add a phase latent `engaged` (a smooth gate on the gripper's distance to a grasp "
            "point beside the handle): while engaged the gripper keeps tracking the grasp point "
            "and also drags the handle toward the target."
        ),
        trigger=Trigger(
            any_of=(
                _c("metric.door_open", "decrease_frac", "<", 0.5),
                _c("hotspot.dx.handle_gripper_distance", "low_bin_share", ">", 0.5),
            )
        ),
    ),
    Edit(
        id="door_grip",
        task="door_open",
        description=(
            "Make the gripper command depend on the phase: open while approaching, closed once "
            "engaged with the handle."
        ),
        trigger=Trigger(any_of=(_c("expert.gripper", "rmse", ">", 0.2),)),
        requires=("door_pull_phase",),
    ),
)

CATALOGUE: dict[str, tuple[Edit, ...]] = {"car_racing": CAR_EDITS, "door_open": DOOR_EDITS}


def catalogue_for(task: str) -> tuple[Edit, ...]:
    return CATALOGUE.get(task, ())
