"""The round protocol between the learner and the analysis node, without any ROS import.

Why a separate module: the payloads on `refine/program`, `refine/fit_result` and
`refine/round_complete` are the contract between two nodes that may run in different
processes (or, under `ros2 launch`, on different machines), so their shape is written down and
validated in one place and tested without DDS. The per-step policy call and the episode
summary reuse `refine_core.rollout.runner`, so a step over DDS computes exactly what a step in
`refine run` computes.

Payloads (JSON on `std_msgs/String`):
- program: `{round, kind: "program"|"stop", source, reason, attempt, run_id[, bundle_b64]}`;
  with `bundle_b64` (weights already fitted, e.g. a committed round's policy for a robot or
  the latency benchmark) the learner checks and builds the bundle instead of refitting.
- fit_result: `{round, attempt, ok, error, report, info_schema, bundle_b64, run_id}`; the
  fitted weights travel as a base64 `PolicyBundle.to_npz_bytes()` blob (plain arrays, never a
  pickle), so the analysis node can commit them with the round without refitting.
- round_complete: `{round, run_id, metrics: {kind: stages.summarise(...)}, episodes: [...],
  errors: [...]}`; `episodes` lists what the learner drove (kind, episode = the index within
  its kind, i.e. the database's `episode` column, counter, seed, steps, summary) so the
  analysis node can check the logger wrote all of it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from refine_core.policy.bundle import PolicyBundle
from refine_core.rollout.runner import _policy_step, _summarise, episode_generator
from refine_core.tasks.base import Task
from refine_core.tasks.spec import TaskSpec

KINDS = ("diagnostic", "selection", "eval")
PROGRAM_KINDS = ("program", "stop")


class ProtocolError(ValueError):
    """A payload that does not follow the round protocol; the message says which field."""


# ------------------------------------------------------------------------- episode plan
@dataclass(frozen=True)
class PlannedEpisode:
    kind: str
    index: int
    """Position within its kind (the `episode` column `refine run` writes)."""
    counter: int
    """The episode counter carried by the counted vectors: unique within the run (rounds
    start at `round * plan length`), so the logger never confuses two episodes whose messages
    are still in flight, and a safety node's confirmation of one episode never carries over to
    an episode of a later round. `episode_plan` numbers from `first_counter`; the learner
    starts each round at `round_counter_base`."""
    seed: int


def episode_plan(spec: TaskSpec, diagnostic: int, selection: int, evaluation: int, *,
                 first_counter: int = 0) -> list[PlannedEpisode]:
    """Diagnostic episodes first (their table feeds the analysis), then selection, then eval,
    on the task's seeds for each kind, exactly as `stages.roll_out` chooses them; counters
    run from `first_counter`."""
    groups = (
        ("diagnostic", spec.diagnostic_seeds[: max(0, diagnostic)]),
        ("selection", spec.selection_seeds[: max(0, selection)]),
        ("eval", spec.eval_seeds[: max(0, evaluation)]),
    )
    plan, counter = [], int(first_counter)
    for kind, seeds in groups:
        for index, seed in enumerate(seeds):
            plan.append(PlannedEpisode(kind, index, counter, int(seed)))
            counter += 1
    return plan


# ------------------------------------------------------------------------- the policy
def step_columns(spec: TaskSpec, info_keys: Sequence[str]) -> list[str]:
    """Columns of `refine/policy_step`, named as in the rollout table."""
    actions = spec.action_names
    return ([f"mean_{a}" for a in actions] + [f"std_{a}" for a in actions]
            + [f"act_{a}" for a in actions] + list(info_keys))


class PolicyRunner:
    """The fitted policy at the control rate: one forward pass per observation through the same
    step function `refine run` uses (batching, sampling, clipping, checks)."""

    def __init__(self, task: Task, bundle: PolicyBundle, info_keys: Sequence[str], mode: str = "mean") -> None:
        self.task, self.spec, self.mode = task, task.spec, mode
        self.info_keys = tuple(info_keys)
        self.columns = step_columns(self.spec, self.info_keys)
        self.module: nn.Module = bundle.build(self.spec)
        self.module.eval()
        self.generator = torch.Generator().manual_seed(0)
        torch.set_num_threads(1)  # one small forward pass: threads only add wake-up latency

    def new_episode(self, seed: int) -> None:
        self.generator = episode_generator(seed, 0)

    def act(self, obs: Any) -> tuple[np.ndarray, list[float]]:
        """-> (executed action, policy_step values in `self.columns` order). Raises whatever the
        program raises; the caller turns it into an episode error."""
        mean, std, act, info = _policy_step(self.module, self.task, obs, self.generator, self.mode)
        values = [*mean.tolist(), *std.tolist(), *act.tolist()]
        values += [float(info.get(k, math.nan)) for k in self.info_keys]
        return act, values


# ------------------------------------------------------------------------- one episode
@dataclass
class EpisodeLog:
    """What the learner saw of one episode, enough for `task.episode_summary`."""

    planned: PlannedEpisode
    observations: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[dict] = field(default_factory=list)
    error: str | None = None
    counter: int | None = None
    """The sim's episode counter it ran under (None if it never started)."""
    actions: int = 0
    """Actions published; a robot reports no reward, so this is its step count."""

    @property
    def steps(self) -> int:
        return len(self.rewards) if self.rewards else self.actions

    def summary(self, task: Task) -> dict[str, Any]:
        summary = _summarise(task, self.observations, self.rewards, self.infos)
        summary.update(seed=self.planned.seed, steps=self.steps, complete=self.error is None,
                       error=self.error)
        return summary


# ------------------------------------------------------------------------- payloads
def _require(payload: Any, fields: Mapping[str, type | tuple[type, ...]], what: str) -> dict:
    if not isinstance(payload, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(payload).__name__}")
    for name, kind in fields.items():
        if name not in payload:
            raise ProtocolError(f"{what}: missing field {name!r}")
        if not isinstance(payload[name], kind) or isinstance(payload[name], bool) and kind is int:
            raise ProtocolError(f"{what}: field {name!r} has type {type(payload[name]).__name__}")
    return payload


def program_payload(round_: int, kind: str, source: str = "", reason: str = "", *, attempt: int = 1,
                    run_id: int = 0, bundle: PolicyBundle | None = None) -> dict:
    if kind not in PROGRAM_KINDS:
        raise ProtocolError(f"program kind must be one of {PROGRAM_KINDS}, got {kind!r}")
    payload = {"round": int(round_), "kind": kind, "source": source, "reason": reason,
               "attempt": int(attempt), "run_id": int(run_id)}
    if bundle is not None:
        payload["bundle_b64"] = encode_bundle(bundle)
    return payload


def parse_program(payload: Any) -> dict:
    data = _require(payload, {"round": int, "kind": str}, "refine/program")
    if data["kind"] not in PROGRAM_KINDS:
        raise ProtocolError(f"refine/program: kind must be one of {PROGRAM_KINDS}, got {data['kind']!r}")
    if data["kind"] == "program" and not isinstance(data.get("source"), str):
        raise ProtocolError("refine/program: a program needs its source text")
    data.setdefault("attempt", 1)
    data.setdefault("run_id", 0)
    data.setdefault("reason", "")
    return data


def encode_bundle(bundle: PolicyBundle) -> str:
    return base64.b64encode(bundle.to_npz_bytes()).decode("ascii")


def decode_bundle(text: str) -> PolicyBundle:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise ProtocolError(f"fit_result: bundle is not base64: {exc}") from None
    return PolicyBundle.from_npz_bytes(raw)


def fit_payload(round_: int, attempt: int, *, run_id: int, error: str | None, report: dict | None = None,
                info_schema: dict | None = None, bundle: PolicyBundle | None = None) -> dict:
    return {"round": int(round_), "attempt": int(attempt), "run_id": int(run_id), "ok": error is None,
            "error": error, "report": report, "info_schema": info_schema,
            "bundle_b64": encode_bundle(bundle) if bundle is not None else None}


def parse_fit(payload: Any) -> dict:
    data = _require(payload, {"round": int, "attempt": int, "ok": bool}, "refine/fit_result")
    if data["ok"] and not isinstance(data.get("bundle_b64"), str):
        raise ProtocolError("refine/fit_result: a successful fit needs bundle_b64")
    return data


def round_counter_base(round_: int, plan_length: int) -> int:
    """First episode counter of a round: rounds never share a counter, and none is 0, the
    counter a hardware bridge publishes under before it has seen any start event (its stale
    step numbers would otherwise be taken for the first episode's)."""
    return 1 + max(0, int(round_)) * max(1, int(plan_length))


def round_payload(round_: int, *, run_id: int, metrics: dict, episodes: list[dict], errors: list[str]) -> dict:
    return {"round": int(round_), "run_id": int(run_id), "metrics": metrics, "episodes": episodes,
            "errors": list(errors)}


def parse_round(payload: Any) -> dict:
    data = _require(payload, {"round": int, "metrics": dict, "episodes": list}, "refine/round_complete")
    data.setdefault("errors", [])
    return data
