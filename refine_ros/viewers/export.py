"""`refine export`: a round's logged rollouts as ROS 2 messages in an MCAP file.

Why it is built this way:
- The file holds the topics the live graph publishes, with the same types and layout
  (refine_ros.wire.messages: `refine/observation`, `refine/policy_step`, `refine/reward` as named
  Step messages, `refine/action` as a counted vector, `refine/episode_events`), so `ros2 bag play` feeds a recorded round back into the logger or
  RViz as if the robot were running. Whatever the task can draw from a logged observation
  alone (`refine_core.tasks.view.TaskView.scene_from_observation`: the door's gripper, handle
  and target poses, the pendulum's joint and shapes) goes out on the same typed topics as live (named by
  refine_ros.viewers.scene_topics), which Foxglove and RViz draw without any plugin.
- Messages are written as plain dicts through `mcap_ros2.writer.Writer`, with message
  definitions assembled from the installed `.msg` files, so exporting needs neither rclpy nor
  a sourced ROS install, only the message packages' share directories (PyPI wheels install
  them under `<venv>/share`).
- Time stamps come from the step index and the task's control period (`spec.control_period_s`;
  episodes follow one another with a one-second pause), so replay runs at the simulator's
  speed and the file is a pure function of the database.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from refine_core.rollout.schema import OUTCOME_COLUMNS, RolloutSchema, is_info_key
from refine_core.store.db import RunDatabase, RunDatabaseError
from refine_core.store.records import best_committed_round
from refine_core.tasks.base import Task
from refine_core.tasks.registry import get_task
from refine_core.tasks.view import TaskView
from refine_ros.viewers import scene_topics
from refine_ros.wire.messages import counted_fields, json_fields, step_fields

EPISODE_PAUSE_S = 1.0
START_NS = 1_000_000_000  # replay clocks start at t = 1 s, not at the UNIX epoch
FRAME = "world"
PRIMITIVES = {"bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
              "uint32", "int64", "uint64", "string", "wstring"}


class ExportError(ValueError):
    """The export cannot be written: no database, no such round, nothing logged, or the message
    definitions are not installed. The message says what to change."""


# ------------------------------------------------------------------------- message definitions
def share_roots() -> list[Path]:
    """Where `<pkg>/msg/<Type>.msg` may live: the venv's share directory (PyPI wheels), then
    every prefix on AMENT_PREFIX_PATH (a sourced ROS install)."""
    import os

    roots = [Path(sys.prefix) / "share"]
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(Path(prefix) / "share")
    return [r for r in roots if r.is_dir()]


def _msg_file(package: str, name: str) -> Path:
    for root in share_roots():
        path = root / package / "msg" / f"{name}.msg"
        if path.is_file():
            return path
    raise ExportError(f"message definition {package}/msg/{name}.msg not found under {share_roots()}; "
                      "install the ROS 2 message packages (e.g. the std_msgs/geometry_msgs wheels)")


def _field_types(package: str, text: str) -> list[tuple[str, str]]:
    """Complex field types of a .msg text as (package, name), in order of appearance."""
    out = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        type_token = line.split()[0]
        if "=" in line.split(None, 1)[-1] and line.split()[1].isupper():
            continue  # a constant
        base = re.sub(r"\[.*\]$", "", type_token)
        base = re.sub(r"<=\d+$", "", base)
        if base in PRIMITIVES:
            continue
        parts = base.split("/")
        out.append((parts[0], parts[-1]) if len(parts) > 1 else (package, parts[0]))
    return out


def message_definition(datatype: str) -> str:
    """The full definition text of `pkg/msg/Type` with every dependency appended the way
    rosbag2 writes it (separator line, `MSG: pkg/Type`, its text)."""
    package, _, name = datatype.split("/")
    main = _msg_file(package, name).read_text()
    seen: dict[tuple[str, str], str] = {}

    def visit(pkg: str, text: str) -> None:
        for dep in _field_types(pkg, text):
            if dep not in seen:
                seen[dep] = _msg_file(*dep).read_text()
                visit(dep[0], seen[dep])

    visit(package, main)
    parts = [main.strip()]
    for (pkg, dep), text in seen.items():
        parts.append("=" * 80 + f"\nMSG: {pkg}/{dep}\n" + text.strip())
    return "\n".join(parts) + "\n"


# ------------------------------------------------------------------------- messages as dicts
def _finite(values: Iterable[float]) -> list[float]:
    return [float(v) if v is not None and np.isfinite(v) else math.nan for v in values]


# ------------------------------------------------------------------------- export
def _resolve_round(db: RunDatabase, run: dict, round_: str | int, higher_is_better: bool) -> int:
    if isinstance(round_, str) and round_ == "best":
        best = best_committed_round(db, run["id"], higher_is_better)
        if best is None:
            raise ExportError(f"run {run['id']} has no committed round to export")
        return best
    try:
        return int(round_)
    except (TypeError, ValueError):
        raise ExportError(f"round must be a number or 'best', got {round_!r}") from None


def export_mcap(db_path: str | Path, mcap_path: str | Path, round_: str | int = "best",
                kind: str | None = None) -> dict[str, int]:
    """Write round `round_` (a number or 'best') of the latest run, episodes of `kind` (all
    logged kinds if None), to `mcap_path`. Returns the message count per topic."""
    from mcap_ros2.writer import Writer

    db_path = Path(db_path)
    if not db_path.exists():
        raise ExportError(f"no run database at {db_path}")
    try:
        db = RunDatabase(db_path, create=False)
    except RunDatabaseError as exc:
        raise ExportError(str(exc)) from None
    try:
        run = db.latest_run()
        if run is None:
            raise ExportError(f"{db.path} holds no run")
        try:
            task = get_task(run["task"])
        except ValueError as exc:
            raise ExportError(f"run {run['id']}: {exc}") from None
        spec = task.spec
        rnd = _resolve_round(db, run, round_, spec.metric.higher_is_better)
        steps = db.load_steps(run["id"], rnd, kind)
        if len(steps) == 0:
            what = f"{kind} episodes" if kind else "episodes"
            raise ExportError(f"run {run['id']} round {rnd} has no logged steps of {what}")
        episodes = db.episodes(run["id"], rnd, kind)
    finally:
        db.close()

    mcap_path = Path(mcap_path)
    mcap_path.parent.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    with open(mcap_path, "wb") as stream, Writer(stream) as writer:
        schemas: dict[str, Any] = {}

        def write(topic: str, datatype: str, message: dict, ns: int) -> None:
            if datatype not in schemas:
                schemas[datatype] = writer.register_msgdef(datatype, message_definition(datatype))
            writer.write_message(topic, schemas[datatype], message, log_time=ns, publish_time=ns,
                                 sequence=counts.get(topic, 0))
            counts[topic] = counts.get(topic, 0) + 1

        _write_round(write, task, run, rnd, steps, episodes)
        writer.add_metadata("refine", {"run_id": str(run["id"]), "task": spec.name, "round": str(rnd),
                                       "kind": kind or "all"})
    return counts


def _write_round(write, task: Task, run: dict, rnd: int, steps: pd.DataFrame, episodes: pd.DataFrame) -> None:
    spec, view = task.spec, TaskView(task)
    period_ns = int(spec.control_period_s * 1e9)
    schema = RolloutSchema.for_task(spec, [c for c in steps.columns if is_info_key(c)])
    obs_cols = [c for c in schema.observation_columns if c in steps.columns]
    act_cols = schema.act()
    step_cols = [c for c in schema.policy_step() if c in steps.columns]
    string = "std_msgs/msg/String"
    vector = "std_msgs/msg/Float64MultiArray"
    named = "refine_ros_interfaces/msg/Step"
    write("refine/observation_columns", string, json_fields(obs_cols), START_NS)
    write("refine/policy_step_columns", string, json_fields(step_cols), START_NS)
    summaries = {(r["kind"], int(r["episode"])): r for r in episodes.to_dict("records")}
    clock = START_NS
    for (kind, number), group in steps.groupby(["kind", "episode"], sort=False):
        group = group.sort_values("step")
        meta = summaries.get((kind, int(number)), {})
        seed = None if pd.isna(group["seed"].iloc[0]) else int(group["seed"].iloc[0])
        start = {"event": "start", "episode": int(number), "round": rnd, "kind": kind, "seed": seed,
                 "run_id": int(run["id"])}
        write("refine/episode_events", string, json_fields(start), clock)
        for row in group.to_dict("records"):
            step = int(row["step"])
            ns = clock + step * period_ns
            if obs_cols:
                write("refine/observation", named,
                      step_fields(number, step, obs_cols, _finite(row[c] for c in obs_cols), ns), ns)
            if all(c in row for c in act_cols):
                write("refine/action", vector,
                      counted_fields(number, step, _finite(row[c] for c in act_cols), "action"), ns)
            if step_cols:
                write("refine/policy_step", named,
                      step_fields(number, step, step_cols, _finite(row[c] for c in step_cols), ns), ns)
            if "reward" in row:  # the table keeps reward and done per step (the live stream adds success)
                outcome = _finite([row["reward"], row.get("done", 0)])
                write("refine/reward", named, step_fields(number, step, OUTCOME_COLUMNS, outcome, ns), ns)
            scene = view.scene_from_observation({c: _number(row[c]) for c in obs_cols})
            if scene is not None:
                for topic, (datatype, message) in scene_topics.message_dicts(scene, ns, FRAME).items():
                    write(topic, datatype, message, ns)
        clock += (int(group["step"].max()) + 1) * period_ns
        end = {"event": "end", "episode": int(number), "round": rnd, "kind": kind, "seed": seed,
               **{k: meta.get(k) for k in ("return", "metric", "success", "label", "complete") if k in meta}}
        write("refine/episode_events", string, json_fields(_json_safe(end)), clock)
        clock += int(EPISODE_PAUSE_S * 1e9)


def _number(value: Any) -> float:
    return float(value) if value is not None and np.isfinite(value) else math.nan


def _json_safe(payload: dict) -> dict:
    out = {}
    for key, value in payload.items():
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        out[key] = value
    return out
