"""The stages `loop.py` strings together, each small enough to test on its own.

Nothing here decides the order of the method; that is `loop.refine`'s job.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from refine_core.analyst.base import Analyst, Decision, DiagnosticsAnswer, LLMCall
from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import InfoSchema, validate_policy
from refine_core.policy.errors import ContractError
from refine_core.policy.static_check import check_program_source
from refine_core.rollout.demo import Demonstration, DemonstrationError, record_demonstration
from refine_core.rollout.runner import run_episodes
from refine_core.sandbox import SandboxResult, fit_in_sandbox, run_diagnostics
from refine_core.store.db import RunDatabase
from refine_core.tasks.base import Task
from refine_core.tasks.spec import TaskSpec


@dataclass
class LoopConfig:
    max_rounds: int = 6
    """Outer-loop rounds (METHOD.md default)."""
    max_attempts: int = 5
    """Build/fit attempts per round before the round is given up with a recorded error."""
    max_test_requests: int = 2
    """'More tests' answers executed per round before the analyst must revise or stop."""
    diagnostic_episodes: int = 2
    """Episodes whose step table the diagnostics read (task's diagnostic seeds)."""
    selection_episodes: int = 3
    """Episodes that decide the best round (task's selection seeds; never evaluation seeds)."""
    eval_episodes: int = 10
    """Evaluation episodes per round on the task's unseen evaluation seeds (reported only)."""
    action_mode: str = "mean"
    """'mean' executes the Gaussian's mean, 'sample' samples from it."""
    il: dict = field(default_factory=dict)
    """ILConfig overrides for every fit."""
    sandbox_timeout_s: float = 120.0
    """Wall-clock limit for one diagnostics script."""
    fit_timeout_s: float = 600.0
    """Wall-clock limit for one sandboxed fit."""
    workers: int = 1
    """Local processes for rollouts."""
    allow_weak_isolation: bool = False
    """Run generated code even where OS namespaces are unavailable (recorded as 'weak')."""
    max_steps: int | None = None
    """Cap episode length (tests and smoke runs); None = the task's length."""
    verbose: bool = True


@dataclass
class RoundRecord:
    run_id: int
    round: int
    status: str                      # "committed" or "failed"
    program: str
    fit_report: dict | None = None
    info_schema: dict | None = None
    weights: dict | None = None
    diagnostics: str | None = None
    analyses: list[dict] = field(default_factory=list)
    decision: str = "stop"
    next_program: str | None = None
    reasoning: str = ""
    error: str | None = None
    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def selection_metric(self) -> float:
        return float(self.metrics.get("selection", {}).get("metric_mean", float("nan")))


# ------------------------------------------------------------------------- bookkeeping
class StageTimer:
    """Wall time per stage, stored with the round so the report can show where time went."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


class PendingCalls:
    """LLM calls made since the last commit; they land with the round that used them."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, calls: list[LLMCall], role: str) -> None:
        for call in calls:
            row = call.to_dict()
            row["role"] = row.get("role") or role
            self.rows.append(row)

    def take(self) -> list[dict]:
        rows, self.rows = self.rows, []
        return rows


class Reporter:
    """Progress lines for a person watching (the database keeps the record: `events`)."""

    def __init__(self, verbose: bool) -> None:
        self.verbose = verbose

    def say(self, message: str) -> None:
        if self.verbose:
            print(f"[refine] {message}", flush=True)

    def round_summary(self, record: RoundRecord, best: RoundRecord | None) -> None:
        sel = record.metrics.get("selection", {})
        ev = record.metrics.get("eval", {})
        self.say(
            f"round {record.round}: selection metric {sel.get('metric_mean', float('nan')):.4g}"
            f", eval {ev.get('metric_mean', float('nan')):.4g} ± {ev.get('metric_std', float('nan')):.3g}"
            f", decision {record.decision}; best so far: round {best.round if best else '-'}"
        )


# ------------------------------------------------------------------------- run and resume
def open_run(db: RunDatabase, task: Task, analyst: Analyst, config: LoopConfig, *, resume: bool) -> int:
    """The run in this database (resumed, or one with no rounds yet), else a new run."""
    existing = db.latest_run()
    if existing is not None:
        if existing["task"] != task.spec.name:
            raise RunExistsError(f"{db.path} holds a {existing['task']} run, not {task.spec.name}")
        if not resume and db.rounds(existing["id"]):
            raise RunExistsError(f"{db.path} already holds run {existing['id']}; pass --resume to continue it")
        return int(existing["id"])
    return db.create_run(task.spec.name, analyst=analyst.name, config=asdict(config), status="running")


class RunExistsError(ValueError):
    """The run directory already holds a run that was not asked to resume."""


def demonstration(db: RunDatabase, run_id: int, task: Task, log: Reporter) -> Demonstration:
    try:
        return Demonstration.load(db, run_id)
    except DemonstrationError:
        log.say(f"recording the expert demonstration (seed {task.spec.demo_seed})")
        demo = record_demonstration(task)
        demo.save(db, run_id)
        return demo


@dataclass
class ResumeState:
    rounds: list[RoundRecord]
    best: RoundRecord | None
    next_round: int
    next_program: str | None
    finished: bool
    stop_reason: str = ""


def resume_state(db: RunDatabase, run_id: int, spec: TaskSpec) -> ResumeState:
    """Rebuild the loop's state from committed rounds only: whatever was in flight when the
    process died is simply done again, so nothing is lost or duplicated."""
    rounds = [round_from_row(row) for row in db.rounds(run_id)]
    best = None
    for record in rounds:
        if is_better(spec, record, best):
            best = record
    run = db.run(run_id) or {}
    if not rounds:
        return ResumeState([], None, 0, None, finished=run.get("status") == "finished")
    last = rounds[-1]
    finished = run.get("status") == "finished" or last.status == "failed" or last.decision != "program"
    reason = run.get("stop_reason") or last.error or f"round {last.round} decided {last.decision}"
    return ResumeState(rounds, best, last.round + 1, last.next_program, finished, reason)


def round_from_row(row: dict) -> RoundRecord:
    """A committed `rounds` row (JSON columns already decoded by the database) as a record."""
    return RoundRecord(
        run_id=int(row["run_id"]), round=int(row["round"]), status=row["status"], program=row["program"] or "",
        fit_report=row.get("fit_report"), info_schema=row.get("info_schema"),
        diagnostics=row.get("diagnostics"), decision=row.get("decision") or "stop",
        next_program=row.get("next_program"), reasoning=row.get("reasoning") or "",
        error=row.get("error"), metrics=row.get("metrics") or {}, timings=row.get("timings") or {},
    )


def _better(record: RoundRecord, best: RoundRecord | None, higher_is_better: bool) -> bool:
    a = record.selection_metric
    if a != a:
        return False
    if best is None:
        return True
    b = best.selection_metric
    return b != b or (a > b if higher_is_better else a < b)


def is_better(spec: TaskSpec, record: RoundRecord, best: RoundRecord | None) -> bool:
    return record.status == "committed" and _better(record, best, spec.metric.higher_is_better)


def finish_run(db: RunDatabase, run_id: int, best: RoundRecord | None, reason: str) -> None:
    db.update_run(run_id, status="finished", best_round=best.round if best else None, stop_reason=reason)


# ------------------------------------------------------------------------- fitting
@dataclass
class FitOutcome:
    program: str
    bundle: PolicyBundle | None = None
    report: dict | None = None
    info_schema: InfoSchema | None = None
    attempts: list[dict] = field(default_factory=list)
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.bundle is None


def fit_once(task: Task, program: str, demo: Demonstration, config: LoopConfig) -> FitOutcome:
    """Static check in this process, build + validate + fit in the sandbox, then rebuild the
    fitted policy here from source + plain arrays (the program was checked first)."""
    outcome = FitOutcome(program=program)
    try:
        check_program_source(program)
    except ContractError as exc:
        outcome.error = str(exc)
        return outcome
    fit = fit_in_sandbox(program, task.spec.name, demo.inputs, demo.actions, config.il,
                         timeout_s=config.fit_timeout_s, allow_weak_isolation=config.allow_weak_isolation)
    if fit.status != "ok" or fit.weights is None:
        outcome.error = fit.error or f"sandboxed fit ended with status {fit.status}"
        return outcome
    bundle = PolicyBundle(program, fit.weights)
    try:
        policy = bundle.build(task.spec)
        outcome.info_schema = validate_policy(policy, task.spec)
    except ContractError as exc:
        outcome.error = str(exc)
        return outcome
    outcome.bundle, outcome.report = bundle, fit.report
    return outcome


def fit_with_regeneration(analyst: Analyst, task: Task, program: str, demo: Demonstration,
                          config: LoopConfig, pending: PendingCalls, log: Reporter) -> FitOutcome:
    attempts: list[dict] = []
    for attempt in range(1, config.max_attempts + 1):
        outcome = fit_once(task, program, demo, config) if program else FitOutcome(program, error="empty program")
        attempts.append({"attempt": attempt, "error": outcome.error})
        if not outcome.failed:
            outcome.attempts = attempts
            return outcome
        log.say(f"fit attempt {attempt}/{config.max_attempts} failed: {outcome.error}")
        if attempt == config.max_attempts:
            break
        answer = analyst.generate(task.spec, failed_program=program, error=outcome.error)
        pending.add(answer.calls, role="regenerate")
        program = answer.program or ""
        if not answer.ok:
            attempts[-1]["regenerate_error"] = answer.error
    return FitOutcome(program=program, attempts=attempts, error=attempts[-1]["error"])


# ------------------------------------------------------------------------- rollouts
def table_schema(spec: TaskSpec, info: InfoSchema) -> list[str]:
    """Column names of the rollout table for this program: what the diagnostics may use."""
    ids = ["run_id", "round", "kind", "episode", "seed", "step"]
    obs = list(spec.observation_columns)
    acts = [f"{p}_{a}" for p in ("mean", "act", "expert") for a in spec.action_names]
    return ids + obs + list(info.latents) + list(info.weights) + acts + ["reward", "done"] + [f"next_{c}" for c in obs]


@dataclass
class Rollouts:
    diagnostic: pd.DataFrame
    episodes: list[EpisodeRow]
    metrics: dict
    errors: list[str]


def summarise(summaries: list[dict]) -> dict:
    metric = np.array([s.get("metric", np.nan) for s in summaries], dtype=float)
    ret = np.array([s.get("return", np.nan) for s in summaries], dtype=float)
    success = np.array([s.get("success", 0.0) for s in summaries], dtype=float)
    def stat(f, x):
        return float(f(x)) if len(x) and np.isfinite(x).any() else float("nan")
    return {
        "episodes": len(summaries), "metric_mean": stat(np.nanmean, metric), "metric_std": stat(np.nanstd, metric),
        "return_mean": stat(np.nanmean, ret), "return_std": stat(np.nanstd, ret),
        "success_rate": float(success.mean()) if len(success) else float("nan"),
    }


def roll_out(task: Task, bundle: PolicyBundle, run_id: int, round_index: int, config: LoopConfig, log: Reporter) -> Rollouts:
    spec = task.spec
    groups = {
        "diagnostic": spec.diagnostic_seeds[: config.diagnostic_episodes],
        "selection": spec.selection_seeds[: config.selection_episodes],
        "eval": spec.eval_seeds[: config.eval_episodes],
    }
    episodes, errors, metrics, diagnostic_tables = [], [], {}, []
    for kind, seeds in groups.items():
        if not seeds:
            continue
        results = run_episodes(task, bundle, list(seeds), mode=config.action_mode, workers=config.workers,
                               ids={"run_id": run_id, "round": round_index, "kind": kind},
                               max_steps=config.max_steps, label_expert=(kind == "diagnostic"),
                               desc=f"round {round_index} {kind}", progress=None if config.verbose else False)
        metrics[kind] = summarise([res.summary for res in results])
        for i, (seed, res) in enumerate(zip(seeds, results, strict=True)):
            # only the diagnostic episodes' steps are stored: they are the table the analyst reads
            table = res.table if kind == "diagnostic" else None
            episodes.append(EpisodeRow(kind, i, int(seed), res.summary, table, res.error))
            if res.error:
                errors.append(f"{kind} seed {seed}: {res.error}")
            if table is not None:
                diagnostic_tables.append(table)
    table = pd.concat(diagnostic_tables, ignore_index=True) if diagnostic_tables else pd.DataFrame()
    for err in errors:
        log.say(f"rollout error: {err}")
    return Rollouts(diagnostic=table, episodes=episodes, metrics=metrics, errors=errors)


@dataclass
class EpisodeRow:
    kind: str
    episode: int
    seed: int
    summary: dict
    table: pd.DataFrame | None
    error: str | None


# ------------------------------------------------------------------------- inner loop
@dataclass
class InnerLoop:
    decision: Decision
    analyses: list[dict]
    stop_reason: str


def analysis_row(iteration: int, code: str, result: SandboxResult) -> dict:
    return {"iteration": iteration, "code": code, "stdout": result.stdout, "stderr_tail": result.stderr_tail,
            "status": result.status, "isolation": result.isolation, "duration_s": result.duration_s}


def results_text(result: SandboxResult) -> str:
    """What the analyst reads: the printed results, or the failure and its stderr tail."""
    if result.status == "ok":
        return result.stdout or "(the diagnostics printed nothing)"
    return f"[diagnostics {result.status}] {result.message}\n{result.stdout}\n--- stderr (tail) ---\n{result.stderr_tail}"


def inner_loop(analyst: Analyst, spec: TaskSpec, program: str, diagnostics: DiagnosticsAnswer, rollouts: Rollouts,
               demo: Demonstration, config: LoopConfig, pending: PendingCalls, log: Reporter) -> InnerLoop:
    analyses: list[dict] = []
    code = diagnostics.code or ""
    if diagnostics.ok:
        result = run_diagnostics(code, rollouts.diagnostic, demo.table, timeout_s=config.sandbox_timeout_s,
                                 allow_weak_isolation=config.allow_weak_isolation)
        analyses.append(analysis_row(0, code, result))
        text = results_text(result)
    else:
        text = f"[no diagnostics] the analyst gave no usable diagnostic code: {diagnostics.error}"
    if rollouts.errors:
        text += "\n[rollout errors]\n" + "\n".join(rollouts.errors)
    all_code, all_results = code, text
    history: list[dict] = []
    for request in range(config.max_test_requests + 1):
        decision = analyst.revise(spec, program, all_code, all_results, history=history)
        pending.add(decision.calls, role="revise")
        if decision.error:
            return InnerLoop(decision, analyses, f"analyst gave no usable answer: {decision.error}")
        if decision.kind != "tests":
            reason = decision.reasoning.strip().splitlines()[0] if decision.reasoning.strip() else decision.kind
            return InnerLoop(decision, analyses, reason if decision.kind == "stop" else "")
        if request == config.max_test_requests:
            break
        log.say(f"analyst asked for more tests ({request + 1}/{config.max_test_requests})")
        result = run_diagnostics(decision.tests, rollouts.diagnostic, demo.table, timeout_s=config.sandbox_timeout_s,
                                 allow_weak_isolation=config.allow_weak_isolation)
        analyses.append(analysis_row(request + 1, decision.tests, result))
        history.append({"tests": decision.tests, "results": results_text(result), "reasoning": decision.reasoning})
        all_code += "\n\n# --- more tests ---\n" + decision.tests
        all_results += "\n\n# --- results of the additional tests ---\n" + results_text(result)
    stop = Decision(kind="stop", reasoning=f"more-tests budget ({config.max_test_requests}) used up without a revision")
    return InnerLoop(stop, analyses, stop.reasoning)


# ------------------------------------------------------------------------- committing
def committed_round(run_id: int, round_index: int, fit: FitOutcome, diagnostics: DiagnosticsAnswer,
                    rollouts: Rollouts, inner: InnerLoop, timer: StageTimer) -> RoundRecord:
    decision = inner.decision
    return RoundRecord(
        run_id=run_id, round=round_index, status="committed", program=fit.program,
        fit_report={**(fit.report or {}), "attempts": fit.attempts},
        info_schema=asdict(fit.info_schema) if fit.info_schema else None,
        weights=fit.bundle.weights if fit.bundle else None,
        diagnostics=diagnostics.code, analyses=inner.analyses, decision=decision.kind,
        next_program=decision.program if decision.kind == "program" else None,
        reasoning="\n\n".join(x for x in (diagnostics.reasoning, decision.reasoning) if x),
        error=decision.error, metrics=rollouts.metrics, timings=dict(timer.seconds),
    )


def failed_round(run_id: int, round_index: int, fit: FitOutcome, timer: StageTimer, pending: PendingCalls) -> RoundRecord:
    return RoundRecord(run_id=run_id, round=round_index, status="failed", program=fit.program,
                       fit_report={"attempts": fit.attempts}, error=fit.error, decision="stop",
                       timings=dict(timer.seconds))


def commit_round(db: RunDatabase, record: RoundRecord, pending: PendingCalls, rollouts: Rollouts | None = None) -> None:
    """One transaction per round: a kill before it leaves no trace of the round, a kill after
    it loses nothing."""
    run_id, index = record.run_id, record.round
    with db.transaction():
        db.save_round(
            run_id, index, status=record.status, program=record.program, fit_report=record.fit_report,
            weights=record.weights, info_schema=record.info_schema, metrics=record.metrics,
            selection_metric=record.metrics.get("selection", {}).get("metric_mean"),
            eval_metric=record.metrics.get("eval", {}).get("metric_mean"), diagnostics=record.diagnostics,
            decision=record.decision, reasoning=record.reasoning, error=record.error, timings=record.timings,
            next_program=record.next_program,
        )
        for row in pending.take():
            db.log_llm_call(run_id, index, **row)
        for row in record.analyses:
            db.log_analysis(run_id, index, **row)
        for ep in rollouts.episodes if rollouts is not None else ():
            db.save_episode(run_id, index, ep.kind, ep.episode, seed=ep.seed, summary=ep.summary,
                            table=ep.table, complete=ep.error is None, error=ep.error)
        kind = "round_committed" if record.status == "committed" else "round_failed"
        db.log_event(run_id, index, kind, record.error or record.decision)
