"""The run database: one SQLite file per run directory, readable with `sqlite-utils` or Datasette.

Why these choices:
- WAL mode and a generous busy timeout, because the ROS rollout logger, the learner and a user's
  `sqlite-utils` shell may hold the file at the same time.
- Explicit `BEGIN IMMEDIATE ... COMMIT` in `transaction()`, because a round (program, fit,
  episodes, steps) must land entirely or not at all: a killed run resumes from the last
  committed round. Nested blocks become savepoints.
- Steps go in through one `executemany` per batch inside one transaction; per-row inserts are
  two orders of magnitude slower and the logger must keep up with the control loop.
- Arrays (demonstration inputs, fitted weights) are `np.savez` blobs loaded with
  `allow_pickle=False`, so a database file can never smuggle code into a process.
"""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sqlite_utils

from refine_core.store.schema import (
    JSON_COLUMNS,
    MIGRATIONS,
    SCHEMA_VERSION,
    STEP_ID_COLUMNS,
    TABLES,
)

DB_FILENAME = "run.db"


class RunDatabaseError(RuntimeError):
    """The file is not a usable run database (not SQLite, or unreadable)."""


class SchemaVersionError(RunDatabaseError):
    """The file was written by a newer refine_ros; opening it could corrupt it."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def encode_arrays(arrays: Mapping[str, Any]) -> bytes:
    """Plain numeric arrays -> an npz blob (no pickled objects can enter)."""
    buffer = io.BytesIO()
    clean = {}
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"array {name!r} has dtype object; only numeric arrays are stored")
        clean[name] = array
    np.savez(buffer, **clean)
    return buffer.getvalue()


def decode_arrays(blob: bytes | None) -> dict[str, np.ndarray]:
    if blob is None:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def to_json(value: Any) -> str | None:
    if value is None:
        return None
    # allow_nan keeps NaN metrics readable by Python; json.loads accepts them back.
    return json.dumps(value, default=_json_default, sort_keys=False)


def _from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value


def _sql_type(series: pd.Series) -> type:
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_integer_dtype(series):
        return int
    if pd.api.types.is_float_dtype(series) or series.isna().all():
        # An all-missing column is numeric until shown otherwise: a TEXT column would turn
        # the floats of later episodes into strings.
        return float
    return str


def _column_values(series: pd.Series) -> list:
    values = series.tolist()
    if isinstance(series.dtype, np.dtype) and series.dtype.kind in "biuf":
        return values
    # Nullable and object columns may hold pd.NA / NaT, which sqlite3 cannot bind.
    return [None if (v is pd.NA or v is pd.NaT) else v for v in values]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class RunDatabase:
    """A run database file. Open an existing file to append to it.

    `path` may be the `.db` file or a run directory (then `run.db` inside it is used).
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        path = Path(path)
        if path.is_dir() or (not path.suffix and not path.exists()):
            path = path / DB_FILENAME
        if not path.exists() and not create:
            raise RunDatabaseError(f"no run database at {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        self._savepoints = 0
        try:
            conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
            self.db = sqlite_utils.Database(conn)
            with self.db.ensure_autocommit_on():
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=OFF")
            self._ensure_schema()
        except sqlite3.DatabaseError as exc:
            with contextlib.suppress(Exception):
                conn.close()
            raise RunDatabaseError(f"{path} is not a usable run database: {exc}") from None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> RunDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_schema(self) -> None:
        meta = self.db["meta"]
        found = 0
        if meta.exists():
            row = self.conn.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()
            found = int(row[0]) if row else 0
            if found > SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.path} has schema version {found}, newer than this refine_ros "
                    f"understands ({SCHEMA_VERSION}); upgrade refine_ros to open it"
                )
            if found == SCHEMA_VERSION and self._schema_complete():
                return  # opening needs no write lock, so readers never wait for a writer
        with self.transaction():
            for name, (columns, pk, indexes) in TABLES.items():
                table = self.db[name]
                if not table.exists():
                    table.create(columns, pk=pk or None, if_not_exists=True)
                else:
                    missing = {c: t for c, t in columns.items() if c not in table.columns_dict}
                    for column, col_type in missing.items():
                        table.add_column(column, col_type)
                for index in indexes:
                    table.create_index(list(index), if_not_exists=True)
            for version in range(found + 1, SCHEMA_VERSION + 1):
                for sql, params in MIGRATIONS.get(version, ()):
                    self.conn.execute(sql, params)
            self.conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )

    def _schema_complete(self) -> bool:
        for name, (columns, _pk, _indexes) in TABLES.items():
            table = self.db[name]
            if not table.exists() or not set(columns) <= set(table.columns_dict):
                return False
        return True

    @property
    def schema_version(self) -> int:
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    # -- transactions ------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[RunDatabase]:
        """All writes inside commit together or not at all; nested blocks are savepoints."""
        with self._lock:
            if self._depth == 0:
                if self.conn.in_transaction:  # a stray implicit transaction; finish it first
                    self.conn.execute("COMMIT")
                self.conn.execute("BEGIN IMMEDIATE")
                self._depth = 1
                try:
                    yield self
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute("ROLLBACK")
                    raise
                else:
                    try:
                        self.conn.execute("COMMIT")
                    except BaseException:
                        if self.conn.in_transaction:
                            self.conn.execute("ROLLBACK")
                        raise
                finally:
                    self._depth = 0
            else:
                self._savepoints += 1
                name = f"refine_sp_{self._savepoints}"
                self.conn.execute(f"SAVEPOINT {name}")
                self._depth += 1
                try:
                    yield self
                except BaseException:
                    if self.conn.in_transaction:
                        self.conn.execute(f"ROLLBACK TO SAVEPOINT {name}")
                        self.conn.execute(f"RELEASE SAVEPOINT {name}")
                    raise
                else:
                    self.conn.execute(f"RELEASE SAVEPOINT {name}")
                finally:
                    self._depth -= 1

    def _insert(self, table: str, record: Mapping[str, Any]) -> int:
        columns = list(record)
        sql = (
            f"INSERT INTO {_quote(table)} ({', '.join(map(_quote, columns))}) "
            f"VALUES ({', '.join('?' for _ in columns)})"
        )
        with self.transaction():
            cursor = self.conn.execute(sql, [record[c] for c in columns])
            return int(cursor.lastrowid)

    def _select(self, sql: str, params: Sequence[Any] = ()) -> list[dict]:
        # The lock keeps a reader thread from seeing another thread's half-written transaction
        # on this shared connection.
        with self._lock:
            cursor = self.conn.execute(sql, list(params))
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    @staticmethod
    def _decode(table: str, row: dict) -> dict:
        for column in JSON_COLUMNS.get(table, ()):
            if column in row:
                row[column] = _from_json(row[column])
        return row

    # -- runs --------------------------------------------------------------------------------

    def create_run(
        self, task: str, *, config: Mapping[str, Any] | None = None, analyst: str | None = None,
        status: str = "created",
    ) -> int:
        stamp = now()
        return self._insert("runs", {
            "task": task, "created": stamp, "updated": stamp, "config": to_json(dict(config or {})),
            "analyst": analyst, "status": status,
        })

    def run(self, run_id: int) -> dict | None:
        rows = self._select("SELECT * FROM runs WHERE id = ?", (run_id,))
        return self._decode("runs", rows[0]) if rows else None

    def runs(self) -> list[dict]:
        return [self._decode("runs", r) for r in self._select("SELECT * FROM runs ORDER BY id")]

    def latest_run(self, task: str | None = None) -> dict | None:
        if task is None:
            rows = self._select("SELECT * FROM runs ORDER BY id DESC LIMIT 1")
        else:
            rows = self._select(
                "SELECT * FROM runs WHERE task = ? ORDER BY id DESC LIMIT 1", (task,)
            )
        return self._decode("runs", rows[0]) if rows else None

    def update_run(self, run_id: int, **fields: Any) -> None:
        if "config" in fields:
            fields["config"] = to_json(fields["config"])
        fields["updated"] = now()
        self._update("runs", "id = ?", (run_id,), fields)

    def _update(self, table: str, where: str, params: Sequence[Any], fields: Mapping) -> int:
        if not fields:
            return 0
        sets = ", ".join(f"{_quote(c)} = ?" for c in fields)
        with self.transaction():
            cursor = self.conn.execute(
                f"UPDATE {_quote(table)} SET {sets} WHERE {where}", [*fields.values(), *params]
            )
            return cursor.rowcount

    # -- demonstrations ----------------------------------------------------------------------

    def save_demonstration(
        self,
        run_id: int,
        *,
        task: str,
        seed: int,
        inputs: Mapping[str, np.ndarray],
        actions: np.ndarray,
        rewards: np.ndarray,
        summary: Mapping[str, Any],
        source: str,
        label: str | None = None,
        columns: Sequence[str] | None = None,
        table: pd.DataFrame | None = None,
        take: int | None = None,
    ) -> int:
        """Store the run's demonstration, and its step table as `kind='demo'`, episode `take`.
        `take` None replaces every take the run had with this one (take 0); a number adds that
        take (replacing only an earlier copy of the same number). `source` says who drove
        (`schema.SIMULATED_EXPERT`, or `teleop (<robot>)`), `label` is the operator's note,
        `columns` the observation columns the inputs were built from."""
        if not isinstance(source, str) or not source.strip():
            raise ValueError("a demonstration needs a source (who drove, on which robot or simulator)")
        arrays = {f"inputs/{name}": value for name, value in inputs.items()}
        arrays["actions"] = np.asarray(actions)
        arrays["rewards"] = np.asarray(rewards)
        with self.transaction():
            if take is None:
                for (old,) in self.conn.execute(
                        "SELECT DISTINCT take FROM demonstrations WHERE run_id = ?", (run_id,)).fetchall():
                    self._delete_episode(run_id, None, "demo", int(old or 0))
                self.conn.execute("DELETE FROM demonstrations WHERE run_id = ?", (run_id,))
                take = 0
            else:
                take = int(take)
                self.conn.execute("DELETE FROM demonstrations WHERE run_id = ? AND take = ?", (run_id, take))
            demo_id = self._insert("demonstrations", {
                "run_id": run_id, "task": task, "seed": int(seed), "steps": int(len(actions)),
                "return": _float_or_none(summary.get("return")),
                "metric": _float_or_none(summary.get("metric")),
                "success": _float_or_none(summary.get("success")),
                "summary": to_json(dict(summary)), "arrays": encode_arrays(arrays),
                "created": now(), "source": source, "label": label,
                "columns": None if columns is None else to_json(list(columns)),
                "take": take,
            })
            self._delete_episode(run_id, None, "demo", take)  # a replaced take's steps go too
            if table is not None:
                self.save_episode(
                    run_id, None, "demo", take, seed=int(seed), summary=summary, table=table, label=label
                )
        return demo_id

    def demonstration_takes(self, run_id: int) -> list[int]:
        """The take numbers stored for the run, ascending."""
        rows = self.conn.execute(
            "SELECT DISTINCT COALESCE(take, 0) FROM demonstrations WHERE run_id = ? ORDER BY 1", (run_id,)
        ).fetchall()
        return [int(r[0]) for r in rows]

    def load_demonstration(self, run_id: int, take: int | None = None) -> dict | None:
        """One stored take (default: the newest stored): its row plus `inputs`, `actions`,
        `rewards` arrays."""
        if take is None:
            rows = self._select(
                "SELECT * FROM demonstrations WHERE run_id = ? ORDER BY id DESC LIMIT 1", (run_id,)
            )
        else:
            rows = self._select(
                "SELECT * FROM demonstrations WHERE run_id = ? AND COALESCE(take, 0) = ? ORDER BY id DESC LIMIT 1",
                (run_id, int(take)),
            )
        if not rows:
            return None
        row = self._decode("demonstrations", rows[0])
        row["take"] = int(row.get("take") or 0)
        arrays = decode_arrays(row.pop("arrays"))
        row["inputs"] = {
            key.split("/", 1)[1]: value for key, value in arrays.items() if key.startswith("inputs/")
        }
        row["actions"] = arrays["actions"]
        row["rewards"] = arrays["rewards"]
        return row

    # -- rounds ------------------------------------------------------------------------------

    def save_round(
        self,
        run_id: int,
        round: int,
        *,
        status: str = "committed",
        program: str | None = None,
        fit_report: Mapping[str, Any] | None = None,
        weights: Mapping[str, np.ndarray] | None = None,
        info_schema: Any = None,
        metrics: Mapping[str, Any] | None = None,
        selection_metric: float | None = None,
        eval_metric: float | None = None,
        diagnostics: str | None = None,
        decision: str | None = None,
        reasoning: str | None = None,
        error: str | None = None,
        timings: Mapping[str, float] | None = None,
        next_program: str | None = None,
        decision_reason: str | None = None,
    ) -> None:
        """Insert or replace round `round` of the run (a re-run of a round overwrites it).
        `next_program` is the revision the round decided on: what a resumed run starts from;
        `decision_reason` the analyst's one-line reason for its decision."""
        if info_schema is not None and not isinstance(info_schema, Mapping):
            info_schema = {
                "weights": list(getattr(info_schema, "weights", ())),
                "latents": list(getattr(info_schema, "latents", ())),
                "warnings": list(getattr(info_schema, "warnings", ())),
            }
        stamp = now()
        record = {
            "run_id": run_id, "round": int(round), "status": status, "program": program,
            "fit_report": to_json(fit_report), "weights": None if weights is None else
            encode_arrays(weights), "info_schema": to_json(info_schema),
            "metrics": to_json(metrics), "selection_metric": _float_or_none(selection_metric),
            "eval_metric": _float_or_none(eval_metric), "diagnostics": diagnostics,
            "decision": decision, "reasoning": reasoning, "error": error,
            "timings": to_json(timings), "next_program": next_program,
            "decision_reason": decision_reason, "created": stamp, "updated": stamp,
        }
        with self.transaction():
            old = self._select(
                "SELECT created FROM rounds WHERE run_id = ? AND round = ?", (run_id, round)
            )
            if old:
                record["created"] = old[0]["created"]
                self.conn.execute(
                    "DELETE FROM rounds WHERE run_id = ? AND round = ?", (run_id, round)
                )
            self._insert("rounds", record)

    def update_round(self, run_id: int, round: int, **fields: Any) -> None:
        """Change some fields of an existing round (e.g. add eval metrics after `refine eval`)."""
        for column in JSON_COLUMNS["rounds"]:
            if column in fields:
                fields[column] = to_json(fields[column])
        if "weights" in fields and fields["weights"] is not None:
            fields["weights"] = encode_arrays(fields["weights"])
        fields["updated"] = now()
        if self._update("rounds", "run_id = ? AND round = ?", (run_id, round), fields) == 0:
            raise KeyError(f"run {run_id} has no round {round}")

    def rounds(self, run_id: int, *, status: str | None = None) -> list[dict]:
        """Rounds in order, without the weights blob (see `round_weights`)."""
        sql = "SELECT * FROM rounds WHERE run_id = ?"
        params: list[Any] = [run_id]
        if status is not None:
            sql += " AND status = ?"
            params.append(status)
        rows = self._select(sql + " ORDER BY round", params)
        for row in rows:
            row["has_weights"] = row.pop("weights") is not None
        return [self._decode("rounds", r) for r in rows]

    def round(self, run_id: int, round: int) -> dict | None:
        """One round with its weights decoded into numpy arrays."""
        rows = self._select(
            "SELECT * FROM rounds WHERE run_id = ? AND round = ?", (run_id, round)
        )
        if not rows:
            return None
        row = self._decode("rounds", rows[0])
        row["weights"] = decode_arrays(row["weights"])
        return row

    def round_weights(self, run_id: int, round: int) -> dict[str, np.ndarray]:
        row = self.conn.execute(
            "SELECT weights FROM rounds WHERE run_id = ? AND round = ?", (run_id, round)
        ).fetchone()
        if row is None:
            raise KeyError(f"run {run_id} has no round {round}")
        return decode_arrays(row[0])

    def last_round(self, run_id: int) -> int | None:
        row = self.conn.execute(
            "SELECT MAX(round) FROM rounds WHERE run_id = ?", (run_id,)
        ).fetchone()
        return None if row[0] is None else int(row[0])

    def last_committed_round(self, run_id: int) -> int | None:
        row = self.conn.execute(
            "SELECT MAX(round) FROM rounds WHERE run_id = ? AND status = 'committed'", (run_id,)
        ).fetchone()
        return None if row[0] is None else int(row[0])

    # -- episodes and steps ------------------------------------------------------------------

    @staticmethod
    def _episode_record(summary: Mapping[str, Any]) -> dict:
        return {
            "return": _float_or_none(summary.get("return")),
            "metric": _float_or_none(summary.get("metric")),
            "success": _float_or_none(summary.get("success")),
            "summary": to_json(dict(summary)),
        }

    def _delete_episode(self, run_id: int, round: int | None, kind: str, episode: int) -> None:
        key = (run_id, round, kind, episode)
        where = "run_id = ? AND round IS ? AND kind = ? AND episode = ?"
        self.conn.execute(f"DELETE FROM episodes WHERE {where}", key)
        self.conn.execute(f"DELETE FROM steps WHERE {where}", key)

    def save_episode(
        self,
        run_id: int,
        round: int | None,
        kind: str,
        episode: int,
        *,
        seed: int | None,
        summary: Mapping[str, Any],
        table: pd.DataFrame | None = None,
        complete: bool = True,
        error: str | None = None,
        label: str | None = None,
    ) -> int:
        """Store one finished episode (and its steps), replacing an earlier copy of it."""
        with self.transaction():
            self._delete_episode(run_id, round, kind, episode)
            steps = int(summary.get("steps", 0 if table is None else len(table)))
            record = {
                "run_id": run_id, "round": round, "kind": kind, "episode": int(episode),
                "seed": None if seed is None else int(seed), "steps": steps,
                "complete": int(bool(complete)), "label": label, "error": error,
                "columns": None if table is None else to_json(list(table.columns)),
                "created": now(), **self._episode_record(summary),
            }
            episode_id = self._insert("episodes", record)
            if table is not None and len(table):
                self.insert_steps(
                    table, run_id=run_id, round=round, kind=kind, episode=episode, seed=seed
                )
        return episode_id

    def begin_episode(
        self, run_id: int, round: int | None, kind: str, episode: int, *, seed: int | None = None
    ) -> int:
        """Open an episode whose steps arrive in batches (the ROS logger); `complete` stays NULL
        until `end_episode`, so a crash leaves it recognisably unfinished."""
        with self.transaction():
            self._delete_episode(run_id, round, kind, episode)
            return self._insert("episodes", {
                "run_id": run_id, "round": round, "kind": kind, "episode": int(episode),
                "seed": seed, "steps": 0, "complete": None, "created": now(),
            })

    def end_episode(
        self, run_id: int, round: int | None, kind: str, episode: int, *,
        summary: Mapping[str, Any], complete: bool = True, error: str | None = None,
    ) -> None:
        with self.transaction():
            count = self.conn.execute(
                "SELECT COUNT(*) FROM steps WHERE run_id = ? AND round IS ? AND kind = ? "
                "AND episode = ?", (run_id, round, kind, episode),
            ).fetchone()[0]
            fields = {"complete": int(bool(complete)), "error": error, "steps": int(count),
                      **self._episode_record(summary)}
            self._update(
                "episodes", "run_id = ? AND round IS ? AND kind = ? AND episode = ?",
                (run_id, round, kind, episode), fields,
            )

    def episode_row(self, run_id: int, round: int | None, kind: str, episode: int) -> dict | None:
        """One episode's row (None if it was never begun); `complete` is None while it runs."""
        rows = self._select("SELECT * FROM episodes WHERE run_id = ? AND round IS ? AND kind = ? AND episode = ?",
                            (run_id, round, kind, episode))
        return self._decode("episodes", rows[0]) if rows else None

    def reopen_episode(self, run_id: int, round: int | None, kind: str, episode: int) -> bool:
        """Mark an existing episode as running again (complete NULL) and keep its rows: a
        restarted logger carries on writing the episode a killed one began. False if the
        episode was never begun."""
        return self._update("episodes", "run_id = ? AND round IS ? AND kind = ? AND episode = ?",
                            (run_id, round, kind, episode), {"complete": None}) > 0

    def set_episode_fields(self, run_id: int, round: int | None, kind: str, episode: int, *,
                           steps: int | None = None, columns: Sequence[str] | None = None) -> None:
        """The step count of an episode whose steps are not kept, or the columns it logged."""
        fields: dict[str, Any] = {}
        if steps is not None:
            fields["steps"] = int(steps)
        if columns is not None:
            fields["columns"] = to_json(list(columns))
        self._update("episodes", "run_id = ? AND round IS ? AND kind = ? AND episode = ?",
                     (run_id, round, kind, episode), fields)

    def last_complete_episode(self) -> tuple[int, int | None, str, int] | None:
        """(run_id, round, kind, episode) of the most recently begun episode that ended complete."""
        rows = self._select("SELECT run_id, round, kind, episode FROM episodes WHERE complete = 1 "
                            "ORDER BY id DESC LIMIT 1")
        return tuple(rows[0].values()) if rows else None

    def count(self, table: str, run_id: int | None = None, *, kinds: Sequence[str] | None = None,
              episode: int | None = None, complete: bool | None = None) -> int:
        """Rows of a run-database table, optionally of one run, of some episode kinds (episodes,
        steps, events), one episode number (episodes, steps) or completeness (episodes)."""
        if table not in TABLES or table == "meta":
            raise ValueError(f"no table {table!r} to count")
        clauses, params = [], []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if kinds is not None:
            clauses.append(f"kind IN ({', '.join('?' for _ in kinds)})")
            params += list(kinds)
        if episode is not None:
            clauses.append("episode = ?")
            params.append(episode)
        if complete is not None:
            clauses.append("complete = ?")
            params.append(int(complete))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        return int(self._select(f"SELECT COUNT(*) AS n FROM {_quote(table)}{where}", params)[0]["n"])

    def mark_incomplete_episodes(self, run_id: int | None = None) -> int:
        """Flag episodes that were begun but never ended (complete=0); returns how many."""
        where = "complete IS NULL" + ("" if run_id is None else " AND run_id = ?")
        params = () if run_id is None else (run_id,)
        with self.transaction():
            return self._update("episodes", where, params, {"complete": 0})

    def set_episode_label(
        self, run_id: int, round: int | None, kind: str, episode: int, label: str | None
    ) -> None:
        """Record an operator's success/failure verdict on a (real-robot) episode."""
        if label not in (None, "success", "failure"):
            raise ValueError(f"label must be 'success', 'failure' or None, got {label!r}")
        changed = self._update(
            "episodes", "run_id = ? AND round IS ? AND kind = ? AND episode = ?",
            (run_id, round, kind, episode), {"label": label},
        )
        if changed == 0:
            raise KeyError(f"no episode {episode} of kind {kind!r} in round {round}")

    def episodes(
        self, run_id: int, round: int | None = None, kind: str | None = None
    ) -> pd.DataFrame:
        sql, params = self._filter("SELECT * FROM episodes", run_id, round, kind, None)
        rows = [self._decode("episodes", r) for r in self._select(sql + " ORDER BY id", params)]
        columns = list(TABLES["episodes"][0])
        return pd.DataFrame(rows, columns=columns)

    @staticmethod
    def _filter(
        sql: str, run_id: int, round: int | None, kind: str | None, episode: int | None
    ) -> tuple[str, list[Any]]:
        clauses, params = ["run_id = ?"], [run_id]
        for column, value in (("round", round), ("kind", kind), ("episode", episode)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        return f"{sql} WHERE {' AND '.join(clauses)}", params

    def _ensure_step_columns(self, frame: pd.DataFrame) -> None:
        table = self.db["steps"]
        existing = table.columns_dict
        for column in frame.columns:
            if column not in existing:
                table.add_column(column, _sql_type(frame[column]))

    def insert_steps(
        self, rows: pd.DataFrame | Iterable[Mapping[str, Any]], **ids: Any
    ) -> int:
        """Append step rows; `ids` (run_id, round, kind, episode, seed) fill or override the id
        columns. New columns are added to the table as they appear. Returns the row count."""
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame.from_records(list(rows))
        if len(frame) == 0:
            return 0
        frame = frame.copy(deep=False)
        for column, value in ids.items():
            if column not in STEP_ID_COLUMNS:
                raise ValueError(f"unknown step id column {column!r}")
            frame[column] = value
        if "run_id" not in frame.columns:
            raise ValueError("step rows need a run_id")
        columns = list(frame.columns)
        # tolist() turns numpy scalars into Python ones, which sqlite3 binds natively.
        data = zip(*(_column_values(frame[c]) for c in columns), strict=True)
        sql = (
            f"INSERT INTO steps ({', '.join(map(_quote, columns))}) "
            f"VALUES ({', '.join('?' for _ in columns)})"
        )
        with self.transaction():
            self._ensure_step_columns(frame)
            self.conn.executemany(sql, data)
        return len(frame)

    def load_steps(
        self,
        run_id: int,
        round: int | None = None,
        kind: str | None = None,
        episode: int | None = None,
    ) -> pd.DataFrame:
        """Step rows in insertion order, with only the columns those episodes logged (other
        programs' latent columns are left out); float columns come back as float64 with NaN."""
        sql, params = self._filter("SELECT * FROM steps", run_id, round, kind, episode)
        with self._lock:
            frame = pd.read_sql_query(sql + " ORDER BY rowid", self.conn, params=params)
            types = self.db["steps"].columns_dict
            wanted = self._logged_columns(run_id, round, kind, episode)
        if wanted is None:
            ids = [c for c in frame.columns if c in STEP_ID_COLUMNS]
            rest = [c for c in frame.columns if c not in STEP_ID_COLUMNS and frame[c].notna().any()]
            wanted = ids + rest
        frame = frame.reindex(columns=wanted)
        for column in frame.columns:
            if types.get(column) is float:
                frame[column] = frame[column].astype("float64")
            elif types.get(column) is int and not frame[column].isna().any() and len(frame):
                frame[column] = frame[column].astype("int64")
        return frame

    def _logged_columns(
        self, run_id: int, round: int | None, kind: str | None, episode: int | None
    ) -> list[str] | None:
        sql, params = self._filter("SELECT columns FROM episodes", run_id, round, kind, episode)
        rows = self.conn.execute(sql + " ORDER BY id", params).fetchall()
        if not rows or any(r[0] is None for r in rows):
            return None
        merged: dict[str, None] = dict.fromkeys(STEP_ID_COLUMNS)
        for (text,) in rows:
            merged.update(dict.fromkeys(json.loads(text)))
        return list(merged)

    # -- analyst, sandbox and event records --------------------------------------------------

    def log_llm_call(
        self, run_id: int, round: int | None, *, role: str, model: str | None, prompt: str,
        response: str | None, tokens_in: int | None = None, tokens_out: int | None = None,
        latency_s: float | None = None, error: str | None = None, attempt: int = 1,
        endpoint: str | None = None,
    ) -> int:
        return self._insert("llm_calls", {
            "run_id": run_id, "round": round, "role": role, "model": model, "prompt": prompt,
            "response": response, "tokens_in": tokens_in, "tokens_out": tokens_out,
            "latency_s": latency_s, "error": error, "attempt": attempt, "created": now(),
            "endpoint": endpoint,
        })

    def llm_calls(self, run_id: int, round: int | None = None) -> list[dict]:
        sql, params = self._filter("SELECT * FROM llm_calls", run_id, round, None, None)
        return self._select(sql + " ORDER BY id", params)

    def log_analysis(
        self, run_id: int, round: int | None, *, iteration: int, code: str,
        stdout: str | None, stderr_tail: str | None, status: str, isolation: str | None,
        duration_s: float | None,
    ) -> int:
        return self._insert("analyses", {
            "run_id": run_id, "round": round, "iteration": iteration, "code": code,
            "stdout": stdout, "stderr_tail": stderr_tail, "status": status,
            "isolation": isolation, "duration_s": duration_s, "created": now(),
        })

    def analyses(self, run_id: int, round: int | None = None) -> list[dict]:
        sql, params = self._filter("SELECT * FROM analyses", run_id, round, None, None)
        return self._select(sql + " ORDER BY id", params)

    def log_event(
        self, run_id: int | None, round: int | None, kind: str, message: str = "",
        data: Mapping[str, Any] | None = None,
    ) -> int:
        return self._insert("events", {
            "run_id": run_id, "round": round, "kind": kind, "message": message,
            "data": to_json(None if data is None else dict(data)), "created": now(),
        })

    def events(self, run_id: int, round: int | None = None, kind: str | None = None) -> list[dict]:
        sql, params = self._filter("SELECT * FROM events", run_id, round, kind, None)
        return [self._decode("events", r) for r in self._select(sql + " ORDER BY id", params)]


    # -- RL updates --------------------------------------------------------------------------
    # One row per update of refine_core.learn.rl.train_rl: what the `on_update` callback
    # receives, stored as it arrives so a killed RL run keeps the updates it made.

    _RL_COLUMNS = (
        "resets", "return_mean", "return_std", "selection_metric", "selection_return", "entropy",
        "entropy_coef", "approx_kl", "clip_frac", "ratio_q05", "ratio_q50", "ratio_q95",
        "grad_norm", "loss",
    )

    def log_rl_update(
        self, run_id: int, round: int | None, record: Mapping[str, Any], *, label: str = "rl"
    ) -> int:
        """Store one update record (replacing an earlier copy of the same update)."""
        row: dict[str, Any] = {
            "run_id": run_id, "round": round, "label": label,
            "update_index": int(record["update"]),
            "params": to_json(record.get("params")),
            "record": to_json({k: v for k, v in record.items() if k != "params"}),
            "created": now(),
        }
        for column in self._RL_COLUMNS:
            value = record.get(column)
            row[column] = None if value is None or (isinstance(value, float) and value != value) else value
        with self.transaction():
            self.conn.execute(
                "DELETE FROM rl_updates WHERE run_id = ? AND round IS ? AND label = ? "
                "AND update_index = ?", (run_id, round, label, row["update_index"]),
            )
            return self._insert("rl_updates", row)

    def rl_updates(
        self, run_id: int, round: int | None = None, label: str | None = None
    ) -> pd.DataFrame:
        """Update records in order, one row each: the stored columns, every other number of
        the record, and `params` ({name: {delta_norm, delta_max, value?}}). Missing figures
        (e.g. updates without a selection evaluation) are NaN."""
        clauses, params = ["run_id = ?"], [run_id]
        if round is not None:
            clauses.append("round = ?")
            params.append(round)
        if label is not None:
            clauses.append("label = ?")
            params.append(label)
        rows = self._select(
            f"SELECT * FROM rl_updates WHERE {' AND '.join(clauses)} "
            "ORDER BY round, label, update_index", params,
        )
        out = []
        for row in rows:
            row = self._decode("rl_updates", row)
            record = row.pop("record") or {}
            merged = {**record, **{k: v for k, v in row.items() if v is not None or k not in record}}
            merged["update"] = merged.pop("update_index")
            out.append(merged)
        frame = pd.DataFrame(out)
        for column in self._RL_COLUMNS:
            if column in frame:
                frame[column] = frame[column].astype("float64")
        return frame

    def rl_labels(self, run_id: int) -> list[tuple[int | None, str]]:
        """(round, label) of every RL run stored for `run_id`, in order."""
        rows = self._select(
            "SELECT DISTINCT round, label FROM rl_updates WHERE run_id = ? ORDER BY round, label",
            (run_id,),
        )
        return [(r["round"], r["label"]) for r in rows]
