"""A person at a robot, without ROS: what they intend from what they see, and how their hands
turn an intention into a gamepad's sticks and buttons.

The teleoperator of the twins (`tools/twin_operator.py`) is this person behind a gamepad: it
sees the twin's scene (the twin's `~/scene`, what someone standing at the robot sees: the
door, its handle and hinge, the target; the car on its track), decides what the robot should do
(`DoorSkill`, `LapSkill`: plain controllers, as a person drives by eye), and moves the sticks
with a person's imperfections (`Hands`):

- a reaction delay: they act on the scene as it was `reaction_s` (0.2 s, with some jitter) ago,
  so they stop late, overshoot and correct;
- stick noise (a slowly wandering error, an Ornstein-Uhlenbeck process) and quantisation
  (a thumb does not hold a stick finer than `quantum`);
- pauses: now and then the stick is let go to look (and for the arm, sometimes the dead-man
  button too, which the recorder leaves out of the take as a pause).

What they intend is in the task's action units (the door's dx, dy, dz, gripper; the car's
steer, gas, brake); `Pad` turns it into the axes of the gamepad layout the profile's joy_teleop
reads, so the recorder records what that layout gives, as with a person's gamepad.

Everything is seeded: the same seed gives the same person.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


# ---------------------------------------------------------------------------------------- pad
@dataclass(frozen=True)
class Pad:
    """A gamepad layout as joy_teleop reads it: per task action, the axis, its scale and offset
    (`action = offset + scale * axis`), the dead-man button and the recording buttons."""

    axes: tuple[int, ...]
    scales: tuple[float, ...]
    offsets: tuple[float, ...]
    enable_button: int
    buttons: Mapping[str, int]
    """control -> button index (start, stop, keep, discard, rerecord, success, failure, finish)."""
    n_axes: int = 8
    n_buttons: int = 15
    rest_axes: Mapping[int, float] = field(default_factory=dict)
    """Axes that read other than 0 at rest (none in the layouts used here)."""

    def sticks(self, action: Sequence[float], low: Sequence[float], high: Sequence[float]) -> list[float]:
        """The axis values that give `action` (clipped to the bounds), one per axis of the pad.
        An axis several actions share (the car's gas forward, brake back) gets the value that
        gives the larger wanted action; an action with no axis is left to its offset."""
        out = [float(self.rest_axes.get(i, 0.0)) for i in range(self.n_axes)]
        best: dict[int, float] = {}
        for i, (axis, scale, offset) in enumerate(zip(self.axes, self.scales, self.offsets, strict=True)):
            if axis < 0 or scale == 0:
                continue
            want = float(np.clip(action[i], low[i], high[i]))
            value = float(np.clip((want - offset) / scale, -1.0, 1.0))
            if axis not in best or abs(want - offset) > 1e-9 and abs(value) > abs(best[axis]):
                best[axis] = value
        for axis, value in best.items():
            out[axis] = value
        return out

    def action(self, axes: Sequence[float], low: Sequence[float], high: Sequence[float]) -> np.ndarray:
        """What joy_teleop makes of `axes` (no deadzone): the inverse of `sticks`, for checks."""
        values = np.array(self.offsets, dtype=float)
        for i, (axis, scale) in enumerate(zip(self.axes, self.scales, strict=True)):
            if axis >= 0:
                values[i] += scale * float(axes[axis])
        return np.clip(values, low, high)

    @classmethod
    def from_joy_teleop(cls, parameters: Mapping[str, Any], standard: Any) -> Pad:
        """The layout of a profile's joy_teleop: its `axes`, `scales`, `offsets` when set (else
        the task's standard map, `standard`: a `refine_ros.teleop.maps.JoyMap`), its dead-man
        and recording buttons (else joy_teleop's defaults)."""
        from refine_ros.nodes.joy_teleop import PARAMETERS
        from refine_ros.teleop.maps import DEMO_BUTTONS

        def value(name: str) -> Any:
            return parameters.get(name, PARAMETERS[name].default)

        axes = [int(a) for a in value("axes")]
        if axes and axes != [-1]:
            mapped = (tuple(axes), tuple(float(s) for s in value("scales")), tuple(float(o) for o in value("offsets")))
        else:
            mapped = (standard.axes, standard.scales, standard.offsets)
        buttons = {control: int(value(f"{control}_button")) for control in DEMO_BUTTONS}
        return cls(*mapped, enable_button=int(value("enable_button")), buttons=buttons)


# ---------------------------------------------------------------------------------------- hands
@dataclass
class PersonConfig:
    reaction_s: float = 0.2
    """How late a person acts on what they see (visual reaction to a change, about 0.2 s)."""
    reaction_jitter_s: float = 0.04
    stick_noise: float = 0.06
    """Std of the thumb's wandering error, in stick units (full deflection 1)."""
    noise_tau_s: float = 0.3
    """How slowly that error wanders (its correlation time)."""
    quantum: float = 0.02
    """The finest step a thumb holds a stick at."""
    pause_rate_per_s: float = 0.05
    """Pauses per second of driving (a look at the scene, a change of grip)."""
    pause_s: tuple[float, float] = (0.3, 1.0)
    release_share: float = 0.4
    """Of the pauses, the share in which the dead-man button is let go too (where a skill allows)."""


class Eyes:
    """The scene as the person has taken it in: what the twin showed `reaction_s` ago."""

    def __init__(self, config: PersonConfig, rng: np.random.Generator) -> None:
        self.config, self.rng = config, rng
        self.seen: deque[tuple[float, dict]] = deque(maxlen=500)
        self.delay = config.reaction_s

    def look(self, now: float, scene: dict) -> None:
        self.seen.append((now, scene))

    def scene(self, now: float) -> dict | None:
        """The newest scene at least the reaction delay old (a new delay is drawn for each call)."""
        self.delay = max(0.05, self.config.reaction_s + self.rng.normal(0.0, self.config.reaction_jitter_s))
        taken = None
        for t, scene in self.seen:
            if t <= now - self.delay:
                taken = scene
            else:
                break
        return taken


class Hands:
    """Sticks from intentions: noise, quantisation and pauses on top of what the person means."""

    def __init__(self, config: PersonConfig, rng: np.random.Generator, n_actions: int) -> None:
        self.config, self.rng = config, rng
        self.error = np.zeros(n_actions)
        self.pause_until = -1.0
        self.pause_releases = False
        self.pauses = 0
        self.last = None

    def move(self, intent: np.ndarray, now: float, noisy: np.ndarray, paused: np.ndarray | None
             ) -> tuple[np.ndarray, bool]:
        """(the action the sticks now give, the dead-man held). `noisy` marks the actions a thumb
        holds on a stick (a trigger pulled fully in or released has no wander to speak of);
        `paused` the actions a pause lets go of (None: the skill never pauses; a driver lifts off
        the gas but keeps steering)."""
        pauses = paused is not None
        c = self.config
        dt = 0.02 if self.last is None else max(1e-3, now - self.last)
        self.last = now
        decay = math.exp(-dt / c.noise_tau_s)
        self.error = self.error * decay + self.rng.normal(0.0, c.stick_noise * math.sqrt(1 - decay**2), self.error.shape)
        if pauses and now >= self.pause_until and self.rng.random() < c.pause_rate_per_s * dt:
            self.pause_until = now + self.rng.uniform(*c.pause_s)
            self.pause_releases = bool(self.rng.random() < c.release_share)
            self.pauses += 1
        moved = np.round(np.where(noisy, intent + self.error, intent) / c.quantum) * c.quantum
        if now < self.pause_until:
            return np.where(paused, 0.0, moved), not self.pause_releases
        return moved, True


# ---------------------------------------------------------------------------------------- skills
@dataclass
class Intent:
    action: np.ndarray
    """The task's action the person wants now."""
    done: bool = False
    """The task is done: the take can be stopped."""
    failed: str = ""
    """Why this attempt has gone wrong (the person records it again), '' while it has not."""


class DoorSkill:
    """How a person opens the door with the arm: the gripper closed into a hook, over the gap
    behind the handle (between the handle and the door), down into it, then pulled along the
    handle's circle about the hinge towards the target (the door opens towards the arm), and
    let go once it is open. Positions from the scene (base frame, m); commands in the task's
    units (a tool velocity as a fraction of the arm's `max_speed` per axis)."""

    HOVER_M = 0.08  # over the gap before going down into it
    BEHIND_M = 0.03  # how far behind the handle's centre (against the opening direction) the hook goes
    INWARD_M = 0.03  # how far from the handle's centre towards the hinge, along the handle
    GAIN = 15.0  # stick per metre of error: full stick beyond about 7 cm
    CLOSE_S = 0.6  # how long the gripper is given to close before going down

    def __init__(self, max_speed: float = 0.1) -> None:
        self.max_speed = max_speed
        self.miss = np.zeros(3)
        """A fumble: where beside the gap the person goes down (m; zero: into it)."""
        self.phase = "close"
        self.started: float | None = None
        self.radius: float | None = None
        self.opened_at: float | None = None
        self.track: deque[tuple[float, np.ndarray]] = deque()

    @staticmethod
    def _opening_direction(handle: np.ndarray, hinge: np.ndarray, target: np.ndarray) -> np.ndarray:
        """The way the handle moves as the door opens: along its circle, towards the target."""
        r = (handle - hinge)[:2]
        tangent = np.array([-r[1], r[0]]) / (float(np.linalg.norm(r)) or 1e-6)
        return tangent if tangent @ (target - handle)[:2] >= 0 else -tangent

    def intent(self, scene: dict, now: float) -> Intent:
        tool, handle = np.array(scene["tool"]), np.array(scene["handle"])
        hinge, target = np.array(scene["hinge"]), np.array(scene["target"])
        u = self._opening_direction(handle, hinge, target)
        inward = (hinge - handle)[:2] / (float(np.linalg.norm((hinge - handle)[:2])) or 1e-6)
        hook = handle + np.array([*(inward * self.INWARD_M - u * self.BEHIND_M), 0.0]) + self.miss
        self.started = now if self.started is None else self.started
        move, grip = np.zeros(3), 0.0
        if self.phase == "close":  # open the hand, then close it into a hook, moving up and over
            move = self.GAIN * (hook + [0.0, 0.0, self.HOVER_M] - tool)
            grip = 1.0 if now - self.started < self.CLOSE_S else 0.0
            if now - self.started >= 2 * self.CLOSE_S:
                self.phase = "reach"
        if self.phase == "reach":
            over = hook + [0.0, 0.0, self.HOVER_M]
            move = self.GAIN * (over - tool)
            if scene["opening"] > 0.07 and now - self.started > 4 * self.CLOSE_S:
                self.phase, self.started = "close", now  # the hand is still open: open and close it again
            elif np.linalg.norm((tool - over)[:2]) < 0.012 and scene["opening"] <= 0.07:
                self.phase = "descend"
        if self.phase == "descend":
            xy = self.GAIN * (hook - tool)[:2]
            move = np.array([*xy, self.GAIN * (hook[2] - tool[2])])
            if abs(tool[2] - hook[2]) < 0.015:
                self.phase = "pull"
                self.radius = float(np.linalg.norm((tool - hinge)[:2]))
        if self.phase == "pull":
            r = (tool - hinge)[:2]
            radius = float(np.linalg.norm(r)) or 1e-6
            tangent = self._opening_direction(tool, hinge, target)
            planar = tangent * 1.0 - (radius - self.radius) * 15.0 * r / radius
            move = np.array([*planar, self.GAIN * (hook[2] - tool[2])])
            if np.linalg.norm((tool - hook)[:2]) > 0.06:
                return Intent(np.array([0.0, 0.0, 0.0, 0.0]), failed="the hook came off the handle")
            self.track.append((now, tool))
            while now - self.track[0][0] > 3.0:
                self.track.popleft()
            if now - self.track[0][0] > 2.5 and np.linalg.norm(tool - self.track[0][1]) < 0.01:
                return Intent(np.array([0.0, 0.0, 0.0, 0.0]), failed="the hand is stuck: the door does not move")
            if scene["opened"] and self.opened_at is None:
                self.opened_at = now
            if self.opened_at is not None and now - self.opened_at > 0.5:
                self.phase = "release"
        if self.phase == "release":
            return Intent(np.array([0.0, 0.0, 0.0, 0.0]), done=True)
        move = np.clip(move, -1.0, 1.0)
        return Intent(np.array([*move, grip]))


class LapSkill:
    """How a person drives the car round its track by eye: towards a point on the road some way
    ahead (pure pursuit on the centre line), at a moderate speed, slower into bends. From the
    scene's pose (odom frame) and the track's centre line; commands in the task's units (steer
    as a fraction of `max_steering_angle`, negative left; gas as a fraction of `max_speed`)."""

    def __init__(self, layout: dict, max_speed: float = 1.0, max_steering_angle: float = 0.34,
                 wheelbase: float = 0.073, cruise: float = 0.6, bend: float = 0.4, crawl: float = 0.18,
                 lookahead: float = 0.5, lookahead_bend: float = 0.5, gain: float = 1.3, gain_bend: float = 1.9,
                 until_tiles: int = 0) -> None:
        self.centre = np.asarray(layout["centre_line"], dtype=float)
        self.half_width = float(layout["road_width"]) / 2.0
        self.max_speed, self.max_angle, self.wheelbase = max_speed, max_steering_angle, wheelbase
        self.cruise, self.bend, self.lookahead, self.crawl = cruise, bend, lookahead, crawl
        self.lookahead_bend, self.gain, self.gain_bend = lookahead_bend, gain, gain_bend
        self.until_tiles = until_tiles
        """A short take: done once this many tiles are visited (0: the whole lap)."""
        steps = np.linalg.norm(np.diff(np.vstack([self.centre, self.centre[:1]]), axis=0), axis=1)
        self.spacing = float(np.mean(steps))
        self.index = 0
        self.distracted: tuple[float, float] | None = None
        """A fumble: (seconds after the start, for how long) the steering is held still."""
        self.started: float | None = None
        self.moving_at: float | None = None
        self.steer = 0.0

    def _ahead(self, index: int, distance: float) -> int:
        return (index + max(1, int(round(distance / self.spacing)))) % len(self.centre)

    def intent(self, scene: dict, now: float) -> Intent:
        x, y, yaw = scene["pose"]
        here = np.array([x, y])
        window = (self.index + np.arange(-5, 40)) % len(self.centre)  # where the car is along the lap
        self.index = int(window[np.argmin(np.linalg.norm(self.centre[window] - here, axis=1))])
        # how much the road turns from here over the next metre: slow down before a bend, and
        # the more the sharper it is (a hairpin at a crawl)
        points = [self.centre[self._ahead(self.index, d)] for d in (0.0, 0.35, 0.7, 1.05)]
        heading = [math.atan2(*(q - p)[::-1]) for p, q in zip(points, points[1:], strict=False)]
        turn = max(abs(math.atan2(math.sin(h1 - h0), math.cos(h1 - h0)))
                   for h0, h1 in zip(heading, heading[1:], strict=False))
        speed = self.cruise - (self.cruise - self.bend) * min(1.0, turn / 0.6)
        if turn > 0.9:
            speed = min(speed, self.crawl)
        # steer by eye towards a point on the middle of the road ahead, nearer in a sharp bend
        # (turning in harder there)
        lookahead = self.lookahead if turn < 0.9 else self.lookahead_bend
        point = self.centre[self._ahead(self.index, lookahead)] - here
        forward, left = np.array([math.cos(yaw), math.sin(yaw)]), np.array([-math.sin(yaw), math.cos(yaw)])
        alpha = math.atan2(point @ left, point @ forward)
        gain = self.gain if turn < 0.9 else self.gain_bend  # at a crawl in a sharp bend, a firmer hand
        angle = math.atan2(2.0 * self.wheelbase * math.sin(alpha), lookahead) * gain
        if scene["off_centre"] > self.half_width + 0.05:
            return Intent(np.array([0.0, 0.0, 1.0]), failed="the car left the road")
        if abs(float(scene["speed"])) > 0.05:
            self.moving_at = now
        elif self.moving_at is not None and now - self.moving_at > 2.0:  # the car stopped by itself
            return Intent(np.array([0.0, 0.0, 1.0]), failed="the car stopped on the road (its camera lost the road)")
        steer = float(np.clip(-angle / self.max_angle, -1.0, 1.0))
        self.started = now if self.started is None else self.started
        if self.distracted is not None and 0 <= now - self.started - self.distracted[0] <= self.distracted[1]:
            steer = self.steer  # looking elsewhere: the thumb stays where it was
        self.steer = steer
        if scene["lap"] or (self.until_tiles and scene["tiles_visited"] >= self.until_tiles):
            return Intent(np.array([steer, 0.0, 1.0]), done=True)
        return Intent(np.array([steer, speed / self.max_speed, 0.0]))
