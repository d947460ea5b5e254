"""Real-time machinery shared by the twins: fixed-rate stepping, command latency, sensor
noise and dropouts, all driven by times the caller passes in.

Why an injected clock: a node wrapper passes its ROS clock's seconds, a test passes numbers
it chose, so the same code is deterministic under test and real-time under ROS. Times are
seconds on one monotonic clock that never goes back; "since start" means since the twin was
created (a reset starts a new episode, not a new sensor timeline). Nothing here sleeps or
reads a clock itself.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


class FixedRate:
    """Ticks of a fixed period, counted from `start`: how many are due at a given time.

    A caller that falls behind (a long garbage collection, a loaded machine) gets at most
    `max_catch_up` ticks at once; the rest are dropped and counted in `skipped`, so a twin
    never runs its simulator faster than real time to catch up for long."""

    def __init__(self, rate_hz: float, start: float, max_catch_up: int = 5) -> None:
        if not (math.isfinite(rate_hz) and rate_hz > 0):
            raise ValueError(f"rate_hz must be positive, got {rate_hz}")
        if max_catch_up < 1:
            raise ValueError("max_catch_up must be at least 1")
        self.period = 1.0 / rate_hz
        self.start = float(start)
        self.max_catch_up = int(max_catch_up)
        self.ticks = 0  # ticks handed out
        self.skipped = 0  # ticks dropped because the caller fell too far behind

    def due(self, now: float) -> int:
        """Ticks to run at `now` (0 when the next one is still in the future)."""
        # a tick k is due from start + k * period; the tolerance absorbs float rounding
        owed = int(math.floor((now - self.start) / self.period + 1e-9)) + 1 - self.ticks - self.skipped
        if owed <= 0:
            return 0
        run = min(owed, self.max_catch_up)
        self.skipped += owed - run
        self.ticks += run
        return run


class Latency(Generic[T]):
    """A command line with a fixed delay: what is in effect at `now` is the newest command
    issued at or before `now - delay_s` (before any, the `initial` command)."""

    def __init__(self, delay_s: float, initial: T) -> None:
        if not (math.isfinite(delay_s) and delay_s >= 0):
            raise ValueError(f"delay_s must be >= 0, got {delay_s}")
        self.delay_s = float(delay_s)
        self._current: tuple[float, T] = (-math.inf, initial)
        self._pending: deque[tuple[float, T]] = deque()
        self._last_push = -math.inf

    def push(self, command: T, now: float) -> None:
        if now < self._last_push:
            raise ValueError("commands must be pushed in time order")
        self._last_push = float(now)
        self._pending.append((float(now), command))

    def current(self, now: float) -> T:
        while self._pending and self._pending[0][0] + self.delay_s <= now + 1e-12:
            self._current = self._pending.popleft()
        return self._current[1]

    def issued_at(self, now: float) -> float:
        """When the command in effect at `now` was issued (-inf for the initial one)."""
        self.current(now)
        return self._current[0]

    def timed_out(self, now: float, timeout_s: float) -> bool:
        """True when no command has taken effect for longer than `timeout_s` (0: never), as a
        driver stops on its own when its commands stop."""
        return timeout_s > 0 and now - self.issued_at(now) > timeout_s + self.delay_s


class Noise:
    """Seeded Gaussian sensor noise: `noise(values, std)` adds N(0, std) per element."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def __call__(self, values, std: float | Sequence[float]) -> np.ndarray:
        v = np.asarray(values, dtype=float)
        s = np.asarray(std, dtype=float)
        if not np.any(s > 0):
            return v.copy()
        return v + self.rng.normal(0.0, 1.0, v.shape) * s


@dataclass(frozen=True)
class Window:
    """A dropout: the sensor publishes nothing for start <= t < end (seconds since start)."""

    start: float
    end: float

    def __post_init__(self) -> None:
        if not (self.end > self.start >= 0):
            raise ValueError(f"a dropout window needs 0 <= start < end, got [{self.start}, {self.end})")


@dataclass(frozen=True)
class DropoutPlan:
    """When a sensor goes silent, as configuration: fixed `windows` (seconds since start),
    plus random windows starting as a Poisson process of `rate_per_s` with exponential
    durations of mean `mean_duration_s`."""

    windows: tuple[Window, ...] = ()
    rate_per_s: float = 0.0
    mean_duration_s: float = 0.2

    def __post_init__(self) -> None:
        if self.rate_per_s < 0 or self.mean_duration_s <= 0:
            raise ValueError("rate_per_s must be >= 0 and mean_duration_s > 0")

    @classmethod
    def of(cls, spans: Iterable[tuple[float, float]]) -> DropoutPlan:
        """Fixed windows from (start, end) pairs."""
        return cls(windows=tuple(Window(float(a), float(b)) for a, b in spans))


class Dropouts:
    """A `DropoutPlan` played out: its random windows drawn from `seed`, lazily and in time
    order, so the same seed gives the same windows whatever times are asked about."""

    def __init__(self, plan: DropoutPlan = DropoutPlan(), seed: int = 0) -> None:
        self.plan = plan
        self._rng = np.random.default_rng(seed)
        self._random: list[Window] = []
        self._random_starts: list[float] = []
        self._until = 0.0

    def silent(self, t: float) -> bool:
        """True when `t` (seconds since start) lies in a dropout window."""
        if any(w.start <= t < w.end for w in self.plan.windows):  # few, and they may overlap
            return True
        if self.plan.rate_per_s > 0:
            self._generate_until(t)
            # random windows come in order without overlap: only the last one starting by t
            k = bisect.bisect_right(self._random_starts, t) - 1
            return k >= 0 and t < self._random[k].end
        return False

    def _generate_until(self, t: float) -> None:
        while self._until <= t:
            start = self._until + self._rng.exponential(1.0 / self.plan.rate_per_s)
            end = start + self._rng.exponential(self.plan.mean_duration_s)
            self._random.append(Window(start, end))
            self._random_starts.append(start)
            self._until = end

    def spans(self, until: float) -> list[tuple[float, float]]:
        """Every window that starts before `until`, fixed and random, in order."""
        if self.plan.rate_per_s > 0:
            self._generate_until(until)
        return sorted((w.start, w.end) for w in (*self.plan.windows, *self._random) if w.start < until)


class Sensor:
    """One sensor stream of a twin: when it publishes (its own rate, minus dropouts, whose
    windows count from `start`) and how many samples it has published and lost. The twin
    decides what a sample holds."""

    def __init__(self, name: str, rate_hz: float, start: float, dropouts: Dropouts | None = None) -> None:
        self.name = name
        self.clock = FixedRate(rate_hz, start, max_catch_up=1)
        self.dropouts = dropouts or Dropouts()
        self.published = 0
        self.dropped = 0

    def due(self, now: float) -> bool:
        """True when a sample is due at `now` and not silenced by a dropout (a silenced
        sample is counted in `dropped`)."""
        if not self.clock.due(now):
            return False
        if self.dropouts.silent(now - self.clock.start):
            self.dropped += 1
            return False
        self.published += 1
        return True


def check_dropout_names(plans: Mapping[str, DropoutPlan], sensors: Sequence[str]) -> None:
    """A dropout plan for a sensor the robot does not have is a typo: refuse it."""
    unknown = set(plans) - set(sensors)
    if unknown:
        raise ValueError(f"dropouts for unknown sensors {sorted(unknown)}; this robot has {tuple(sensors)}")


def sensor_streams(rates: Mapping[str, float], start: float, plans: Mapping[str, DropoutPlan],
                   seed: int) -> dict[str, Sensor]:  # fmt: skip
    """One `Sensor` per name in `rates`, each with its plan's dropouts drawn from its own
    stream of `seed` (so adding a dropout to one sensor leaves the others' windows alone)."""
    check_dropout_names(plans, list(rates))
    return {
        name: Sensor(name, rate, start, Dropouts(plans.get(name, DropoutPlan()), seed=seed * 100 + k + 1))
        for k, (name, rate) in enumerate(rates.items())
    }
