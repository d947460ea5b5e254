"""Episode bookkeeping for the rollout logger: what is known about each counted episode, from
its start and end events and from the step streams. No ROS, no database.

Why it is separate: an episode's life (announced, rows arriving, end announced, every stream
caught up, closed, maybe completed later by a second end event) is a small state machine with
its own rules about gaps and stragglers; the writer only asks it what to do.

Episode events (`refine/episode_events`, JSON): `{"event": "start", "episode": E, "round": R,
"kind": K, "seed": S[, "index": N, "run_id": I]}` opens episode E (the counter carried by the
counted vectors) under that context; `{"event": "end", "episode": E, ...summary}` closes it with
the given summary (return, metric, success, ...), which fills in what the logger computed itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

NOT_SUMMARY = ("event", "episode", "source", "round", "kind", "run_id", "complete")
CONTEXT = ("round", "kind", "seed", "run_id", "index")
SIDE_STREAMS = ("expert",)
"""Streams a row never waits for and whose end does not count (the expert's label)."""


@dataclass
class Gap:
    """Steps missing from a stream, as recorded in an `events` row of kind `gap`."""

    stream: str
    episode: int
    first_missing: int
    next_step: int
    missing: int
    last_seen: dict[str, int] = field(default_factory=dict)
    """For a loss at the end (stream "all"): each stream's last step, which says whose tail
    never came."""

    @property
    def message(self) -> str:
        if self.stream == "all":
            seen = ", ".join(f"{stream} {step}" for stream, step in sorted(self.last_seen.items()))
            return (f"{self.missing} step(s) missing at the end of episode {self.episode} (rows {self.first_missing} "
                    f"of {self.next_step}; last step per stream: {seen or 'none'})")
        return (f"{self.stream}: {self.missing} step(s) missing before step {self.next_step} of episode "
                f"{self.episode}")

    def data(self) -> dict[str, Any]:
        data = {"stream": self.stream, "episode": self.episode, "first_missing": self.first_missing,
                "next_step": self.next_step, "missing": self.missing}
        return data | ({"last_seen": dict(self.last_seen)} if self.last_seen else {})


@dataclass
class Episode:
    """What the logger knows about one counted episode."""

    number: int
    context: dict[str, Any] = field(default_factory=dict)
    announced: bool = False
    """A start event was seen by this logger."""
    key: tuple | None = None
    """(run_id, round, kind, episode) once begun in the database."""
    rows: int = 0
    reward_sum: float = 0.0
    success: float = 0.0
    gaps: int = 0
    missing_parts: int = 0
    end_at: float | None = None
    """Monotonic time after which it may be closed (an end was announced or seen)."""
    end_summary: dict[str, Any] = field(default_factory=dict)
    last_step: dict[str, int] = field(default_factory=dict)
    """Per stream, the last step seen."""
    done_step: int | None = None
    """The step whose reward said done."""
    columns: dict[str, None] = field(default_factory=dict)
    """Ordered set of the columns its rows had."""
    complete: bool = True
    """Unless an end event says otherwise."""

    def note_step(self, stream: str, step: int) -> Gap | None:
        """Every stream counts steps from 0 within an episode; a jump is a loss somewhere
        between the publisher and here (or a publisher that skipped steps)."""
        last = self.last_step.get(stream)
        self.last_step[stream] = step
        expected = 0 if last is None else last + 1
        if step <= expected:
            return None
        gap = Gap(stream, self.number, expected, step, step - expected)
        self.gaps += gap.missing
        return gap

    def note_reward(self, step: int, values, received: float, join_timeout: float) -> bool:
        """Accumulate `[reward, done, success]`; True when it says done."""
        reward, done = float(values[0]), bool(values[1] > 0.5)
        self.reward_sum += reward
        if len(values) > 2:
            self.success = max(self.success, float(values[2]))
        if done:
            self.done_step = step
            if self.end_at is None:
                self.end_at = received + join_timeout
        return done

    def last_taken_step(self) -> int | None:
        """The episode's last step as its publishers told it: the step whose reward said
        done, else the step count an end event reported."""
        if self.done_step is not None:
            return self.done_step
        steps = self.end_summary.get("steps")
        return int(steps) - 1 if isinstance(steps, (int, float)) and steps > 0 else None

    def missing_streams(self, present: dict[str, Any]) -> list[str]:
        """Streams this episode has that a row's parts (`_<stream>` flags) lack."""
        return [s for s in self.last_step if s not in SIDE_STREAMS and not present.get("_" + s)]

    def settle(self, now: float, has_pending_rows: bool, join_timeout: float) -> tuple[bool, Gap | None]:
        """(may it close now, the gap at its end if one must be recorded). An end event travels
        on its own topic and can overtake the step streams under load; closing early would
        drop their tail, so it waits for every stream to reach the last step, at most
        max(10 s, 20 join timeouts), and then records what never came as a gap."""
        if has_pending_rows:
            return False, None
        last = self.last_taken_step()
        if last is None:
            return True, None
        waited = now - (self.end_at or now)
        arrived = all(
            step >= last + (1 if stream == "observation" and self.done_step is not None else 0)
            for stream, step in self.last_step.items() if stream not in SIDE_STREAMS
        )
        if arrived:
            return True, None
        if waited < max(10.0, 20 * join_timeout):
            return False, None
        missing = last + 1 - self.rows
        if missing <= 0:
            return True, None
        self.gaps += missing  # lost at the end of the episode, where counters cannot show a jump
        return True, Gap("all", self.number, self.rows, last + 1, missing, dict(self.last_step))

    def summary(self) -> dict[str, Any]:
        """The episodes row's summary: what the logger computed, then what the end events
        said, then the logger's own loss counts; non-finite numbers as None."""
        summary: dict[str, Any] = {"return": self.reward_sum, "success": self.success}
        summary.update(self.end_summary)
        summary.update(gaps=self.gaps, rows_missing_parts=self.missing_parts)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()}

    @property
    def error(self) -> str | None:
        """Why the episode failed, as its end event said (e.g. the learner's observation
        timeout), and the logger's own losses."""
        said = self.end_summary.get("error")
        parts = [str(said)] if said else []
        if self.gaps:
            parts.append(f"{self.gaps} message(s) missing from step counters (gaps)")
        return "; ".join(parts) or None

    def reported_steps(self) -> int:
        """Steps the episode took by its end event (else the rows seen)."""
        steps = self.end_summary.get("steps")
        return int(steps) if isinstance(steps, (int, float)) and math.isfinite(steps) else self.rows


@dataclass
class EventOutcome:
    """What the writer must do in the database after an episode event."""

    close: list[Episode] = field(default_factory=list)
    """Episodes to (re)close now: one a restart replaced, or one a later end event completed."""
    forget: list[int] = field(default_factory=list)
    """Episode numbers whose written-row memory goes (their counter starts over)."""


class EpisodeBook:
    """Every episode the logger has seen, open or closed, keyed by its counter."""

    def __init__(self, join_timeout: float) -> None:
        self.join_timeout = join_timeout
        self.open: dict[int, Episode] = {}
        self.closed: dict[int, Episode] = {}
        """Finished episodes, for late end events and stragglers."""

    def get(self, number: int) -> Episode:
        episode = self.open.get(number)
        if episode is None:
            episode = self.open[number] = Episode(number)
        return episode

    def find(self, number: int) -> Episode | None:
        return self.open.get(number) or self.closed.get(number)

    def announced(self, number: int) -> bool:
        return number in self.open and self.open[number].announced

    def on_event(self, event: dict[str, Any], received: float) -> EventOutcome:
        """Apply a parsed episode event (it has an integer `episode`)."""
        number = int(event["episode"])
        kind = event.get("event")
        outcome = EventOutcome()
        episode = self.open.get(number)
        if kind == "start":
            if episode is not None and episode.key is not None:
                if episode.end_at is None:  # a restarted episode number: close the old one
                    episode.complete = False
                    outcome.close.append(episode)
                self.open.pop(number)
                outcome.forget.append(number)
            self.closed.pop(number, None)
            episode = self.get(number)
            episode.announced = True
            episode.context.update({k: event[k] for k in CONTEXT if k in event})
        elif kind == "end":
            summary = {k: v for k, v in event.items() if k not in NOT_SUMMARY}
            nested = summary.pop("summary", None)
            if isinstance(nested, dict):
                summary.update(nested)
            complete = bool(event.get("complete", True))
            finished = self.closed.get(number)
            if finished is not None:  # a second opinion (the learner's after the sim's)
                finished.end_summary.update(summary)
                finished.complete = finished.complete and complete
                outcome.close.append(finished)
                return outcome
            episode = self.get(number)
            episode.end_summary.update(summary)
            episode.complete = episode.complete and complete
            episode.end_at = received + self.join_timeout
        else:
            self.get(number).context.update({k: event[k] for k in CONTEXT if k in event})
        return outcome

    def closing(self, now: float, final: bool) -> list[Episode]:
        """Open episodes whose end is due."""
        return [ep for ep in self.open.values() if ep.end_at is not None and (final or now >= ep.end_at)]

    def mark_closed(self, episode: Episode) -> None:
        """Closed in the database. A restarted counter already has a new open episode: that
        one stays, and the old one is not kept for late events."""
        episode.end_at = None
        if self.open.get(episode.number) is episode:
            del self.open[episode.number]
        if episode.number not in self.open:
            self.closed[episode.number] = episode

    def ended_numbers(self) -> set[int]:
        """Open episodes whose end was announced (a flush waits for them)."""
        return {ep.number for ep in self.open.values() if ep.end_at is not None}
