"""The run database's tables, in one place, so the schema can be read (and versioned) at a glance.

Fixed tables are created up front with explicit column types so that `sqlite-utils` and
Datasette show meaningful types. `steps` starts with its id columns only: its semantic columns
depend on the task and on each program's info keys, so they are added as they first appear.
Bump `SCHEMA_VERSION` (and add a migration in `db.py`) whenever a fixed table changes shape.
"""

from __future__ import annotations

from refine_core.rollout.schema import ID_COLUMNS

SCHEMA_VERSION = 4
"""1: the first schema. 2: `demonstrations` records where a demonstration came from (`source`),
the operator's `label` and the observation `columns` it was recorded with. 3: `rounds` keeps
the analyst's one-line reason for its decision (`decision_reason`), `llm_calls` the endpoint's
self-description (`endpoint`, e.g. that `refine serve-inbox` estimated the token counts).
4: a run may hold several demonstration takes (`demonstrations.take`, 0, 1, ...; every older
row is take 0), each with its steps as the `demo` episode of the same number."""

SIMULATED_EXPERT = "scripted expert (sim)"
"""`demonstrations.source` of a demonstration the task's scripted expert drove in simulation.
Schema version 1 had no `source` column and nothing but that expert recorded demonstrations,
so the migration to version 2 gives every older row this source."""

# table -> (columns {name: type}, primary key, indexes)
TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "meta": ({"key": str, "value": str}, "key", ()),
    "runs": (
        {
            "id": int, "task": str, "created": str, "updated": str, "config": str,
            "analyst": str, "status": str, "best_round": int, "stop_reason": str,
        },
        "id",
        (),
    ),
    "demonstrations": (
        {
            "id": int, "run_id": int, "task": str, "seed": int, "steps": int, "return": float,
            "metric": float, "success": float, "summary": str, "arrays": bytes, "created": str,
            "source": str, "label": str, "columns": str, "take": int,
        },
        "id",
        (("run_id",),),
    ),
    "rounds": (
        {
            "run_id": int, "round": int, "status": str, "program": str, "fit_report": str,
            "weights": bytes, "info_schema": str, "metrics": str, "selection_metric": float,
            "eval_metric": float, "diagnostics": str, "decision": str, "reasoning": str,
            "error": str, "timings": str, "next_program": str, "created": str, "updated": str,
            "decision_reason": str,
        },
        ("run_id", "round"),
        (),
    ),
    "episodes": (
        {
            "id": int, "run_id": int, "round": int, "kind": str, "episode": int, "seed": int,
            "return": float, "metric": float, "success": float, "steps": int, "complete": int,
            "label": str, "error": str, "summary": str, "columns": str, "created": str,
        },
        "id",
        (("run_id", "round", "kind", "episode"),),
    ),
    "steps": (
        {"run_id": int, "round": int, "kind": str, "episode": int, "seed": int, "step": int},
        (),
        (("run_id", "round", "kind", "episode"),),
    ),
    "llm_calls": (
        {
            "id": int, "run_id": int, "round": int, "role": str, "model": str, "prompt": str,
            "response": str, "tokens_in": int, "tokens_out": int, "latency_s": float,
            "error": str, "attempt": int, "created": str, "endpoint": str,
        },
        "id",
        (("run_id", "round"),),
    ),
    "analyses": (
        {
            "id": int, "run_id": int, "round": int, "iteration": int, "code": str,
            "stdout": str, "stderr_tail": str, "status": str, "isolation": str,
            "duration_s": float, "created": str,
        },
        "id",
        (("run_id", "round"),),
    ),
    "events": (
        {
            "id": int, "run_id": int, "round": int, "kind": str, "message": str, "data": str,
            "created": str,
        },
        "id",
        (("run_id", "round"),),
    ),
    # One row per RL update (refine_core.learn.rl): the figures worth filtering and plotting
    # as columns, the whole record (parameter changes included) as JSON. `label` tells
    # several RL runs of one round apart (e.g. two reset budgets). A new table, so files of
    # version 1 gain it on opening and older readers never see it: no version bump.
    "rl_updates": (
        {
            "id": int, "run_id": int, "round": int, "label": str, "update_index": int,
            "resets": int, "return_mean": float, "return_std": float, "selection_metric": float,
            "selection_return": float, "entropy": float, "entropy_coef": float, "approx_kl": float,
            "clip_frac": float, "ratio_q05": float, "ratio_q50": float, "ratio_q95": float,
            "grad_norm": float, "loss": float, "params": str, "record": str, "created": str,
        },
        "id",
        (("run_id", "round", "label"),),
    ),
}

# Columns holding JSON text, decoded by the readers.
JSON_COLUMNS = {
    "runs": ("config",),
    "demonstrations": ("summary", "columns"),
    "rounds": ("fit_report", "info_schema", "metrics", "timings"),
    "episodes": ("summary", "columns"),
    "events": ("data",),
    "rl_updates": ("params", "record"),
}

# version -> statements that bring a database of the previous version up to it (after the
# missing columns were added); each runs once, in the transaction that sets the new version.
MIGRATIONS: dict[int, tuple[tuple[str, tuple], ...]] = {
    2: (("UPDATE demonstrations SET source = ? WHERE source IS NULL", (SIMULATED_EXPERT,)),),
    4: (("UPDATE demonstrations SET take = 0 WHERE take IS NULL", ()),),
}

STEP_ID_COLUMNS = ID_COLUMNS
"""The steps table's key columns: the rollout table's id columns."""
