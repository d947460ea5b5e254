"""Rollout logger: every step seen on DDS becomes a row of the run database's `steps` table.

Why it is built this way:
- Subscription callbacks only put the message on a queue. The control loop's publishers are
  never slowed by the disk: the subscriptions use the deep LOG QoS, so DDS buffers a burst on
  the reader side while the writer thread catches up.
- One writer thread owns the database connection. It joins the step streams (observation,
  policy step, action, reward, expert action) by their (episode, step) counters into rows with
  the same column names as refine_core's rollout tables (`act_*`, `next_*`, ...), and commits
  them in batched transactions. A SIGKILL therefore loses at most the open batch; SIGINT
  flushes it.
- Streams arrive on separate topics with no ordering between them, so a row is written once
  its first part is `join_timeout` old; episode events are applied to the rows at that time.
- A gap in any stream's step counter is counted and recorded as an `events` row of kind `gap`.
- On start it flags episodes a previous (killed) logger left open as incomplete.

Episode events (`refine/episode_events`, JSON): `{"event": "start", "episode": E, "round": R,
"kind": K, "seed": S[, "index": N, "run_id": I]}` opens episode E (the counter carried by the
counted vectors) under that context; `{"event": "end", "episode": E, ...summary}` closes it with
the given summary (return, metric, success, ...), which fills in what the logger computed itself.
Steps of an episode nobody announced are logged under the `round` and `kind` parameters.

Database keys match `refine run`: the `episode` column is the event's `index` (0.. within each
(round, kind)); the counter E only joins the streams, because it is unique while messages of
two episodes can still be in flight. Like `refine run`, only the kinds in `store_step_kinds`
keep their steps (sim profiles: the diagnostic table the analyst reads); every episode still
gets its `episodes` row with the summary and its step count.

With `log_safe_action` (real profiles) the safety node's `refine/safe_action` fills
`safe_<action>` columns: what the robot was actually sent for the step, beside the policy's
`act_*`. It is a side stream: a row never waits for it and gets NaN when no safe command
carried its counters (dry run), so a silent safety node cannot hold back or drop a row.

`logger/flush` (std_srvs/Trigger) answers once every message queued before the call is in a
committed row and every episode whose end was announced is closed in the database; only rows
of an episode still running that wait for their next observation stay pending.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_core.store.db import RunDatabase
from refine_ros import qos
from refine_ros.messages import COUNTERS
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, declare_parameters

STREAMS = ("observation", "policy_step", "action", "reward", "expert")
TOPICS = {
    "observation": "refine/observation",
    "policy_step": "refine/policy_step",
    "action": "refine/action",
    "reward": "refine/reward",
    "expert": "refine/expert_action",
}
SAFE_TOPIC = "refine/safe_action"  # with log_safe_action: what the safety node sent the robot
COLUMN_TOPICS = {
    "observation": "refine/observation_columns",
    "policy_step": "refine/policy_step_columns",
}
REWARD_COLUMNS = ("reward", "done", "success")
_NOT_SUMMARY = ("event", "episode", "source", "round", "kind", "run_id", "complete")
_CONTEXT = ("round", "kind", "seed", "run_id", "index")
_ITEM_BATCH = 2000  # queue items handled before the writer checks its clocks again


@dataclass
class _Episode:
    """What the writer knows about one counted episode."""

    number: int
    context: dict[str, Any] = field(default_factory=dict)
    announced: bool = False  # a start event was seen by this logger
    key: tuple | None = None  # (run_id, round, kind, episode) once begun in the database
    rows: int = 0
    reward_sum: float = 0.0
    success: float = 0.0
    gaps: int = 0
    missing_parts: int = 0
    end_at: float | None = None  # monotonic time after which it is closed
    end_summary: dict[str, Any] = field(default_factory=dict)
    last_step: dict[str, int] = field(default_factory=dict)  # per stream
    done_step: int | None = None  # the step whose reward said done
    columns: dict[str, None] = field(default_factory=dict)  # ordered set of logged columns
    complete: bool = True  # unless an end event says otherwise


class LogWriter:
    """The writer thread's state and its loop; no ROS in here, so it can be driven directly."""

    def __init__(
        self,
        db_path: Path,
        *,
        task: str = "",
        run_id: int = 0,
        round: int | None = None,
        kind: str = "diagnostic",
        action_names: tuple[str, ...] = (),
        observation_columns: tuple[str, ...] = (),
        batch_size: int = 500,
        flush_period: float = 0.2,
        join_timeout: float = 0.5,
        store_step_kinds: tuple[str, ...] | None = None,
        log_unannounced: bool = True,
        log_safe_action: bool = False,
        log: Callable[[str], None] = print,
    ) -> None:
        self.db_path = db_path
        self.task = task
        self.run_id = run_id
        self.default_round = round
        self.default_kind = kind
        self.action_names = action_names
        self.columns: dict[str, tuple[str, ...]] = {"observation": observation_columns}
        self.batch_size = batch_size
        self.flush_period = flush_period
        self.join_timeout = join_timeout
        self.store_step_kinds = None if store_step_kinds is None else frozenset(store_step_kinds)
        """Kinds whose steps are stored; None stores every kind."""
        self.log_unannounced = log_unannounced
        """False: drop steps of episodes no start event announced (a robot bridge publishes
        observations before the first episode and between episodes)."""
        self.unannounced = 0
        self.log_safe_action = log_safe_action
        """True: every row gets `safe_<action>` columns from the "safe" stream, NaN where the
        safety node sent nothing for that step (dry run, teleop preemption)."""
        self._safe: dict[tuple[int, int], tuple[float, Any]] = {}  # first safe command per step
        self.log = log
        self._flush_requests: list[tuple[float, threading.Event, list]] = []
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.rows_written = 0
        self.gaps = 0
        self.late_parts = 0
        self.bad_messages = 0
        self.last_finished: tuple | None = None
        self._episodes: dict[int, _Episode] = {}
        self._pending: dict[tuple[int, int], dict[str, Any]] = {}
        self._born: dict[tuple[int, int], float] = {}
        self._written: set[tuple[int, int]] = set()
        self._closed: dict[int, _Episode] = {}  # finished episodes, for late end events
        self._events: list[tuple[str, str, dict, int | None]] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rollout-log-writer", daemon=True)
        self.db: RunDatabase | None = None
        self.error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30.0)
        if self.error is not None:
            raise self.error

    def stop(self, timeout: float = 30.0) -> None:
        """Flush everything received so far (SIGINT path) and close the database."""
        self._stop.set()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def put(self, stream: str, msg: Any) -> None:
        self.queue.put((stream, time.monotonic(), msg))

    def label(self, success: bool, timeout: float = 10.0) -> tuple[bool, str]:
        """Ask the writer thread to label the last finished episode; waits for its answer."""
        done = threading.Event()
        answer: list[tuple[bool, str]] = []
        self.queue.put(("label", time.monotonic(), (success, done, answer)))
        if not done.wait(timeout):
            return False, "the database writer did not answer in time"
        return answer[0]

    def flush(self, timeout: float = 30.0) -> tuple[bool, str]:
        """Wait until everything queued so far is committed (see the module docstring)."""
        done = threading.Event()
        answer: list[tuple[bool, str]] = []
        self.queue.put(("flush", time.monotonic(), (time.monotonic() + timeout, done, answer)))
        if not done.wait(timeout + 1.0):
            return False, "the database writer did not answer in time"
        return answer[0]

    def stores_steps(self, kind: str) -> bool:
        return self.store_step_kinds is None or kind in self.store_step_kinds

    # -- thread --------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.db = RunDatabase(self.db_path)
            flagged = self.db.mark_incomplete_episodes()
            if flagged:
                self.db.log_event(None, None, "logger_restart",
                                  f"{flagged} episode(s) left open by a previous logger marked incomplete",
                                  {"episodes": flagged})
                self.log(f"marked {flagged} open episode(s) incomplete")
        except BaseException as exc:  # reported by start()
            self.error = exc
            self._ready.set()
            return
        self._ready.set()
        last_flush = time.monotonic()
        try:
            while True:
                stopping = self._stop.is_set()
                handled = self._drain(timeout=0.0 if stopping else self.flush_period / 4)
                now = time.monotonic()
                if stopping and handled == 0:
                    self._flush(final=True)
                    if self._flush_requests:
                        self._answer_flushes(final=True)
                    break
                if now - last_flush >= self.flush_period or len(self._pending) >= 4 * self.batch_size:
                    self._flush(final=False)
                    last_flush = now
                if self._flush_requests:
                    self._answer_flushes()
        except BaseException as exc:
            self.error = exc
            self.log(f"writer stopped: {exc!r}")
        finally:
            self.db.close()

    def _drain(self, timeout: float) -> int:
        handled = 0
        try:
            item = self.queue.get(timeout=timeout) if timeout > 0 else self.queue.get_nowait()
        except queue.Empty:
            return 0
        while True:
            self._handle(*item)
            handled += 1
            if handled >= _ITEM_BATCH:
                return handled
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return handled

    # -- message handling (writer thread only) ---------------------------------------------------
    def _handle(self, stream: str, received: float, msg: Any) -> None:
        if stream == "label":
            self._label(*msg)
        elif stream == "flush":
            self._flush_requests.append(msg)
        elif stream == "events":
            self._on_event(msg, received)
        elif stream.endswith("_columns"):
            self._on_columns(stream[: -len("_columns")], msg)
        elif stream == "safe":
            self._on_safe(received, msg)
        else:
            self._on_vector(stream, received, msg)

    def _episode(self, number: int) -> _Episode:
        ep = self._episodes.get(number)
        if ep is None:
            ep = self._episodes[number] = _Episode(number)
        return ep

    def _on_columns(self, stream: str, msg: String) -> None:
        try:
            names = json.loads(msg.data)
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ValueError("not a JSON list of strings")
        except ValueError as exc:
            self._bad(f"{stream} columns: {exc}")
            return
        self.columns[stream] = tuple(names)

    def _on_event(self, msg: String, received: float) -> None:
        try:
            event = json.loads(msg.data)
            if not isinstance(event, dict) or "episode" not in event:
                raise ValueError("need a JSON object with an 'episode'")
            number = int(event["episode"])
        except (ValueError, TypeError) as exc:
            self._bad(f"episode event: {exc}")
            return
        kind = event.get("event")
        ep = self._episodes.get(number)
        if kind == "start":
            if ep is not None and ep.key is not None and ep.end_at is None:
                ep.complete = False
                self._close(ep)  # a restarted episode number: close the old one
            if ep is not None and ep.key is not None:
                self._episodes.pop(number)
                self._drop_rows(number)
            self._closed.pop(number, None)
            ep = self._episode(number)
            ep.announced = True
            ep.context.update(
                {k: event[k] for k in _CONTEXT if k in event}
            )
        elif kind == "end":
            summary = {k: v for k, v in event.items() if k not in _NOT_SUMMARY}
            nested = summary.pop("summary", None)
            if isinstance(nested, dict):
                summary.update(nested)
            complete = bool(event.get("complete", True))
            finished = self._closed.get(number)
            if finished is not None:  # a second opinion (the learner's after the sim's)
                finished.end_summary.update(summary)
                finished.complete = finished.complete and complete
                self._close(finished)
                return
            ep = self._episode(number)
            ep.end_summary.update(summary)
            ep.complete = ep.complete and complete
            ep.end_at = received + self.join_timeout
        else:
            self._episode(number).context.update(
                {k: event[k] for k in _CONTEXT if k in event}
            )

    def _on_safe(self, received: float, msg: Float64MultiArray) -> None:
        """Keep the first safe command carrying a step's counters: the safety node's answer to
        that step's policy command. Later ones with the same counters are watchdog stops
        repeating the last step. The stream never opens, delays or completes a row."""
        data = msg.data
        if msg.layout.data_offset != COUNTERS or len(data) != COUNTERS + len(self.action_names):
            self._bad(f"safe action: not a counted vector of actions {self.action_names}")
            return
        key = (int(data[0]), int(data[1]))
        if key[0] in self._closed or key in self._written or key in self._safe:
            return
        self._safe[key] = (received, tuple(float(v) for v in data[COUNTERS:]))

    def _safe_columns(self, key: tuple[int, int]) -> dict[str, float]:
        values = self._safe.pop(key, (0.0, (math.nan,) * len(self.action_names)))[1]
        return {f"safe_{n}": v for n, v in zip(self.action_names, values, strict=True)}

    def _forget_safe(self, now: float) -> None:
        """Safe commands no row claimed (steps never logged) do not pile up."""
        horizon = max(10.0, 20 * self.join_timeout)
        for key in [k for k, (t, _v) in self._safe.items() if now - t > horizon and k not in self._pending]:
            del self._safe[key]

    def _drop_rows(self, number: int) -> None:
        for key in [k for k in self._written if k[0] == number]:
            self._written.discard(key)

    def _on_vector(self, stream: str, received: float, msg: Float64MultiArray) -> None:
        data = msg.data
        if msg.layout.data_offset != COUNTERS or len(data) < COUNTERS:
            self._bad(f"{stream}: not a counted vector")
            return
        number, step = int(data[0]), int(data[1])
        values = data[COUNTERS:]
        key = (number, step)
        if number in self._closed or key in self._written:
            self.late_parts += 1
            return
        if not self.log_unannounced and not (number in self._episodes and self._episodes[number].announced):
            self.unannounced += 1
            return
        ep = self._episode(number)
        self._check_gap(stream, step, ep)
        row = self._pending.get(key)
        if row is None:
            row = self._pending[key] = {}
            self._born[key] = received
        if stream == "observation":
            names = self.columns.get("observation", ())
            if len(names) != len(values):
                self._bad(f"observation has {len(values)} values for {len(names)} columns")
                return
            row.update(zip(names, values, strict=True))
            row["_observation"] = True
            prev = self._pending.get((number, step - 1))
            if prev is not None:
                prev.update(zip((f"next_{n}" for n in names), values, strict=True))
                prev["_next"] = True
        elif stream == "policy_step":
            names = self.columns.get("policy_step", ())
            if len(names) != len(values):
                self._bad(f"policy_step has {len(values)} values for {len(names)} columns")
                return
            row.update(zip(names, values, strict=True))
        elif stream in ("action", "expert"):
            prefix = "act_" if stream == "action" else "expert_"
            if len(values) != len(self.action_names):
                self._bad(f"{stream} has {len(values)} values for actions {self.action_names}")
                return
            row.update(zip((prefix + n for n in self.action_names), values, strict=True))
        elif stream == "reward":
            if len(values) < 2:
                self._bad("reward must hold [reward, done, success]")
                return
            reward, done = float(values[0]), bool(values[1] > 0.5)
            row["reward"], row["done"] = reward, int(done)
            ep.reward_sum += reward
            if len(values) > 2:
                ep.success = max(ep.success, float(values[2]))
            if done:
                ep.done_step = step
                if ep.end_at is None:
                    ep.end_at = received + self.join_timeout
        row["_" + stream] = True

    def _check_gap(self, stream: str, step: int, ep: _Episode) -> None:
        """Every stream counts steps from 0 within an episode; a jump is a loss somewhere
        between the publisher and here (or a publisher that skipped steps)."""
        last = ep.last_step.get(stream)
        ep.last_step[stream] = step
        expected = 0 if last is None else last + 1
        number = ep.number
        if step > expected:
            missing = step - expected
            self.gaps += 1
            ep.gaps += missing
            self._events.append((
                "gap",
                f"{stream}: {missing} step(s) missing before step {step} of episode {number}",
                {"stream": stream, "episode": number, "first_missing": expected,
                 "next_step": step, "missing": missing},
                number,
            ))

    def _bad(self, why: str) -> None:
        self.bad_messages += 1
        if self.bad_messages <= 10 or self.bad_messages % 1000 == 0:
            self.log(f"ignored message ({self.bad_messages} so far): {why}")

    # -- database writes (writer thread only) ----------------------------------------------------
    def _resolve_run(self, ep: _Episode) -> int:
        run_id = ep.context.get("run_id") or self.run_id
        if not run_id:
            latest = self.db.latest_run(self.task or None)
            if latest is None:
                run_id = self.db.create_run(
                    self.task or "unknown", config={"source": "rollout_logger"}, status="logging"
                )
            else:
                run_id = latest["id"]
            self.run_id = int(run_id)
        return int(run_id)

    def _open(self, ep: _Episode) -> tuple:
        """Begin the episode in the database the first time one of its rows is written."""
        if ep.key is None:
            run_id = self._resolve_run(ep)
            rnd = ep.context.get("round", self.default_round)
            rnd = None if rnd is None or int(rnd) < 0 else int(rnd)
            kind = str(ep.context.get("kind", self.default_kind))
            seed = ep.context.get("seed")
            seed = None if seed is None else int(seed)
            index = ep.context.get("index")
            number = ep.number if index is None else int(index)  # `refine run`'s episode column
            ep.key = (run_id, rnd, kind, number)
            if ep.announced or not self.db.reopen_episode(*ep.key):
                # (an unannounced episode a killed logger was writing keeps its committed rows)
                self.db.begin_episode(run_id, rnd, kind, number, seed=seed)
        return ep.key

    def _flush(self, final: bool) -> None:
        now = time.monotonic()
        ripe = sorted(k for k, born in self._born.items() if final or self._ripe(k, now - born))
        closing = [
            ep for ep in self._episodes.values()
            if ep.end_at is not None and (final or now >= ep.end_at)
        ]
        if self._safe:
            self._forget_safe(now)
        if not ripe and not closing and not self._events:
            return
        with self.db.transaction():
            rows = []
            for key in ripe:
                part = self._pending.pop(key)
                del self._born[key]
                self._written.add(key)
                ep = self._episode(key[0])
                last = self._last_step(ep)
                if last is not None and key[1] > last:
                    # the terminal observation (already the last row's next_*), or what a robot's
                    # bridge kept publishing after the episode's last action
                    continue
                run_id, rnd, kind, number = self._open(ep)
                missing = [s for s in ep.last_step if s != "expert" and not part.get("_" + s)]
                if missing:
                    ep.missing_parts += 1
                ep.rows += 1
                if not self.stores_steps(kind):
                    continue  # as in `refine run`: only the episode's summary row is kept
                row = {k: v for k, v in part.items() if not k.startswith("_")}
                if self.log_safe_action:
                    row.update(self._safe_columns(key))
                row.update(run_id=run_id, round=rnd, kind=kind, episode=number,
                           seed=ep.context.get("seed"), step=key[1])
                if len(row) != len(ep.columns):
                    ep.columns.update(dict.fromkeys(row))
                rows.append(row)
            for start in range(0, len(rows), self.batch_size):
                self.db.insert_steps(rows[start:start + self.batch_size])
            self.rows_written += len(rows)
            waiting = []
            for event in self._events:
                kind, message, data, number = event
                ep = self._episodes.get(number) or self._closed.get(number)
                if ep is not None and ep.key is None and not final:
                    waiting.append(event)  # recorded under the episode's run once it opens
                    continue
                run_id = ep.key[0] if ep is not None and ep.key else (self.run_id or None)
                rnd = ep.key[1] if ep is not None and ep.key else None
                self.db.log_event(run_id, rnd, kind, message, data)
            self._events = waiting
            for ep in closing:
                if final or self._settled(ep, now):
                    self._close(ep)

    def _last_step(self, ep: _Episode) -> int | None:
        """The episode's last step as its publishers told it: the step whose reward said
        done, else the step count an end event reported."""
        if ep.done_step is not None:
            return ep.done_step
        steps = ep.end_summary.get("steps")
        return int(steps) - 1 if isinstance(steps, (int, float)) and steps > 0 else None

    def _settled(self, ep: _Episode, now: float) -> bool:
        """Close an episode only when its steps are in. An end event travels on its own topic
        and can overtake the step streams under load; closing early would drop their tail."""
        if any(k[0] == ep.number for k in self._pending):
            return False
        last = self._last_step(ep)
        if last is None:
            return True
        waited = now - (ep.end_at or now)
        arrived = all(
            step >= last + (1 if stream == "observation" and ep.done_step is not None else 0)
            for stream, step in ep.last_step.items() if stream != "expert"
        )
        if arrived:
            return True
        if waited < max(10.0, 20 * self.join_timeout):
            return False
        missing = last + 1 - ep.rows
        if missing > 0:  # lost at the end of the episode, where counters cannot show a jump
            self.gaps += 1
            ep.gaps += missing
            self._events.append((
                "gap", f"{missing} step(s) missing at the end of episode {ep.number}",
                {"stream": "all", "episode": ep.number, "first_missing": ep.rows,
                 "next_step": last + 1, "missing": missing}, ep.number,
            ))
        return True

    def _ripe(self, key: tuple[int, int], age: float) -> bool:
        """Old enough for its other streams to have arrived, and holding its next observation
        unless the episode is over (or the row has waited far too long)."""
        if age < self.join_timeout:
            return False
        ep = self._episodes.get(key[0])
        return (
            bool(self._pending[key].get("_next"))
            or ep is None
            or ep.end_at is not None
            or age >= 5 * self.join_timeout
        )

    def _close(self, ep: _Episode) -> None:
        """End the episode in the database with everything known about it; called again when
        a later end event adds to the summary."""
        with self.db.transaction():
            self._end(ep)

    def _end(self, ep: _Episode) -> None:
        if ep.key is None:
            self._open(ep)
        summary: dict[str, Any] = {"return": ep.reward_sum, "success": ep.success}
        summary.update(ep.end_summary)
        summary.update(gaps=ep.gaps, rows_missing_parts=ep.missing_parts)
        error = f"{ep.gaps} message(s) missing from step counters (gaps)" if ep.gaps else None
        run_id, rnd, kind, number = ep.key
        self.db.end_episode(run_id, rnd, kind, number, summary=_finite(summary),
                            complete=ep.complete, error=error)
        if not self.stores_steps(kind):
            steps = ep.end_summary.get("steps")
            steps = int(steps) if isinstance(steps, (int, float)) and math.isfinite(steps) else ep.rows
            self.db.set_episode_fields(*ep.key, steps=steps)
        if ep.columns and self.stores_steps(kind):
            self.db.set_episode_fields(*ep.key, columns=list(ep.columns))
        self.last_finished = ep.key
        ep.end_at = None
        self._episodes.pop(ep.number, None)
        self._drop_rows(ep.number)
        self._closed[ep.number] = ep

    def _unflushed(self) -> list[str]:
        """What a flush still waits for: rows and ends of episodes whose end was announced
        (rows of a running episode may rightly wait for their next observation)."""
        waiting = {ep.number for ep in self._episodes.values() if ep.end_at is not None}
        for number, _step in self._pending:
            ep = self._episodes.get(number)
            if ep is None or ep.end_at is not None:
                waiting.add(number)
        return [f"episode counter {n}" for n in sorted(waiting)]

    def _answer_flushes(self, final: bool = False) -> None:
        self._flush(final=final)
        waiting = [] if final else self._unflushed()
        now = time.monotonic()
        keep = []
        for deadline, done, answer in self._flush_requests:
            if not waiting:
                answer.append((True, f"committed; {self.rows_written} step rows written so far"))
            elif now >= deadline:
                answer.append((False, f"timed out waiting for {', '.join(waiting)}"))
            else:
                keep.append((deadline, done, answer))
                continue
            done.set()
        self._flush_requests = keep

    def _label(self, success: bool, done: threading.Event, answer: list) -> None:
        try:
            self._flush(final=False)
            key = self.last_finished
            if key is None:
                key = self.db.last_complete_episode()
            if key is None:
                answer.append((False, "no finished episode to label yet"))
                return
            label = "success" if success else "failure"
            self.db.set_episode_label(*key, label)
            self.db.log_event(key[0], key[1], "label", f"episode {key[3]} labelled {label}",
                              {"episode": key[3], "kind": key[2], "label": label})
            answer.append((True, f"episode {key[3]} (round {key[1]}, {key[2]}) labelled {label}"))
        except Exception as exc:  # a bad label request must not stop the writer
            answer.append((False, f"could not label: {exc}"))
        finally:
            done.set()


def _finite(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in summary.items()
    }


# name -> (default, description, range); all read-only
PARAMETERS: dict[str, Param] = {
    "run_dir": Param("runs/ros", "run directory; the database is <run_dir>/run.db"),
    "task": Param("", "task name (door_open | car_racing): action and observation columns"),
    "run_id": Param(0, "run to log into; 0 = from episode events, else the latest run (or a new one)", (0, 2**31 - 1)),
    "round": Param(-1, "round for steps of unannounced episodes (-1: none)", (-1, 100000)),
    "kind": Param("diagnostic", "episode kind for steps of unannounced episodes"),
    "batch_size": Param(500, "rows per INSERT batch", (1, 100000)),
    "flush_period": Param(0.2, "seconds between transactions", (0.01, 10.0)),
    "join_timeout": Param(0.5, "seconds a row waits for its other streams before it is written", (0.01, 10.0)),
    "store_step_kinds": Param(["diagnostic"], "episode kinds whose steps are stored (as `refine run`: diagnostic); "
                         "['all'] = every kind; every episode still gets its episodes row"),
    "log_unannounced": Param(True, "log steps of episodes no start event announced under `round`/`kind` (false on "
                        "robots: their bridge publishes observations between episodes)"),
    "flush_timeout": Param(30.0, "seconds logger/flush waits for announced episode ends to be committed", (0.1, 3600.0)),
    "log_safe_action": Param(False, "also log the safety node's refine/safe_action as safe_<action> columns (what the "
                        "robot was sent; NaN where no safe command was published for a step, e.g. dry run)"),
}


class RolloutLogger(Node):
    """Subscribes to every step stream with the LOG QoS and hands messages to a `LogWriter`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("rollout_logger", **kwargs)
        declare_parameters(self, PARAMETERS)
        value = lambda name: self.get_parameter(name).value  # noqa: E731

        task_name = str(value("task"))
        action_names: tuple[str, ...] = ()
        observation_columns: tuple[str, ...] = ()
        if task_name:
            from refine_core.tasks import get_task

            spec = get_task(task_name).spec
            action_names, observation_columns = spec.action_names, spec.observation_columns
        rnd = int(value("round"))
        kinds = tuple(str(k) for k in (value("store_step_kinds") or ()))
        self.flush_timeout = float(value("flush_timeout"))
        self.writer = LogWriter(
            Path(str(value("run_dir"))),
            task=task_name,
            run_id=int(value("run_id")),
            round=None if rnd < 0 else rnd,
            kind=str(value("kind")),
            action_names=action_names,
            observation_columns=observation_columns,
            batch_size=int(value("batch_size")),
            flush_period=float(value("flush_period")),
            join_timeout=float(value("join_timeout")),
            store_step_kinds=None if "all" in kinds else kinds,
            log_unannounced=bool(value("log_unannounced")),
            log_safe_action=bool(value("log_safe_action")),
            log=lambda text: self.get_logger().info(text),
        )
        self.writer.start()

        put = self.writer.put
        for stream, topic in TOPICS.items():
            self.create_subscription(
                Float64MultiArray, topic, lambda msg, s=stream: put(s, msg), qos.LOG
            )
        for stream, topic in COLUMN_TOPICS.items():
            self.create_subscription(
                String, topic, lambda msg, s=stream: put(s + "_columns", msg), qos.LATCHED
            )
        if self.writer.log_safe_action:
            self.create_subscription(Float64MultiArray, SAFE_TOPIC, lambda msg: put("safe", msg), qos.LOG)
        self.create_subscription(
            String, "refine/episode_events", lambda msg: put("events", msg), qos.LATCHED
        )
        self.create_service(SetBool, "logger/label_episode", self._on_label)
        self.create_service(Trigger, "logger/flush", self._on_flush)
        stored = "every kind" if self.writer.store_step_kinds is None else ", ".join(sorted(kinds)) or "no kind"
        self.get_logger().info(f"logging to {self.writer.db_path}; steps stored for {stored}")

    def _on_label(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.success, response.message = self.writer.label(bool(request.data))
        return response

    def _on_flush(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.writer.flush(self.flush_timeout)
        return response

    def destroy_node(self) -> None:
        self.writer.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(RolloutLogger, args)


if __name__ == "__main__":
    main()
