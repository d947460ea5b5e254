"""What the analysis node (running `refine_core.loop.refine`) and the learner say to each other:
two actions of `refine_ros_interfaces`, and their translation to and from the plain data the
loop and the round driver work with. The action types are imported when first used, so the
round driver and the tests of these shapes need no ROS.

The analysis node owns the method; the learner is the part of the robot side that can fit a
program (it holds the sandbox and the demonstration) and run a fitted policy at the control
rate:

- `learner/fit_program` (FitProgram): program in; error or bundle, info schema and fit report
  out; an epoch count as feedback; cancelling kills the sandboxed fit.
- `learner/run_rollout` (RunRollout): run, round, mode, step cap and the planned episodes in;
  one outcome per episode and the control-path latency out; the phase (preparing, waiting for
  the operator, running) and episodes done as feedback; cancelling ends the running episode
  (recorded as incomplete) and skips the rest.
- `learner/run_rl` (RunRl): post-refinement RL on a fitted policy, its episodes driven on the
  sim node or the robot (RL preset and settings in; the kept weights and the RL report out;
  phase, updates and episodes done and each update's record as feedback; cancelling ends the
  running episode and the run, keeping the weights chosen so far).

Fitted weights travel as `PolicyBundle.to_npz_bytes()`: plain arrays read with
`allow_pickle=False`, never a pickle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import InfoSchema
from refine_core.rollout.plan import PlannedEpisode

FIT_ACTION, ROLLOUT_ACTION, RL_ACTION = "learner/fit_program", "learner/run_rollout", "learner/run_rl"
RUN_STATUS = "refine/run_status"
EPISODES_PER_ROUND = 1000
"""Episode counters of round r start at 1 + r * EPISODES_PER_ROUND: unique across the run, so
the logger never joins two episodes whose messages are still in flight, and never 0 (the
counter a hardware bridge uses before any episode started). RL, the run's last round, may run
past its thousand: no round follows it to collide with."""
PHASES = ("preparing", "waiting_for_operator", "running")
"""RunRollout feedback phases, in the order of the action's constants."""
RL_PHASES = ("sampling", "waiting_for_operator", "updating", "selecting")
"""RunRl feedback phases, in the order of the action's constants."""


class ProtocolError(ValueError):
    """A goal or result that does not follow the protocol; the message says which field."""


def episode_counter(round_: int, position: int) -> int:
    return 1 + max(0, int(round_)) * EPISODES_PER_ROUND + int(position)


def decode_bundle(raw: bytes | Sequence[int]) -> PolicyBundle:
    if not raw:
        raise ProtocolError("no policy bundle")
    try:
        return PolicyBundle.from_npz_bytes(bytes(raw))
    except Exception as exc:  # noqa: BLE001 - any unreadable archive is a protocol error
        raise ProtocolError(f"unreadable policy bundle: {type(exc).__name__}: {exc}") from None


# ----------------------------------------------------------------------------- fitting
def fit_goal(run_id: int, program: str) -> Any:
    from refine_ros_interfaces.action import FitProgram

    return FitProgram.Goal(run_id=int(run_id), program=program)


def fit_result(*, error: str | None, bundle: PolicyBundle | None = None, report: Mapping | None = None,
               info: InfoSchema | None = None) -> Any:
    """A FitProgram result: the error, or the fitted bundle with its info schema and report."""
    from refine_ros_interfaces.action import FitProgram

    result = FitProgram.Result(error=error or "")
    if info is not None:
        result.weights, result.latents, result.warnings = list(info.weights), list(info.latents), list(info.warnings)
    if error is None and bundle is not None:
        result.report_json = json.dumps(report or {}, default=float)
        result.bundle_npz = bundle.to_npz_bytes()
    elif error is None:
        result.error = "the fit produced no policy"
    return result


def read_fit_result(result: Any) -> tuple[PolicyBundle | None, dict | None, InfoSchema | None, str | None]:
    """(bundle, report, info schema, error) of a FitProgram result; a malformed one is an error."""
    if result.error:
        return None, None, None, result.error
    try:
        report = json.loads(result.report_json) if result.report_json else {}
        return (decode_bundle(result.bundle_npz), report,
                InfoSchema(tuple(result.weights), tuple(result.latents), tuple(result.warnings)), None)
    except (ValueError, ProtocolError) as exc:
        return None, None, None, f"the learner's fit result is malformed: {exc}"


# ----------------------------------------------------------------------------- rollouts
def planned_message(planned: PlannedEpisode) -> Any:
    from refine_ros_interfaces.msg import PlannedEpisode as PlannedMsg

    return PlannedMsg(kind=planned.kind, index=int(planned.index), seed=int(planned.seed))


def rollout_goal(run_id: int, round_: int, bundle: PolicyBundle, plan: Sequence[PlannedEpisode], *, mode: str,
                 max_steps: int | None, expert_labels: bool = False) -> Any:
    from refine_ros_interfaces.action import RunRollout

    return RunRollout.Goal(run_id=int(run_id), round=int(round_), mode=mode, max_steps=int(max_steps or 0),
                           expert_labels=bool(expert_labels), bundle_npz=bundle.to_npz_bytes(),
                           plan=[planned_message(p) for p in plan])


def read_rollout_goal(goal: Any) -> dict:
    """The plain request the round driver runs: run_id, round, mode, max_steps, expert_labels,
    plan (PlannedEpisode list) and the undecoded bundle bytes."""
    if goal.mode not in ("mean", "sample"):
        raise ProtocolError(f"mode must be 'mean' or 'sample', got {goal.mode!r}")
    return {"run_id": int(goal.run_id), "round": int(goal.round), "mode": goal.mode,
            "max_steps": int(goal.max_steps), "expert_labels": bool(goal.expert_labels),
            "plan": [PlannedEpisode(p.kind, int(p.index), int(p.seed)) for p in goal.plan],
            "bundle": bytes(goal.bundle_npz)}


def rollout_result(episodes: Sequence[Mapping], control_ms: Mapping | None = None) -> Any:
    """A RunRollout result from the round driver's episode entries and latency figures."""
    from refine_ros_interfaces.action import RunRollout
    from refine_ros_interfaces.msg import EpisodeOutcome

    outcomes = []
    for ep in episodes:
        summary = {k: float(v) for k, v in ep["summary"].items() if isinstance(v, (int, float))}
        outcomes.append(EpisodeOutcome(
            planned=planned_message(PlannedEpisode(ep["kind"], int(ep["index"]), int(ep["seed"]))),
            counter=int(ep.get("counter", 0)), steps=int(ep.get("steps", 0)), complete=ep.get("error") is None,
            error=ep.get("error") or "", summary_names=list(summary), summary_values=list(summary.values())))
    control = control_ms or {}
    return RunRollout.Result(episodes=outcomes, control_p50_ms=float(control.get("p50", 0.0)),
                             control_p99_ms=float(control.get("p99", 0.0)),
                             control_max_ms=float(control.get("max", 0.0)),
                             control_steps=int(control.get("steps", 0)))


def read_rollout_result(result: Any) -> dict:
    """{episodes: [{kind, index, seed, counter, steps, summary, error}], control_ms} of a RunRollout
    result; NaN in a summary stays NaN (a metric that was not measured)."""
    episodes = []
    for out in result.episodes:
        if len(out.summary_names) != len(out.summary_values):
            raise ProtocolError(f"episode {out.planned.kind} {out.planned.index}: "
                                f"{len(out.summary_names)} summary names for {len(out.summary_values)} values")
        summary = {name: float(v) for name, v in zip(out.summary_names, out.summary_values, strict=True)}
        episodes.append({"kind": out.planned.kind, "index": int(out.planned.index), "seed": int(out.planned.seed),
                         "counter": int(out.counter), "steps": int(out.steps), "summary": summary,
                         "error": None if out.complete else (out.error or "incomplete")})
    control = ({"p50": result.control_p50_ms, "p99": result.control_p99_ms, "max": result.control_max_ms,
                "steps": int(result.control_steps)} if result.control_steps else {})
    return {"episodes": episodes, "control_ms": control}



# ----------------------------------------------------------------------------- post-refinement RL
def rl_goal(run_id: int, round_: int, bundle: PolicyBundle, settings: Mapping, preset: str = "ours") -> Any:
    from refine_ros_interfaces.action import RunRl

    return RunRl.Goal(run_id=int(run_id), round=int(round_), preset=preset,
                      settings_json=json.dumps(dict(settings), default=float), bundle_npz=bundle.to_npz_bytes())


def read_rl_goal(goal: Any, task_settings: Mapping | None = None) -> dict:
    """{run_id, round, config (an RLConfig), bundle (undecoded bytes)}; a preset or a setting
    RLConfig refuses is a protocol error naming it. `task_settings`: the task's own RL settings
    (`TaskSpec.rl_settings`), which "ours" includes."""
    config = rl_config(goal.preset or "ours", rl_settings(goal.settings_json), task_settings)
    return {"run_id": int(goal.run_id), "round": int(goal.round), "config": config, "bundle": bytes(goal.bundle_npz)}


def rl_settings(text: str) -> dict:
    """RLConfig fields from a JSON object ('' = none), checked by name."""
    from refine_core.learn.rl import RLConfig

    if not text.strip():
        return {}
    try:
        settings = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"RL settings are not JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise ProtocolError("RL settings must be a JSON object of RLConfig fields")
    unknown = sorted(set(settings) - set(RLConfig.__dataclass_fields__))
    if unknown:
        raise ProtocolError(f"RL settings: {', '.join(unknown)} not RLConfig fields")
    return settings


def rl_config(preset: str, settings: Mapping, task_settings: Mapping | None = None) -> Any:
    """The RLConfig of a named preset (with the task's own settings) and `settings` over it;
    refused values name themselves."""
    from refine_core.learn.rl import RLConfig

    try:
        return RLConfig.preset(preset, task_settings, **settings)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"RL settings refused: {exc}") from None


def rl_result(*, error: str | None, report: Mapping | None = None, bundle: PolicyBundle | None = None) -> Any:
    """A RunRl result: the error, or the kept bundle with the report and the episodes run."""
    from refine_ros_interfaces.action import RunRl

    report = dict(report or {})
    result = RunRl.Result(error=error or "", report_json=json.dumps(report, default=float),
                          training_resets=int(report.get("resets", 0)),
                          selection_resets=int(report.get("selection_resets", 0)))
    if error is None and bundle is not None:
        result.bundle_npz = bundle.to_npz_bytes()
    elif error is None:
        result.error = "RL produced no policy"
    return result


def read_rl_result(result: Any) -> tuple[PolicyBundle | None, dict, str | None]:
    """(kept bundle, report, error) of a RunRl result; a malformed one is an error."""
    try:
        report = json.loads(result.report_json) if result.report_json else {}
    except ValueError as exc:
        return None, {}, f"the learner's RL report is malformed: {exc}"
    if result.error:
        return None, report, result.error
    try:
        return decode_bundle(result.bundle_npz), report, None
    except ProtocolError as exc:
        return None, report, f"the learner's RL result is malformed: {exc}"
