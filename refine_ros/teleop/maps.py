"""How an operator's gamepad or keyboard becomes a teleop command, without ROS (tested alone).

A teleop command is one value per action of the task, in the task's action order, clipped to
the task's action bounds; the joy and keyboard teleop nodes publish it on
`refine/teleop_action`, where the safety node treats it like any command (clamps, rate limits,
workspace box, watchdog, e-stop). Both publish *nothing* while the operator is not driving
(dead-man button released, no key held): the safety node's watchdog then commands its stop,
and a policy running at the same time is not pre-empted by an idle operator.

Each task's standard maps are plain data in its folder (`refine_core/tasks/<task>/teleop.py`:
`GAMEPAD`, `KEYS`, `LATCHED_KEYS`, `REST`, `KEYS_HELP`), looked up here by task name, so a new
task brings its own and this module never names one.

Gamepad: `JoyMap` maps Joy axes onto actions, `action = offset + scale * axis` (sticks inside
`deadzone` read 0). The standard maps assume the ROS `joy` package's `game_controller_node`
(SDL game-controller layout: axes 0 left stick x, 1 left stick y, 2 right stick x, 3 right
stick y, 4 left trigger, 5 right trigger; sticks +1 left / up, triggers 0 released -> -1
pressed; buttons 0 A, 1 B, 2 X, 3 Y, 4 back, 6 start, 9 left shoulder, 10 right shoulder, 11-14
d-pad up, down, left, right). Another layout or
another device: set the node's `axes`, `scales`, `offsets` and button parameters.

Keyboard: a `KeyMap` binds keys to an action axis and a value. A motion key holds its value for
`hold_s` after its last press (a held key auto-repeats, so holding keeps moving and letting go
stops within `hold_s`); a latched key (the door gripper) keeps its value until another latched
key of that axis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from refine_core.tasks.registry import task_part
from refine_core.tasks.spec import TaskSpec

TASK_PART = "teleop"
"""The task folder's module holding its standard maps."""

# ---------------------------------------------------------------------------------------- gamepad
LEFT_X, LEFT_Y, RIGHT_X, RIGHT_Y, TRIGGER_LEFT, TRIGGER_RIGHT = range(6)
AXES = {"left_x": LEFT_X, "left_y": LEFT_Y, "right_x": RIGHT_X, "right_y": RIGHT_Y,
        "trigger_left": TRIGGER_LEFT, "trigger_right": TRIGGER_RIGHT}
"""The axis names a task folder's `GAMEPAD` uses (None: no axis, the action is its offset)."""
BUTTON_A, BUTTON_B, BUTTON_X, BUTTON_Y, BUTTON_BACK, BUTTON_GUIDE, BUTTON_START = range(7)
BUTTON_LEFT_SHOULDER, BUTTON_RIGHT_SHOULDER, DPAD_UP, DPAD_DOWN, DPAD_LEFT, DPAD_RIGHT = range(9, 15)

# ---------------------------------------------------------------------------------------- recording
DEMO_CONTROLS: dict[str, tuple[str, bool | None]] = {
    "start": ("demo/start", None), "stop": ("demo/stop", None), "keep": ("demo/keep", None),
    "discard": ("demo/discard", None), "rerecord": ("demo/rerecord", None), "finish": ("demo/finish", None),
    "success": ("demo/label", True), "failure": ("demo/label", False),
}
"""Recording control -> (demo recorder service, SetBool value; None: a Trigger). Keeping,
discarding and re-recording a take are their own controls; the success label is another."""
EPISODE_LABEL = "logger/label_episode"
"""Where the success / failure controls go when no demo recorder runs: the rollout logger's
verdict on the last live episode, which chooses a robot's best round (`best_round_by: operator`)."""


def label_service(service: str, recorder_ready: bool) -> str:
    """The service a control calls: the success label goes to the recorder while one runs,
    else to the rollout logger (a live episode during refinement)."""
    return EPISODE_LABEL if service == "demo/label" and not recorder_ready else service
DEMO_BUTTONS: dict[str, int] = {
    "start": BUTTON_START, "stop": BUTTON_BACK, "keep": BUTTON_Y, "discard": BUTTON_X, "rerecord": DPAD_LEFT,
    "success": DPAD_UP, "failure": DPAD_DOWN, "finish": BUTTON_RIGHT_SHOULDER,
}
"""The gamepad's standard recording buttons (joy_teleop's `<control>_button` parameters)."""


@dataclass(frozen=True)
class JoyMap:
    """One Joy axis per action (-1: none, the action is its offset) and its affine map."""

    axes: tuple[int, ...]
    scales: tuple[float, ...]
    offsets: tuple[float, ...]

    def __post_init__(self) -> None:
        if not (len(self.axes) == len(self.scales) == len(self.offsets)) or not self.axes:
            raise ValueError(f"axes, scales and offsets need one entry per action; got {len(self.axes)}, "
                             f"{len(self.scales)}, {len(self.offsets)}")
        if any(a < -1 for a in self.axes):
            raise ValueError("an axis index is >= 0, or -1 for none")

    def check(self, spec: TaskSpec) -> None:
        if len(self.axes) != len(spec.actions):
            raise ValueError(f"the joy map has {len(self.axes)} entries; {spec.name} has {len(spec.actions)} actions "
                             f"({', '.join(spec.action_names)})")

    def command(self, spec: TaskSpec, axes: Sequence[float], deadzone: float = 0.0) -> np.ndarray:
        """The action for one Joy message's axes; ValueError if the message lacks an axis."""
        values = np.array(self.offsets, dtype=float)
        for i, (axis, scale) in enumerate(zip(self.axes, self.scales, strict=True)):
            if axis < 0:
                continue
            if axis >= len(axes):
                raise ValueError(f"the Joy message has {len(axes)} axes; action {spec.action_names[i]!r} reads axis {axis}")
            raw = float(axes[axis])
            if not np.isfinite(raw):
                raise ValueError(f"axis {axis} is not finite")
            values[i] += scale * (0.0 if abs(raw) < deadzone else raw)
        return np.clip(values, spec.action_low, spec.action_high)


def standard_joy_map(spec: TaskSpec) -> JoyMap | None:
    """The task's standard gamepad map, from its folder's `GAMEPAD` ({action: (axis name or
    None, scale, offset)}, every action named); None when the folder has none."""
    data = getattr(task_part(spec.name, TASK_PART), "GAMEPAD", None)
    if data is None:
        return None
    if set(data) != set(spec.action_names):
        raise ValueError(f"{spec.name}'s GAMEPAD names {sorted(data)}; its actions are {list(spec.action_names)}")
    rows = [data[name] for name in spec.action_names]
    return JoyMap(tuple(-1 if axis is None else AXES[axis] for axis, _, _ in rows),
                  tuple(float(scale) for _, scale, _ in rows), tuple(float(offset) for _, _, offset in rows))


def joy_map_for(spec: TaskSpec, axes: Sequence[int] = (), scales: Sequence[float] = (),
                offsets: Sequence[float] = ()) -> JoyMap:
    """The node's map: the three parameters when given (all three), else the task's standard map."""
    if axes or scales or offsets:
        joy = JoyMap(tuple(int(a) for a in axes), tuple(float(s) for s in scales), tuple(float(o) for o in offsets))
    else:
        joy = standard_joy_map(spec)
        if joy is None:
            raise ValueError(f"task {spec.name!r} has no standard gamepad map; set axes, scales and offsets")
    joy.check(spec)
    return joy


@dataclass
class Edges:
    """Rising edges of Joy buttons (a press acts once, however long it is held)."""

    held: set[int] = field(default_factory=set)

    def pressed(self, buttons: Sequence[int], wanted: Mapping[str, int]) -> list[str]:
        """Names in `wanted` (name -> button index, -1 = unused) whose button went down now."""
        down = {i for i, b in enumerate(buttons) if b}
        new = down - self.held
        self.held = down
        return [name for name, index in wanted.items() if index >= 0 and index in new]


# ---------------------------------------------------------------------------------------- keyboard
@dataclass(frozen=True)
class Key:
    axis: int
    value: float
    latch: bool = False
    """Keeps its value after the key is let go (until another latched key of the axis)."""


@dataclass(frozen=True)
class KeyMap:
    keys: Mapping[str, Key]
    rest: tuple[float, ...]
    """The command with no key held (latched axes start here)."""
    help: str


def keymap_for(spec: TaskSpec) -> KeyMap:
    """The task's standard keys, from its folder's `KEYS` and `LATCHED_KEYS` ({key: (action,
    value)}), `REST` ({action: value} with no key held; others 0) and `KEYS_HELP`; ValueError
    when the folder has none."""
    data = task_part(spec.name, TASK_PART)
    if getattr(data, "KEYS", None) is None:
        raise ValueError(f"task {spec.name!r} has no keys (its folder has no teleop.py with KEYS)")
    names = list(spec.action_names)
    bound = {**{k: (a, v, False) for k, (a, v) in data.KEYS.items()},
             **{k: (a, v, True) for k, (a, v) in getattr(data, "LATCHED_KEYS", {}).items()}}
    unknown = sorted({a for a, _, _ in bound.values()} - set(names))
    if unknown:
        raise ValueError(f"{spec.name}'s keys name no action {unknown}; its actions are {names}")
    rest = getattr(data, "REST", {})
    return KeyMap(keys={k: Key(names.index(a), float(v), latch=latch) for k, (a, v, latch) in bound.items()},
                  rest=tuple(float(rest.get(name, 0.0)) for name in names), help=str(getattr(data, "KEYS_HELP", "")))


CONTROL_KEYS: dict[str, str] = {
    " ": "halt", "x": "estop", "u": "rearm", "1": "start", "2": "stop", "k": "keep", "j": "discard",
    "b": "rerecord", "+": "success", "=": "success", "-": "failure", "0": "finish", "q": "quit",
}
CONTROL_HELP = ("space: stop moving   x: e-stop   u: release the e-stop and re-arm   1: start a take   "
                "2: stop it   k: keep it   j: discard it   b: record it again   +: label it a success   "
                "-: a failure   0: end the session   q: quit")


class KeyboardState:
    """What the keys held so far command now."""

    def __init__(self, spec: TaskSpec, keymap: KeyMap, hold_s: float = 0.6, scale: float = 1.0) -> None:
        if len(keymap.rest) != len(spec.actions) or any(k.axis >= len(spec.actions) for k in keymap.keys.values()):
            raise ValueError(f"the key map does not fit {spec.name}'s {len(spec.actions)} actions")
        if set(keymap.keys) & set(CONTROL_KEYS):
            raise ValueError(f"keys {sorted(set(keymap.keys) & set(CONTROL_KEYS))} are control keys")
        self.spec, self.keymap, self.hold_s, self.scale = spec, keymap, float(hold_s), float(scale)
        self.latched = np.array(keymap.rest, dtype=float)
        self._pressed: dict[int, tuple[float, float]] = {}  # axis -> (value, time of the last press)
        self._latch_changed = -1e18

    def press(self, key: str, now: float) -> str | None:
        """Feed one key; returns the control action it names (CONTROL_KEYS), else None."""
        if key in CONTROL_KEYS:
            if CONTROL_KEYS[key] == "halt":
                self._pressed.clear()
            return CONTROL_KEYS[key]
        bound = self.keymap.keys.get(key.lower())
        if bound is None:
            return None
        if bound.latch:
            self.latched[bound.axis] = bound.value
            self._latch_changed = now
        else:
            self._pressed[bound.axis] = (bound.value * self.scale, now)
        return None

    def command(self, now: float) -> np.ndarray | None:
        """The command to publish now, or None when no key is held (publish nothing)."""
        live = {axis: value for axis, (value, t) in self._pressed.items() if now - t <= self.hold_s}
        if not live and now - self._latch_changed > self.hold_s:
            return None
        values = self.latched.copy()
        for axis, value in live.items():
            values[axis] = value
        return np.clip(values, self.spec.action_low, self.spec.action_high)
