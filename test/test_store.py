"""The run database against a real SQLite file: round trips, atomicity, versioning, resume."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from refine_core.store import SCHEMA_VERSION, RunDatabase, RunDatabaseError, SchemaVersionError
from refine_core.store.bench import bench_sqlite, step_frame
from refine_core.store.records import best_committed_round


@pytest.fixture
def db(run_dir):
    with RunDatabase(run_dir) as database:
        yield database


def _steps(n: int, **extra) -> pd.DataFrame:
    rng = np.random.default_rng(n)
    frame = pd.DataFrame({
        "run_id": 1, "round": 2, "kind": "eval", "episode": 0, "seed": 1000,
        "step": np.arange(n, dtype=np.int64),
        "speed": rng.random(n), "latent_offset": rng.standard_normal(n),
        "weight_k": np.full(n, 0.5), "act_steer": rng.uniform(-1, 1, n),
        "reward": rng.random(n), "done": (np.arange(n) == n - 1).astype(np.int64),
    })
    for key, value in extra.items():
        frame[key] = value
    return frame


def test_schema_version_stored_and_reopen_appends(run_dir):
    with RunDatabase(run_dir) as db:
        assert db.schema_version == SCHEMA_VERSION
        first = db.create_run("door_open", config={"rounds": 3})
    assert (run_dir / "run.db").exists()
    with RunDatabase(run_dir / "run.db") as db:
        second = db.create_run("door_open")
        assert [r["id"] for r in db.runs()] == [first, second]
        assert db.run(first)["config"] == {"rounds": 3}
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_version_is_refused(run_dir):
    RunDatabase(run_dir).close()
    with sqlite3.connect(run_dir / "run.db") as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(SCHEMA_VERSION + 1),))
    with pytest.raises(SchemaVersionError, match="newer"):
        RunDatabase(run_dir)


def test_not_a_database_and_missing_file(tmp_path):
    bogus = tmp_path / "run.db"
    bogus.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(RunDatabaseError, match="not a usable run database"):
        RunDatabase(bogus)
    with pytest.raises(RunDatabaseError, match="no run database"):
        RunDatabase(tmp_path / "absent" / "run.db", create=False)


def test_demonstration_arrays_round_trip_exactly(db):
    run_id = db.create_run("car_racing")
    rng = np.random.default_rng(0)
    inputs = {"tiles": rng.standard_normal((50, 12, 4)).astype(np.float32),
              "indicators": rng.standard_normal((50, 7)).astype(np.float32)}
    actions = rng.uniform(-1, 1, (50, 3)).astype(np.float32)
    rewards = rng.standard_normal(50)
    db.save_demonstration(run_id, task="car_racing", seed=0, inputs=inputs, actions=actions,
                          rewards=rewards, summary={"return": 1.5, "metric": 1.5, "success": 1.0},
                          source="teleop (car_sim)", label="wide line", columns=["a", "b"])
    row = db.load_demonstration(run_id)
    assert row["seed"] == 0 and row["steps"] == 50 and row["return"] == 1.5
    assert (row["source"], row["label"], row["columns"]) == ("teleop (car_sim)", "wide line", ["a", "b"])
    for name, value in inputs.items():
        assert row["inputs"][name].dtype == value.dtype
        np.testing.assert_array_equal(row["inputs"][name], value)
    np.testing.assert_array_equal(row["actions"], actions)
    np.testing.assert_array_equal(row["rewards"], rewards)


def test_object_arrays_are_refused(db):
    run_id = db.create_run("x")
    with pytest.raises(TypeError, match="object"):
        db.save_demonstration(run_id, task="x", seed=0, inputs={"a": np.array([object()])},
                              actions=np.zeros((1, 1)), rewards=np.zeros(1), summary={}, source="test")


def test_a_demonstration_must_say_where_it_came_from(db):
    run_id = db.create_run("x")
    with pytest.raises(ValueError, match="source"):
        db.save_demonstration(run_id, task="x", seed=0, inputs={"a": np.zeros((2, 1))},
                              actions=np.zeros((2, 1)), rewards=np.zeros(2), summary={}, source=" ")
    assert db.load_demonstration(run_id) is None


def test_version_1_databases_gain_the_demonstration_source(tmp_path):
    """A database written before demonstrations had a source holds only the simulated
    expert's (nothing else could record one): the migration says so, and the version moves."""
    from refine_core.store.schema import SCHEMA_VERSION, SIMULATED_EXPERT

    path = tmp_path / "old.db"
    with RunDatabase(path) as db:
        run_id = db.create_run("x")
        db.save_demonstration(run_id, task="x", seed=3, inputs={"a": np.zeros((2, 1))}, actions=np.zeros((2, 1)),
                              rewards=np.zeros(2), summary={}, source="placeholder")
        for column in ("source", "label", "columns", "take"):  # what version 1 looked like
            db.conn.execute(f"ALTER TABLE demonstrations DROP COLUMN {column}")
        db.conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
        db.conn.commit()
    with RunDatabase(path) as db:
        assert db.schema_version == SCHEMA_VERSION == 4
        row = db.load_demonstration(run_id)
        assert row["source"] == SIMULATED_EXPERT and row["seed"] == 3 and row["columns"] is None
        assert row["take"] == 0 and db.demonstration_takes(run_id) == [0], "an older demonstration is take 0"


def test_steps_round_trip_keeps_values_and_dtypes(db):
    frame = _steps(300)
    frame.loc[5, "latent_offset"] = np.nan
    frame.loc[6, "latent_offset"] = np.inf
    db.save_episode(1, 2, "eval", 0, seed=1000, summary={"return": 3.0}, table=frame)
    loaded = db.load_steps(1, round=2, kind="eval")
    pd.testing.assert_frame_equal(loaded, frame)
    assert db.episodes(1, round=2).loc[0, "steps"] == 300


def test_steps_of_different_programs_keep_their_own_columns(db):
    a = _steps(10, latent_a=np.arange(10.0))
    b = _steps(12, latent_b=np.arange(12.0)).assign(round=3)
    db.save_episode(1, 2, "eval", 0, seed=1000, summary={}, table=a)
    db.save_episode(1, 3, "eval", 0, seed=1000, summary={}, table=b)
    r2, r3 = db.load_steps(1, round=2), db.load_steps(1, round=3)
    assert "latent_a" in r2 and "latent_b" not in r2
    assert "latent_b" in r3 and "latent_a" not in r3
    assert len(db.load_steps(1)) == 22


def test_saving_an_episode_again_replaces_it(db):
    db.save_episode(1, 0, "eval", 0, seed=1000, summary={"return": 1.0}, table=_steps(20))
    db.save_episode(1, 0, "eval", 0, seed=1000, summary={"return": 2.0}, table=_steps(15))
    episodes = db.episodes(1, round=0, kind="eval")
    assert len(episodes) == 1 and episodes.loc[0, "return"] == 2.0
    assert len(db.load_steps(1, round=0)) == 15


def test_transaction_is_all_or_nothing(db, run_dir):
    with pytest.raises(RuntimeError, match="mid-way"):
        with db.transaction():
            run_id = db.create_run("door_open")
            db.save_round(run_id, 0, program="x", weights={"k": np.ones(2)})
            db.insert_steps(_steps(100), run_id=run_id)
            # another connection (another process, e.g. the ROS logger) sees nothing yet
            with RunDatabase(run_dir) as other:
                assert other.runs() == []
            raise RuntimeError("killed mid-way")
    for table in ("runs", "rounds", "steps"):
        assert db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0
    # the connection is usable afterwards and commits normally
    with db.transaction():
        db.create_run("door_open")
    with RunDatabase(run_dir) as other:
        assert len(other.runs()) == 1


def test_nested_failure_rolls_back_only_the_inner_block(db):
    with db.transaction():
        run_id = db.create_run("door_open")
        with pytest.raises(ValueError):
            with db.transaction():
                db.save_round(run_id, 0, program="inner")
                raise ValueError("inner")
        db.save_round(run_id, 1, program="outer")
    assert [r["round"] for r in db.rounds(run_id)] == [1]


def test_rounds_weights_and_selection(db):
    run_id = db.create_run("door_open")
    weights = {"k_x": np.array([1.5], dtype=np.float32), "net.0.weight": np.eye(3)}
    db.save_round(run_id, 0, program="p0", weights=weights, fit_report={"best_val_nll": -1.0},
                  info_schema={"weights": ["weight_k_x"], "latents": []}, eval_metric=0.5)
    db.save_round(run_id, 1, program="p1", eval_metric=0.2)
    db.save_round(run_id, 2, status="failed", error="[forward] boom")
    assert db.last_round(run_id) == 2
    assert db.last_committed_round(run_id) == 1
    # the evaluation metric never chooses: without a selection metric there is no best round
    assert best_committed_round(db, run_id, higher_is_better=False) is None
    row = db.round(run_id, 0)
    assert row["fit_report"] == {"best_val_nll": -1.0}
    for name, value in weights.items():
        np.testing.assert_array_equal(row["weights"][name], value)
    listed = db.rounds(run_id)
    assert [r["status"] for r in listed] == ["committed", "committed", "failed"]
    assert listed[0]["has_weights"] and not listed[1]["has_weights"]
    db.update_round(run_id, 1, metrics={"eval": {"metric_mean": 0.2}}, selection_metric=0.9)
    assert db.round(run_id, 1)["metrics"]["eval"]["metric_mean"] == 0.2
    assert best_committed_round(db, run_id, higher_is_better=True) == 1
    db.update_round(run_id, 0, selection_metric=0.9)
    assert best_committed_round(db, run_id, higher_is_better=True) == 0, "ties keep the earlier round"
    db.update_round(run_id, 2, selection_metric=5.0)
    assert best_committed_round(db, run_id, higher_is_better=True) == 0, "a failed round is never best"
    with pytest.raises(KeyError):
        db.update_round(run_id, 9, decision="stop")


def test_interrupted_episode_is_flagged_incomplete_on_restart(run_dir):
    with RunDatabase(run_dir) as db:
        run_id = db.create_run("door_open")
        db.begin_episode(run_id, 0, "eval", 0, seed=1000)
        db.insert_steps(_steps(40), run_id=run_id, round=0, kind="eval", episode=0)
        db.end_episode(run_id, 0, "eval", 0, summary={"return": 4.0, "metric": 0.1})
        db.begin_episode(run_id, 0, "eval", 1, seed=1001)
        db.insert_steps(_steps(25), run_id=run_id, round=0, kind="eval", episode=1)
        # process killed here: episode 1 never ends
    with RunDatabase(run_dir) as db:
        assert db.mark_incomplete_episodes(run_id) == 1
        episodes = db.episodes(run_id, round=0).set_index("episode")
        assert episodes.loc[0, "complete"] == 1 and episodes.loc[0, "steps"] == 40
        assert episodes.loc[1, "complete"] == 0
        assert len(db.load_steps(run_id, round=0, episode=1)) == 25
        db.set_episode_label(run_id, 0, "eval", 0, "success")
        assert db.episodes(run_id, round=0).set_index("episode").loc[0, "label"] == "success"
        with pytest.raises(ValueError):
            db.set_episode_label(run_id, 0, "eval", 0, "maybe")


def test_llm_calls_analyses_and_events(db):
    run_id = db.create_run("car_racing", analyst="offline")
    db.log_llm_call(run_id, 0, role="generate", model="m", prompt="p", response="r",
                    tokens_in=10, tokens_out=5, latency_s=0.3)
    db.log_analysis(run_id, 0, iteration=0, code="print(1)", stdout="1\n", stderr_tail="",
                    status="ok", isolation="bwrap", duration_s=0.5)
    db.log_event(run_id, 0, "round_committed", "ok", {"metric": np.float64(1.25)})
    assert db.llm_calls(run_id)[0]["tokens_in"] == 10
    assert db.analyses(run_id, 0)[0]["stdout"] == "1\n"
    assert db.events(run_id, kind="round_committed")[0]["data"] == {"metric": 1.25}


def test_file_opens_with_sqlite_utils_cli(db):
    db.save_episode(1, 0, "eval", 0, seed=1, summary={}, table=_steps(7))
    exe = Path(sys.executable).parent / "sqlite-utils"
    command = [str(exe)] if exe.exists() else [shutil.which("sqlite-utils") or "sqlite-utils"]
    out = subprocess.run([*command, "tables", str(db.path), "--counts"],
                         capture_output=True, text=True, timeout=60, check=True)
    counts = {t["table"]: t["count"] for t in json.loads(out.stdout)}
    assert counts["steps"] == 7 and counts["episodes"] == 1
    assert {"runs", "demonstrations", "rounds", "llm_calls", "analyses", "events"} <= set(counts)


def test_bulk_step_insert_meets_the_target():
    assert step_frame(10).shape == (10, 60)
    best = max(bench_sqlite(rows=20000)["sqlite_step_rows_per_s"] for _ in range(3))
    assert best >= 20000, f"{best:.0f} rows/s"


def test_a_refinement_that_fills_a_run_another_process_opened_records_its_own_settings(db):
    """On a robot the demonstration recorder (or the rollout logger) opens the run; the
    refinement that fills it must still leave its description, analyst and settings there, or
    every summary of a robot run says "unrecorded"."""
    from refine_core.store.records import open_run

    opened = db.create_run("car_racing", config={"demonstration": "teleop (rc_car_real)"}, status="recorded")
    settings = {"task_description": "robot_owner", "demonstration": "recorded", "diagnostics_see_demo": False}
    assert open_run(db, "car_racing", "openai", settings, resume=False) == opened
    run = db.run(opened)
    assert run["analyst"] == "openai" and run["status"] == "running"
    assert run["config"]["task_description"] == "robot_owner" and run["config"]["diagnostics_see_demo"] is False
    assert run["config"]["demonstration"] == "recorded"
    assert run["config"]["opened_with"] == {"demonstration": "teleop (rc_car_real)"}, "what the opener wrote stays"
