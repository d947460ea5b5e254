"""What the analysis node (running `refine_core.loop.refine`) and the learner say to each other,
without any ROS import, so the shapes are written down and validated in one place.

The analysis node owns the method; the learner is the part of the robot side that can fit a
program (it holds the sandbox and the demonstration) and run a fitted policy at the control
rate. Two request/answer pairs, JSON on `std_msgs/String`, both on latched depth-1 topics so
a learner that starts late still receives the request the analysis node is waiting on:

- `refine/fit_request` {request, run_id, program} -> `refine/fit_result` {request, ok, error,
  report, info_schema, bundle_b64}. The fitted weights travel as a base64
  `PolicyBundle.to_npz_bytes()` blob: plain arrays, never a pickle.
- `refine/rollout_request` {request, run_id, round, mode, max_steps, expert_labels, bundle_b64,
  plan: [{kind, index, seed}]} -> `refine/rollout_result` {request, run_id, round, episodes:
  [{kind, index, seed, counter, steps, summary, error}], control_ms}.

`request` is a number unique within the analysis node's run; an answer to any other request
(a latched copy from before a restart) is ignored.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any

from refine_core.policy.bundle import PolicyBundle
from refine_core.rollout.plan import PlannedEpisode

FIT_REQUEST, FIT_RESULT = "refine/fit_request", "refine/fit_result"
ROLLOUT_REQUEST, ROLLOUT_RESULT = "refine/rollout_request", "refine/rollout_result"
RUN_STATUS = "refine/run_status"
EPISODES_PER_ROUND = 1000
"""Episode counters of round r start at 1 + r * EPISODES_PER_ROUND: unique across the run, so
the logger never joins two episodes whose messages are still in flight, and never 0 (the
counter a hardware bridge uses before any episode started)."""


class ProtocolError(ValueError):
    """A payload that does not follow the protocol; the message says which field."""


def _require(payload: Any, fields: Mapping[str, type | tuple[type, ...]], what: str) -> dict:
    if not isinstance(payload, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {type(payload).__name__}")
    for name, kind in fields.items():
        if name not in payload:
            raise ProtocolError(f"{what}: missing field {name!r}")
        value = payload[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise ProtocolError(f"{what}: field {name!r} has type {type(value).__name__}")
    return payload


def encode_bundle(bundle: PolicyBundle) -> str:
    return base64.b64encode(bundle.to_npz_bytes()).decode("ascii")


def decode_bundle(text: str) -> PolicyBundle:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise ProtocolError(f"bundle is not base64: {exc}") from None
    return PolicyBundle.from_npz_bytes(raw)


def episode_counter(round_: int, position: int) -> int:
    return 1 + max(0, int(round_)) * EPISODES_PER_ROUND + int(position)


# ----------------------------------------------------------------------------- fitting
def fit_request(request: int, run_id: int, program: str) -> dict:
    return {"request": int(request), "run_id": int(run_id), "program": program}


def parse_fit_request(payload: Any) -> dict:
    return _require(payload, {"request": int, "run_id": int, "program": str}, FIT_REQUEST)


def fit_result(request: int, *, error: str | None, report: dict | None = None, info_schema: dict | None = None,
               bundle: PolicyBundle | None = None) -> dict:
    return {"request": int(request), "ok": error is None, "error": error, "report": report,
            "info_schema": info_schema, "bundle_b64": encode_bundle(bundle) if bundle is not None else None}


def parse_fit_result(payload: Any) -> dict:
    data = _require(payload, {"request": int, "ok": bool}, FIT_RESULT)
    if data["ok"] and not isinstance(data.get("bundle_b64"), str):
        raise ProtocolError(f"{FIT_RESULT}: a successful fit needs bundle_b64")
    return data


# ----------------------------------------------------------------------------- rollouts
def rollout_request(request: int, run_id: int, round_: int, bundle: PolicyBundle, plan: Sequence[PlannedEpisode],
                    *, mode: str, max_steps: int | None, expert_labels: bool = False) -> dict:
    return {"request": int(request), "run_id": int(run_id), "round": int(round_), "mode": mode,
            "max_steps": int(max_steps or 0), "expert_labels": bool(expert_labels),
            "bundle_b64": encode_bundle(bundle),
            "plan": [{"kind": p.kind, "index": p.index, "seed": p.seed} for p in plan]}


def parse_rollout_request(payload: Any) -> dict:
    data = _require(payload, {"request": int, "run_id": int, "round": int, "mode": str, "max_steps": int,
                              "bundle_b64": str, "plan": list}, ROLLOUT_REQUEST)
    data["expert_labels"] = bool(data.get("expert_labels", False))
    plan = []
    for item in data["plan"]:
        entry = _require(item, {"kind": str, "index": int, "seed": int}, f"{ROLLOUT_REQUEST} plan entry")
        plan.append(PlannedEpisode(entry["kind"], entry["index"], entry["seed"]))
    data["plan"] = plan
    return data


def rollout_result(request: int, run_id: int, round_: int, episodes: list[dict],
                   control_ms: dict | None = None) -> dict:
    return {"request": int(request), "run_id": int(run_id), "round": int(round_), "episodes": episodes,
            "control_ms": control_ms or {}}


def parse_rollout_result(payload: Any) -> dict:
    data = _require(payload, {"request": int, "round": int, "episodes": list}, ROLLOUT_RESULT)
    for item in data["episodes"]:
        _require(item, {"kind": str, "index": int, "seed": int, "summary": dict}, f"{ROLLOUT_RESULT} episode")
    return data
