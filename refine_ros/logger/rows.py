"""Joining the step streams into rows, for the rollout logger. No ROS, no database.

Why it is separate: streams arrive on separate topics with no ordering between them, so a row
is assembled from parts keyed by the (episode, step) counters, named like refine_core's rollout
tables (observation columns, `mean_*`, `act_*`, `expert_*`, `reward`, `done`, and the next
observation as `next_*`), and let go once its first part is `join_timeout` old. That is all
this module does; which episode a row belongs to and when it is written is the writer's.

With `log_safe_action` (real profiles) the safety node's `refine/safe_action` fills
`safe_<action>` columns: what the robot was actually sent for the step, beside the policy's
`act_*`. A row waits for it as it waits for its next observation, because on a loaded
machine the safety node's answer can come later than the policy's own streams; but only up to
5 join timeouts, after which the row is written with NaN there (dry run, or a command the
safety node skipped for a newer one), so a silent safety node can delay a row, never drop it.
With them go `halted` and `rejected`: whether a stop went out instead of the step's command
(the bridge's `refine/command_result`, which also knows its own stops; without it, the safety
node's label on the safe command) and whether the robot's driver refused the command (the
bridge's result only; NaN without it). A step the robot never executed is never logged as if
it had been.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from refine_core.rollout.schema import EXECUTION_COLUMNS, action_column, next_column
from refine_ros.safety import stop_label

Key = tuple[int, int]
"""(episode counter, step)."""


class BadMessage(ValueError):
    """A message that cannot be part of a row; the text says why (it is counted, not fatal)."""


class RowJoiner:
    """Rows being assembled, the keys already written, and the safe-action side stream."""

    def __init__(self, action_names: tuple[str, ...], observation_columns: tuple[str, ...]) -> None:
        self.action_names = action_names
        self.columns: dict[str, tuple[str, ...]] = {"observation": observation_columns}
        self.pending: dict[Key, dict[str, Any]] = {}
        self.born: dict[Key, float] = {}
        self.written: set[Key] = set()
        self.safe: dict[Key, tuple[float, tuple[float, ...], float]] = {}
        """The first safe command per step, and whether the safety node labelled it a stop."""
        self.results: dict[Key, tuple[float, tuple[float, float]]] = {}
        """The bridge's [halted, rejected] per step (its first result)."""

    def set_columns(self, stream: str, names: Any) -> None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadMessage(f"{stream} columns: not a JSON list of strings")
        self.columns[stream] = tuple(names)

    # -- parts ------------------------------------------------------------------------------------
    def add(self, key: Key, stream: str, values: Sequence[float], received: float,
            names: Sequence[str] = ()) -> dict[str, Any]:
        """Merge one stream's values into the row of `key` (created on its first part) and
        return the row; a part that does not fit its columns raises BadMessage. `names`: the
        column names a Step message carried, which then name the observation or policy-step
        columns (a counted vector has none: its names came on the `*_columns` topic)."""
        if names and stream in ("observation", "policy_step") and tuple(names) != self.columns.get(stream):
            self.columns[stream] = tuple(names)
        row = self.pending.get(key)
        if row is None:
            row = self.pending[key] = {}
            self.born[key] = received
        if stream == "observation":
            names = self.columns.get("observation", ())
            if len(names) != len(values):
                raise BadMessage(f"observation has {len(values)} values for {len(names)} columns")
            row.update(zip(names, values, strict=True))
            previous = self.pending.get((key[0], key[1] - 1))
            if previous is not None:
                previous.update(zip((next_column(n) for n in names), values, strict=True))
                previous["_next"] = True
        elif stream == "policy_step":
            names = self.columns.get("policy_step", ())
            if len(names) != len(values):
                raise BadMessage(f"policy_step has {len(values)} values for {len(names)} columns")
            row.update(zip(names, values, strict=True))
        elif stream in ("action", "expert"):
            family = "act" if stream == "action" else "expert"
            if len(values) != len(self.action_names):
                raise BadMessage(f"{stream} has {len(values)} values for actions {self.action_names}")
            row.update(zip((action_column(family, n) for n in self.action_names), values, strict=True))
        elif stream == "reward":
            if len(values) < 2:
                raise BadMessage("reward must hold [reward, done, success]")
            row["reward"], row["done"] = float(values[0]), int(values[1] > 0.5)
        row["_" + stream] = True
        return row

    def ripe(self, now: float, join_timeout: float, final: bool,
             running: Callable[[int], bool], want_safe: bool = False) -> list[Key]:
        """Rows to write now, in order: old enough for the other streams to have arrived, and
        holding their next observation (and, with `want_safe`, their safe command) unless the
        episode is over (`running` is False) or the row has waited far too long (5 join
        timeouts). `final`: every row."""
        if final:
            return sorted(self.born)
        ripe = []
        for key, born in self.born.items():
            age = now - born
            if age < join_timeout:
                continue
            complete = self.pending[key].get("_next") and (not want_safe or key in self.safe)
            if complete or not running(key[0]) or age >= 5 * join_timeout:
                ripe.append(key)
        return sorted(ripe)

    def take(self, key: Key) -> dict[str, Any]:
        """Remove the row of `key` (with its `_<stream>` flags) and remember it was written."""
        row = self.pending.pop(key)
        del self.born[key]
        self.written.add(key)
        return row

    def pending_episodes(self) -> set[int]:
        return {number for number, _step in self.pending}

    def pending_through(self, number: int, last: int | None) -> bool:
        """Rows of episode `number` up to step `last` (None: any step) still waiting: what the
        episode's close waits for. A bridge goes on observing under the ended episode's counter
        until the next start event; those rows are the robot's tail, never stored, and while
        the robot runs there is always one younger than the join timeout."""
        return any(n == number and (last is None or step <= last) for n, step in self.pending)

    def drop_tail(self, number: int) -> None:
        """Drop the rows of closed episode `number` still waiting: its close waited for every
        step through its last, so these come after it (the terminal observation, already the
        last row's next_*, and the robot's tail)."""
        for key in [key for key in self.pending if key[0] == number]:
            del self.pending[key], self.born[key]

    def forget(self, number: int) -> None:
        """The episode is closed (or its counter starts over): drop what is kept for it."""
        self.written = {k for k in self.written if k[0] != number}

    # -- the safe-action side stream ---------------------------------------------------------------
    def add_safe(self, key: Key, values: Sequence[float], received: float, closed: bool, label: str = "") -> None:
        """Keep the first safe command carrying a step's counters: the safety node's answer to
        that step's policy command. Later ones with the same counters are watchdog stops
        repeating the last step."""
        if len(values) != len(self.action_names):
            raise BadMessage(f"safe action: not a counted vector of actions {self.action_names}")
        if closed or key in self.written or key in self.safe:
            return
        halted = math.nan if not label else float(stop_label(label))
        self.safe[key] = (received, tuple(float(v) for v in values), halted)

    def add_result(self, key: Key, values: Sequence[float], received: float, closed: bool) -> None:
        """Keep the bridge's first [halted, rejected] for a step."""
        if len(values) != 2:
            raise BadMessage("command result: expected [halted, rejected]")
        if closed or key in self.written or key in self.results:
            return
        self.results[key] = (received, (float(values[0]), float(values[1])))

    def safe_columns(self, key: Key) -> dict[str, float]:
        _t, values, halted = self.safe.pop(key, (0.0, (math.nan,) * len(self.action_names), math.nan))
        _t, result = self.results.pop(key, (0.0, (halted, math.nan)))
        out = {action_column("safe", n): v for n, v in zip(self.action_names, values, strict=True)}
        out.update(zip(EXECUTION_COLUMNS, result, strict=True))
        return out

    def forget_safe(self, now: float, horizon: float) -> None:
        """Safe commands and results no row claimed (steps never logged) do not pile up."""
        for side in (self.safe, self.results):
            for key in [k for k, item in side.items() if now - item[0] > horizon and k not in self.pending]:
                del side[key]
