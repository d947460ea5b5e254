"""The rollout logger's database writer: one thread that owns the run database connection.

Why it is built this way:
- Subscription callbacks only put messages on `queue`; this thread does everything else, so
  the control loop's publishers are never slowed by the disk (the subscriptions' deep LOG queue
  absorbs a burst while it catches up).
- Rows (`rows.RowJoiner`) and episodes (`episodes.EpisodeBook`) are plain data; this thread
  turns their decisions into `refine_core.store` calls, and only those (no SQL here): rows go in
  batched transactions, so a SIGKILL loses at most the open batch and SIGINT (`stop`) flushes it.
- A gap in any stream's step counter becomes an `events` row of kind `gap`.
- A step of an episode no start event has announced yet is held back for `EARLY_HOLD_S`: the
  start event travels on its own (latched) topic and can arrive after the episode's first
  steps (DDS orders messages per topic, not across topics). When the start comes, the held
  steps are handled as if they had come after it; when it does not, they are logged
  unannounced (`log_unannounced`) or dropped, as before.
- On start it flags episodes a previous (killed) logger left open as incomplete.

Database keys match `refine run`: the `episode` column is the start event's `index` (0.. within
each (round, kind)); the counter only joins the streams, because it is unique while messages of
two episodes can still be in flight. Like `refine run`, only the kinds in `store_step_kinds`
keep their steps; every episode still gets its `episodes` row with the summary and step count.

`flush` answers once every message queued before the call is in a committed row and every
episode whose end was announced is closed in the database; only rows of an episode still
running that wait for their next observation stay pending.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refine_core.store.db import RunDatabase
from refine_ros.logger.episodes import Episode, EpisodeBook, Gap
from refine_ros.logger.rows import BadMessage, RowJoiner
from refine_ros.wire.messages import CountedVector, NotCounted, unpack_vector, vector_label

ITEM_BATCH = 2000
"""Queue items handled before the writer checks its clocks again."""
EARLY_HOLD_S = 2.0
"""How long a step of a not yet announced episode waits for its start event."""
FLUSH_TIMEOUT_S = 30.0
"""How long a stopping writer may take to commit what it has received (a backlog at shutdown)."""


def _counted(stream: str, msg: Any) -> CountedVector:
    """A step stream's message decoded, or BadMessage naming the stream."""
    try:
        return unpack_vector(msg)
    except NotCounted as exc:
        raise BadMessage(f"{stream}: {exc}") from None


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
        self.batch_size = batch_size
        self.flush_period = flush_period
        self.join_timeout = join_timeout
        self.store_step_kinds = None if store_step_kinds is None else frozenset(store_step_kinds)
        """Kinds whose steps are stored; None stores every kind."""
        self.log_unannounced = log_unannounced
        """False: drop steps of episodes no start event announced (a robot bridge publishes
        observations before the first episode and between episodes)."""
        self.log_safe_action = log_safe_action
        """True: every row gets `safe_<action>` columns from the "safe" stream, NaN where the
        safety node sent nothing for that step (dry run, teleop preemption)."""
        self.log = log
        self.rows = RowJoiner(action_names, observation_columns)
        self.book = EpisodeBook(join_timeout)
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.rows_written = 0
        self.gaps = 0
        self.late_parts = 0
        self.bad_messages = 0
        self.unannounced = 0
        self.last_finished: tuple | None = None
        self._last_finished_end: float = float("-inf")
        """When the last closed episode's end became known (its end_at)."""
        self.db: RunDatabase | None = None
        self.error: BaseException | None = None
        self._events: list[tuple[str, str, dict, int | None]] = []
        self._early: dict[int, list[tuple[str, float, Any]]] = {}
        """Steps of episodes the book does not know yet, by episode number, until their start
        event (or EARLY_HOLD_S) decides what they are."""
        self._flush_requests: list[tuple[float, threading.Event, list]] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rollout-log-writer", daemon=True)

    @property
    def columns(self) -> dict[str, tuple[str, ...]]:
        return self.rows.columns

    # -- lifecycle (any thread) ----------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30.0)
        if self.error is not None:
            raise self.error

    def stop(self, timeout: float = FLUSH_TIMEOUT_S) -> None:
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

    # -- the thread ----------------------------------------------------------------------------
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
                if now - last_flush >= self.flush_period or len(self.rows.pending) >= 4 * self.batch_size:
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
            if handled >= ITEM_BATCH:
                return handled
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return handled

    # -- messages (writer thread only) ------------------------------------------------------------
    def _handle(self, stream: str, received: float, msg: Any) -> None:
        try:
            if stream == "label":
                self._label(*msg)
            elif stream == "flush":
                self._flush_requests.append(msg)
            elif stream == "events":
                self._on_event(msg, received)
            elif stream.endswith("_columns"):
                self.rows.set_columns(stream[: -len("_columns")], self._json(msg, stream))
            elif stream == "safe":
                vec = _counted("safe action", msg)
                self.rows.add_safe((vec.episode, vec.step), vec.values, received, vec.episode in self.book.closed,
                                   vector_label(msg))
            elif stream == "result":
                vec = _counted("command result", msg)
                self.rows.add_result((vec.episode, vec.step), vec.values, received, vec.episode in self.book.closed)
            else:
                self._on_vector(stream, received, msg)
        except BadMessage as exc:
            self._bad(str(exc))

    @staticmethod
    def _json(msg: Any, what: str) -> Any:
        try:
            return json.loads(msg.data)
        except ValueError as exc:
            raise BadMessage(f"{what}: {exc}") from None

    def _on_event(self, msg: Any, received: float) -> None:
        event = self._json(msg, "episode event")
        if not isinstance(event, dict) or "episode" not in event:
            raise BadMessage("episode event: need a JSON object with an 'episode'")
        try:
            int(event["episode"])
        except (TypeError, ValueError):
            raise BadMessage(f"episode event: episode {event['episode']!r} is not a number") from None
        held = self._early.pop(int(event["episode"]), [])
        starts = event.get("event") == "start"
        if not starts:  # an end (or a reset) of an episode nobody started: its held steps are unannounced
            self._replay(held, release=True)
        outcome = self.book.on_event(event, received)
        for episode in outcome.close:
            self._close(episode)
        for number in outcome.forget:
            self.rows.forget(number)
        if starts:  # the held steps came before their start: handle them as if after it
            self._replay(held, release=False)

    def _replay(self, held: list[tuple[str, float, Any]], release: bool) -> None:
        for stream, at, msg in held:
            try:
                self._on_vector(stream, at, msg, release=release)
            except BadMessage as exc:  # one bad held step must not cost the others
                self._bad(str(exc))

    def _on_vector(self, stream: str, received: float, msg: Any, release: bool = False) -> None:
        vec = _counted(stream, msg)
        number, step, values = vec.episode, vec.step, vec.values
        key = (number, step)
        if number in self.book.closed or key in self.rows.written:
            self.late_parts += 1
            return
        if number not in self.book.open and not release:
            self._early.setdefault(number, []).append((stream, received, msg))
            return
        if not self.log_unannounced and not self.book.announced(number):
            self.unannounced += 1
            return
        episode = self.book.get(number)
        gap = episode.note_step(stream, step)
        if gap is not None:
            self._gap(gap)
        self.rows.add(key, stream, values, received, vec.names)
        if stream == "reward":
            episode.note_reward(step, values, received, self.join_timeout)

    def _gap(self, gap: Gap) -> None:
        self.gaps += 1
        self._events.append(("gap", gap.message, gap.data(), gap.episode))

    def _bad(self, why: str) -> None:
        self.bad_messages += 1
        if self.bad_messages <= 10 or self.bad_messages % 1000 == 0:
            self.log(f"ignored message ({self.bad_messages} so far): {why}")

    # -- database writes (writer thread only) -------------------------------------------------------
    def _resolve_run(self, episode: Episode) -> int:
        run_id = episode.context.get("run_id") or self.run_id
        if not run_id:
            latest = self.db.latest_run(self.task or None)
            if latest is None:
                run_id = self.db.create_run(self.task or "unknown", config={"source": "rollout_logger"},
                                            status="logging")
            else:
                run_id = latest["id"]
            self.run_id = int(run_id)
        return int(run_id)

    def _open(self, episode: Episode) -> tuple:
        """Begin the episode in the database the first time one of its rows is written."""
        if episode.key is None:
            run_id = self._resolve_run(episode)
            rnd = episode.context.get("round", self.default_round)
            rnd = None if rnd is None or int(rnd) < 0 else int(rnd)
            kind = str(episode.context.get("kind", self.default_kind))
            seed = episode.context.get("seed")
            seed = None if seed is None else int(seed)
            index = episode.context.get("index")
            number = episode.number if index is None else int(index)  # `refine run`'s episode column
            episode.key = (run_id, rnd, kind, number)
            if episode.announced or not self.db.reopen_episode(*episode.key):
                # (an unannounced episode a killed logger was writing keeps its committed rows)
                self.db.begin_episode(run_id, rnd, kind, number, seed=seed)
        return episode.key

    def _running(self, number: int) -> bool:
        episode = self.book.open.get(number)
        return episode is not None and episode.end_at is None

    def _release_early(self, now: float, final: bool) -> None:
        """Held steps whose start event did not come within EARLY_HOLD_S: an unannounced
        episode after all."""
        for number in [n for n, held in self._early.items() if final or now - held[0][1] >= EARLY_HOLD_S]:
            self._replay(self._early.pop(number), release=True)

    def _flush(self, final: bool) -> None:
        now = time.monotonic()
        if self._early:
            self._release_early(now, final)
        ripe = self.rows.ripe(now, self.join_timeout, final, self._running, self.log_safe_action)
        closing = self.book.closing(now, final)
        if self.rows.safe or self.rows.results:
            self.rows.forget_safe(now, max(10.0, 20 * self.join_timeout))
        if not ripe and not closing and not self._events:
            return
        with self.db.transaction():
            rows = [row for key in ripe if (row := self._row(key)) is not None]
            for start in range(0, len(rows), self.batch_size):
                self.db.insert_steps(rows[start:start + self.batch_size])
            self.rows_written += len(rows)
            self._write_events(final)
            for episode in closing:
                if final:
                    self._close(episode)
                    continue
                waiting = self.rows.pending_through(episode.number, episode.last_taken_step())
                settled, gap = episode.settle(now, waiting, self.join_timeout)
                if gap is not None:
                    self._gap(gap)
                    self._write_events(final)
                if settled:
                    self._close(episode)

    def _row(self, key: tuple[int, int]) -> dict[str, Any] | None:
        """The database row of a ripe key, or None when it is not stored (the terminal
        observation, a bridge's observations after the last action, a kind not stored)."""
        part = self.rows.take(key)
        episode = self.book.get(key[0])
        last = episode.last_taken_step()
        if last is not None and key[1] > last:
            return None  # the terminal observation (already the last row's next_*) or a robot's tail
        run_id, rnd, kind, number = self._open(episode)
        if episode.missing_streams(part):
            episode.missing_parts += 1
        episode.rows += 1
        if not self.stores_steps(kind):
            return None  # as in `refine run`: only the episode's summary row is kept
        row = {k: v for k, v in part.items() if not k.startswith("_")}
        if self.log_safe_action:
            row.update(self.rows.safe_columns(key))
        row.update(run_id=run_id, round=rnd, kind=kind, episode=number, seed=episode.context.get("seed"),
                   step=key[1])
        if len(row) != len(episode.columns):
            episode.columns.update(dict.fromkeys(row))
        return row

    def _write_events(self, final: bool) -> None:
        waiting = []
        for event in self._events:
            kind, message, data, number = event
            episode = self.book.find(number) if number is not None else None
            if episode is not None and episode.key is None and not final:
                waiting.append(event)  # recorded under the episode's run once it opens
                continue
            run_id = episode.key[0] if episode is not None and episode.key else (self.run_id or None)
            rnd = episode.key[1] if episode is not None and episode.key else None
            self.db.log_event(run_id, rnd, kind, message, data)
        self._events = waiting

    def _close(self, episode: Episode) -> None:
        """End the episode in the database with everything known about it; called again when
        a later end event adds to the summary."""
        with self.db.transaction():
            if episode.key is None:
                self._open(episode)
            run_id, rnd, kind, number = episode.key
            self.db.end_episode(run_id, rnd, kind, number, summary=episode.summary(), complete=episode.complete,
                                error=episode.error)
            if not self.stores_steps(kind):
                self.db.set_episode_fields(*episode.key, steps=episode.reported_steps())
            if episode.columns and self.stores_steps(kind):
                self.db.set_episode_fields(*episode.key, columns=list(episode.columns))
        self.last_finished = episode.key
        if episode.end_at is not None:
            self._last_finished_end = episode.end_at
        self.book.mark_closed(episode)
        if episode.number in self.book.closed:  # (a restarted counter's rows are the new episode's)
            self.rows.drop_tail(episode.number)  # past its last step: never stored, as in _row
        self.rows.forget(episode.number)

    # -- flush and label requests ----------------------------------------------------------------
    def _unflushed(self) -> list[str]:
        """What a flush still waits for: rows and ends of episodes whose end was announced
        (rows of a running episode may rightly wait for their next observation)."""
        waiting = self.book.ended_numbers()
        waiting |= {n for n in self.rows.pending_episodes() if not self._running(n)}
        return [f"episode counter {n}" for n in sorted(waiting)]

    def _answer_flushes(self, final: bool = False) -> None:
        self._flush(final=final)
        waiting = [] if final else self._unflushed()  # (held steps of unannounced episodes do not count)
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

    def _label_target(self) -> tuple | None:
        """The episode an operator's verdict is about: the one that ended last. A person judges
        an episode the moment it ends, while its row may still wait here for the tail of its
        streams (up to the settle window), so an ended episode not yet closed comes before the
        last closed one; labelling "the last closed" gave a verdict to the episode before."""
        settling = [episode for episode in self.book.open.values() if episode.end_at is not None]
        latest = max(settling, key=lambda episode: episode.end_at, default=None)
        if latest is not None and latest.end_at >= self._last_finished_end:
            return self._open(latest)
        return self.last_finished if self.last_finished is not None else self.db.last_complete_episode()

    def _label(self, success: bool, done: threading.Event, answer: list) -> None:
        try:
            self._flush(final=False)
            key = self._label_target()
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
