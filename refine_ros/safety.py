"""The safety rules between a policy and a robot, as plain Python so every rule is unit-tested
without DDS and the ROS node stays a thin adapter.

One `SafetyFilter` owns the whole state: the e-stop latch, episode confirmation, input
freshness, teleoperation preemption and the last command sent. Every entry point takes the
current time explicitly, so tests drive the clock and the node passes its own.

Order of the rules for one incoming command (each can only make the command safer):
parse (wrong shape, NaN/inf -> zero) -> gate (e-stop or its lost heartbeat, stale inputs,
released autonomy dead-man, unconfirmed episode -> zero) -> per-axis clamp -> rate limit ->
workspace bounds -> final clamp. Stopping is never rate limited: a zero command goes out at
once, ramping *up* again is limited.

A stop is a stop: the moment the robot is stopped for a new cause (stale inputs, an e-stop,
a rejected command, a policy gone silent mid-episode), every episode confirmation given before
that moment is revoked, so motion resumes only after a human confirms again
(`safety/confirm_episode`); a confirmation given during the stop counts. Three causes do not
revoke: "unconfirmed" (nothing to revoke), "idle" (the policy is silent and no confirmed
episode runs: the normal state between episodes) and a released autonomy dead-man (pressing it
again *is* the human's fresh confirmation).

Units: the clamps and rate limits act on the task's action (normalised, e.g. the arm's deltas
in [-1, 1]); the workspace box is in the observation's own coordinates, which for the arm are
metres in the robot's base frame, and is checked against the arm's reach at start. The
bridges turn actions into the robot's units and hold the limits that only exist there (m/s,
rad): each robot folder's interface.py (refine_ros/robots/<robot>/).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from refine_ros.wire.messages import NotCounted, read_counted


class InvalidCommand(NotCounted):
    """A command that cannot be executed (wrong layout or length, NaN/inf); it becomes zero."""


class InvalidSafetyConfig(ValueError):
    """Inconsistent limits; raised before the node starts so a robot never runs with them."""


@dataclass(frozen=True)
class SafetyConfig:
    """Limits of one robot profile. Arrays are per action axis, in the task's action order."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    zero: tuple[float, ...]
    """The stop command (arm: no motion; car: steer 0, gas 0, brake 1)."""
    max_rate: tuple[float, ...]
    """Largest change per second per axis when ramping up; <= 0 means unlimited."""
    hold_axes: tuple[int, ...] = ()
    """Axes whose stop value is the last value sent (the arm's gripper keeps its grip)."""
    watchdog_timeout: float = 0.1
    """Budget: zero is on the wire within this time after inputs go stale."""
    watchdog_period: float = 0.01
    """Watchdog tick; inputs count as stale after `watchdog_timeout - watchdog_period - margin`
    with margin = max(period, 30 % of the timeout): one period until the next tick, and the
    margin for a descheduled process and the transport on a loaded machine."""
    teleop_hold: float = 0.5
    """A teleop command blocks policy commands for this long."""
    workspace_observation_indices: tuple[int, ...] = ()
    """Observation coordinates checked against the box (arm: gripper xyz; car: speed)."""
    workspace_lower: tuple[float, ...] = ()
    workspace_upper: tuple[float, ...] = ()
    workspace_action_axes: tuple[int, ...] = ()
    """The action axis that moves each checked coordinate (positive action increases it)."""
    workspace_reach: float = 0.0
    """Metres: every corner of the box must lie within this distance of the origin of the
    frame the checked coordinates are in (the arm's base frame), so a box drawn beyond what
    the arm can reach is refused before the node starts. Required (> 0) with a box."""
    require_confirmation: bool = True
    estop_timeout: float = 0.0
    """Seconds: > 0 makes the e-stop a heartbeat. Once heard, an e-stop topic silent for longer
    (or whose publisher disappeared) latches the e-stop; before it is first heard the robot
    does not move. 0: off (a volatile e-stop that only acts when it says true)."""
    deadman_timeout: float = 0.0
    """Seconds: > 0 means policy commands pass only while the autonomy dead-man button is held
    and its last report is younger than this (F1TENTH's convention: autonomy while a button is
    held). 0: off. Teleoperation has its own dead-man (joy_teleop)."""

    def __post_init__(self) -> None:
        n = len(self.lower)
        if n == 0:
            raise InvalidSafetyConfig("at least one action axis is needed")
        for name in ("upper", "zero", "max_rate"):
            if len(getattr(self, name)) != n:
                raise InvalidSafetyConfig(f"{name} has {len(getattr(self, name))} axes, lower has {n}")
        values = [*self.lower, *self.upper, *self.zero]
        if not all(math.isfinite(v) for v in values):
            raise InvalidSafetyConfig("lower/upper/zero must be finite")
        if any(lo > hi for lo, hi in zip(self.lower, self.upper, strict=True)):
            raise InvalidSafetyConfig("lower must be <= upper on every axis")
        if any(not lo <= z <= hi for lo, z, hi in zip(self.lower, self.zero, self.upper, strict=True)):
            raise InvalidSafetyConfig("the zero command must lie within lower/upper")
        if any(not 0 <= a < n for a in self.hold_axes):
            raise InvalidSafetyConfig(f"hold_axes must be in [0, {n})")
        if not (0 < self.watchdog_period <= self.watchdog_timeout / 4):
            raise InvalidSafetyConfig("need 0 < watchdog_period <= watchdog_timeout / 4")
        if self.teleop_hold < 0:
            raise InvalidSafetyConfig("teleop_hold must be >= 0")
        k = len(self.workspace_observation_indices)
        lengths = (len(self.workspace_lower), len(self.workspace_upper), len(self.workspace_action_axes))
        if lengths != (k, k, k):
            raise InvalidSafetyConfig("workspace indices, lower, upper and action axes differ in length")
        if any(i < 0 for i in self.workspace_observation_indices):
            raise InvalidSafetyConfig("workspace observation indices must be >= 0")
        if any(not 0 <= a < n for a in self.workspace_action_axes):
            raise InvalidSafetyConfig(f"workspace action axes must be in [0, {n})")
        if any(lo > hi for lo, hi in zip(self.workspace_lower, self.workspace_upper, strict=True)):
            raise InvalidSafetyConfig("workspace_lower must be <= workspace_upper")
        if not all(math.isfinite(v) for v in (*self.workspace_lower, *self.workspace_upper)):
            raise InvalidSafetyConfig("the workspace box must be finite")
        if k:
            if not (math.isfinite(self.workspace_reach) and self.workspace_reach > 0):
                raise InvalidSafetyConfig("a workspace box needs workspace_reach (m, > 0): how far the robot reaches")
            far = farthest_corner(self.workspace_lower, self.workspace_upper)
            if far > self.workspace_reach:
                raise InvalidSafetyConfig(
                    f"the workspace box reaches {far:.3f} m from the base, beyond workspace_reach "
                    f"{self.workspace_reach:.3f} m: draw it inside what the arm can reach")
        for name in ("estop_timeout", "deadman_timeout"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InvalidSafetyConfig(f"{name} must be >= 0 (0: off)")

    @property
    def axes(self) -> int:
        return len(self.lower)

    @property
    def stale_after(self) -> float:
        return stale_after(self.watchdog_timeout, self.watchdog_period)


def stale_after(watchdog_timeout: float, watchdog_period: float) -> float:
    """Seconds after which an input counts as stale (see `SafetyConfig.watchdog_period`)."""
    margin = max(watchdog_period, 0.3 * watchdog_timeout)
    return watchdog_timeout - watchdog_period - margin


def farthest_corner(lower: Sequence[float], upper: Sequence[float]) -> float:
    """Distance from the origin to the box's farthest corner (per axis, the larger |bound|)."""
    return math.sqrt(sum(max(abs(lo), abs(hi)) ** 2 for lo, hi in zip(lower, upper, strict=True)))


PASSING = ("policy", "teleop")
"""Decision reasons that move the robot; every other reason is a stop."""
BRIDGE_ACK = "bridge"
"""The reason of the stop the safety node sends when it hears that a bridge stopped the robot
by itself (refine/bridge_stop): that stop revokes the episode's confirmation, and it is the only
one that tells the bridge the safety node knows. Any other stop may come from a safety node
that has not read the news yet (a released dead-man keeps the confirmation)."""


def stop_label(label: str) -> bool:
    """A safe command labelled with a stop reason ('' is an unlabelled command: a tool that
    drives a bridge directly, or a recording made before the labels)."""
    return bool(label) and label not in PASSING
KEEPS_CONFIRMATION = ("unconfirmed", "deadman", "idle", "startup")
"""Stop causes that do not revoke the episode confirmation (see the module docstring); "idle"
is a silent policy while no confirmed episode runs (between episodes: no fault), "startup" the
time before the first observation (and the first e-stop heartbeat) arrived."""


@dataclass(frozen=True)
class Decision:
    """What to send to the hardware now. `reason` is 'policy', 'teleop' or why it is a stop."""

    values: tuple[float, ...]
    episode: int
    step: int
    reason: str

    @property
    def stopped(self) -> bool:
        return self.reason not in PASSING


@dataclass
class Counters:
    rejected: int = 0
    clamped: int = 0
    rate_limited: int = 0
    workspace_limited: int = 0
    watchdog_trips: int = 0
    estops: int = 0
    preempted: int = 0
    unconfirmed: int = 0
    revoked: int = 0
    deadman: int = 0
    passed: int = 0


def parse_command(data_offset: int, data: Sequence[float], axes: int) -> tuple[int, int, np.ndarray]:
    """Counted vector (refine_ros.wire.messages) -> (episode, step, values); never trusts the sender:
    exactly `axes` finite values."""
    try:
        vec = read_counted(data_offset, data, width=axes, finite=True)
    except NotCounted as exc:
        raise InvalidCommand(str(exc)) from None
    return vec.episode, vec.step, np.asarray(vec.values, dtype=float)


@dataclass
class SafetyFilter:
    config: SafetyConfig
    counters: Counters = field(default_factory=Counters)
    estop_latched: bool = False
    estop_input: bool = False
    confirm_pending: bool = False
    confirmed_episode: int | None = None
    last_observation: float | None = None
    last_policy: float | None = None
    last_teleop: float | None = None
    observation: np.ndarray | None = None
    last_sent: np.ndarray | None = None
    last_sent_time: float | None = None
    last_episode: int = 0
    last_step: int = 0
    last_reason: str = "startup"
    last_estop: float | None = None
    """When the e-stop topic last said anything (its heartbeat)."""
    estop_cause: str = ""
    deadman_held: bool = False
    last_deadman: float | None = None
    _tripped: bool = False
    _cause: str = ""
    _halt: str | None = "startup"
    """The cause of the stop in force (None while commands pass): a stop for a new cause
    revokes the confirmations given before it."""

    def __post_init__(self) -> None:
        c = self.config
        self._lower = np.array(c.lower, dtype=float)
        self._upper = np.array(c.upper, dtype=float)
        self._zero = np.array(c.zero, dtype=float)
        self._rate = np.array(c.max_rate, dtype=float)

    # ---- inputs -------------------------------------------------------------------------
    def on_observation(self, values: Sequence[float], now: float) -> bool:
        """An observation refreshes the heartbeat only if the checked coordinates are usable."""
        obs = np.asarray(values, dtype=float)
        idx = self.config.workspace_observation_indices
        if idx and (max(idx) >= obs.size or not np.all(np.isfinite(obs[list(idx)]))):
            return False
        self.observation = obs
        self.last_observation = now
        return True

    def _parse(self, data_offset: int, data: Sequence[float], now: float) -> tuple[int, int, np.ndarray] | Decision:
        """The command's counters and values, or the stop a malformed command becomes."""
        try:
            return parse_command(data_offset, data, self.config.axes)
        except InvalidCommand:
            self.counters.rejected += 1
            return self._stop("rejected", now)

    def on_policy(self, data_offset: int, data: Sequence[float], now: float) -> Decision | None:
        """None means: nothing to send (teleop holds the robot)."""
        command = self._parse(data_offset, data, now)
        if isinstance(command, Decision):
            return command
        episode, step, values = command
        self.last_policy = now
        self.last_episode, self.last_step = episode, step
        if self._teleop_active(now):
            self.counters.preempted += 1
            return None
        gate = self._gate(now, check_policy=False) or self._deadman_gate(now)
        if gate is None and not self._episode_confirmed(episode):
            self.counters.unconfirmed += 1
            gate = "unconfirmed"
        if gate is not None:
            return self._stop(gate, now)
        return self._limit(values, episode, step, "policy", now)

    def on_teleop(self, data_offset: int, data: Sequence[float], now: float) -> Decision:
        """The operator drives without episode confirmation (they reset the scene this way),
        but never through an e-stop, a stale observation or the limits."""
        command = self._parse(data_offset, data, now)
        if isinstance(command, Decision):
            return command
        episode, step, values = command
        self.last_teleop = now
        gate = self._gate(now, check_policy=False)
        if gate is not None:
            return self._stop(gate, now)
        return self._limit(values, episode, step, "teleop", now)

    def on_estop(self, asserted: bool, now: float) -> Decision | None:
        self.estop_input = bool(asserted)
        self.last_estop = now
        if asserted:
            self._latch("button")
            return self._stop("estop", now)
        return None

    def on_estop_publishers(self, count: int, now: float) -> Decision | None:
        """With the heartbeat on, the e-stop's publisher leaving the graph latches at once
        (no need to wait for the timeout)."""
        if self.config.estop_timeout > 0 and self.last_estop is not None and count == 0:
            self._latch("heartbeat lost: the e-stop publisher left")
            return self._stop("estop", now)
        return None

    def on_deadman(self, held: bool, now: float) -> Decision | None:
        """The autonomy dead-man's state; a release stops policy motion at once."""
        was = self.deadman_held
        self.deadman_held, self.last_deadman = bool(held), now
        if was and not held and self.config.deadman_timeout > 0 and not self._teleop_active(now):
            self.counters.deadman += 1
            return self._stop("deadman", now)
        return None

    def _latch(self, cause: str) -> None:
        if not self.estop_latched:
            self.counters.estops += 1
            self.estop_cause = cause
        self.estop_latched = True

    def _estop_silent(self, now: float) -> bool:
        timeout = self.config.estop_timeout
        return timeout > 0 and self.last_estop is not None and now - self.last_estop > timeout

    def rearm(self, now: float | None = None) -> tuple[bool, str]:
        """Leaving a latched e-stop also revokes the episode confirmation: a human looks first."""
        if self.estop_input:
            return False, "e-stop is still asserted; release it (publish false) first"
        if self.config.estop_timeout > 0 and (self.last_estop is None or (now is not None and self._estop_silent(now))):
            return False, "the e-stop heartbeat is missing; bring the e-stop back (it publishes false) first"
        was = self.estop_latched
        self.estop_latched = False
        self.estop_cause = ""
        self._revoke()
        return True, "re-armed; confirm the episode to start" if was else "was not latched"

    def confirm_episode(self) -> tuple[bool, str]:
        """Confirms the next episode number the policy sends (or the current one if none yet)."""
        if self.estop_latched:
            return False, "e-stop latched; re-arm first"
        self.confirm_pending = True
        return True, "next episode confirmed"

    def tick(self, now: float) -> Decision | None:
        """Watchdog: a stop command every tick while the robot must not move, else None."""
        gate = self._gate(now, check_policy=True)
        if gate is None and not self._teleop_active(now):
            gate = self._deadman_gate(now)
            if gate is None and not self._episode_confirmed(self.last_episode, consume=False):
                gate = "unconfirmed"
        if gate is None:
            self._tripped = False
            return None
        if gate == "stale" and not self._tripped:
            self.counters.watchdog_trips += 1
            self._tripped = True
        return self._stop(gate, now)

    # ---- rules --------------------------------------------------------------------------
    def _teleop_active(self, now: float) -> bool:
        return self.last_teleop is not None and now - self.last_teleop < self.config.teleop_hold

    def _gate(self, now: float, check_policy: bool) -> str | None:
        if self._estop_silent(now):
            self._latch(f"heartbeat lost: silent for more than {self.config.estop_timeout:g} s")
        if self.estop_latched:
            return "estop"
        if self.config.estop_timeout > 0 and self.last_estop is None:
            self._cause = "startup"
            return "estop"  # a heartbeat e-stop never heard yet: nothing moves until it is
        stale = self.config.stale_after
        if self.last_observation is None or now - self.last_observation > stale:
            self._cause = "startup" if self.last_observation is None else "stale observation"
            return "stale"
        if check_policy:
            source = self.last_teleop if self._teleop_active(now) else self.last_policy
            if source is None or now - source > stale:
                self._cause = "stale command" if self.confirmed_episode is not None else "idle"
                return "stale"
        return None

    def _deadman_gate(self, now: float) -> str | None:
        timeout = self.config.deadman_timeout
        if timeout <= 0:
            return None
        if not self.deadman_held or self.last_deadman is None or now - self.last_deadman > timeout:
            return "deadman"
        return None

    def _episode_confirmed(self, episode: int, consume: bool = True) -> bool:
        if not self.config.require_confirmation:
            return True
        if self.confirmed_episode is not None and episode == self.confirmed_episode:
            return True
        if self.confirm_pending:
            if consume:
                self.confirmed_episode, self.confirm_pending = episode, False
            return True
        return False

    def _revoke(self) -> None:
        if self.confirmed_episode is not None or self.confirm_pending:
            self.counters.revoked += 1
        self.confirm_pending = False
        self.confirmed_episode = None

    def _stop(self, reason: str, now: float) -> Decision:
        """The stop command; a stop for a new cause revokes the confirmations given before it."""
        cause = self._cause or reason
        self._cause = ""
        if cause != self._halt:
            self._halt = cause
            if cause not in KEEPS_CONFIRMATION:
                self._revoke()
        out = self._zero.copy()
        if self.last_sent is not None:
            for axis in self.config.hold_axes:
                out[axis] = self.last_sent[axis]
        return self._send(out, self.last_episode, self.last_step, reason, now)

    def stop_now(self, reason: str, now: float) -> Decision:
        """A stop the node decides on (shutdown): the same stop command, same revocation."""
        return self._stop(reason, now)

    def bridge_stopped(self, now: float) -> Decision:
        """A bridge stopped the robot by itself (this node was silent): the confirmation is
        revoked whatever the halt before it, since a confirmation given during an earlier stop
        predates this fault, and the stop goes out labelled `BRIDGE_ACK`, the bridge's cue."""
        self._revoke()
        return self._stop(BRIDGE_ACK, now)

    def _limit(self, values: np.ndarray, episode: int, step: int, source: str, now: float) -> Decision:
        out = np.clip(values, self._lower, self._upper)
        if not np.array_equal(out, values):
            self.counters.clamped += 1
        if self.last_sent is not None and self.last_sent_time is not None:
            dt = max(now - self.last_sent_time, 0.0)
            limited = self._rate > 0
            step_max = np.where(limited, self._rate * dt, np.inf)
            ramped = np.clip(out, self.last_sent - step_max, self.last_sent + step_max)
            if not np.array_equal(ramped, out):
                self.counters.rate_limited += 1
            out = ramped
        out = self._workspace(out)
        out = np.clip(out, self._lower, self._upper)
        self.counters.passed += 1
        self._halt = None
        return self._send(out, episode, step, source, now)

    def _workspace(self, out: np.ndarray) -> np.ndarray:
        """Outside the box only motion back toward it survives, axis by axis."""
        c = self.config
        if not c.workspace_observation_indices or self.observation is None:
            return out
        out = out.copy()
        hit = False
        for i, lo, hi, axis in zip(
            c.workspace_observation_indices, c.workspace_lower, c.workspace_upper, c.workspace_action_axes,
            strict=True,
        ):
            pos = self.observation[i]
            if pos > hi and out[axis] > 0:
                out[axis], hit = 0.0, True
            elif pos < lo and out[axis] < 0:
                out[axis], hit = 0.0, True
        if hit:
            self.counters.workspace_limited += 1
        return out

    def _send(self, out: np.ndarray, episode: int, step: int, reason: str, now: float) -> Decision:
        self.last_sent, self.last_sent_time, self.last_reason = out, now, reason
        return Decision(tuple(float(v) for v in out), episode, step, reason)

    # ---- reporting ----------------------------------------------------------------------
    def status(self, now: float) -> dict[str, str]:
        def age(t: float | None) -> str:
            return "never" if t is None else f"{now - t:.3f}"

        c = self.counters
        return {
            "state": self.last_reason,
            "halt_cause": self._halt or "",
            "estop_latched": str(self.estop_latched),
            "estop_cause": self.estop_cause,
            "estop_age_s": age(self.last_estop),
            "deadman_held": str(self.deadman_held),
            "confirmed_episode": str(self.confirmed_episode),
            "confirm_pending": str(self.confirm_pending),
            "teleop_active": str(self._teleop_active(now)),
            "observation_age_s": age(self.last_observation),
            "policy_age_s": age(self.last_policy),
            "last_command": "" if self.last_sent is None else ",".join(f"{v:.4g}" for v in self.last_sent),
            **{name: str(getattr(c, name)) for name in c.__dataclass_fields__},
        }
