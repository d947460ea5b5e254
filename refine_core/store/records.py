"""What a refinement run keeps of each round, how a round is committed, and how a killed run
finds where to pick up.

Why this lives with the store: the loop decides *what* happens in a round; whether a round
landed is the database's business. A round commits in one transaction (program, fit,
diagnostics, their printed results, the analyst's calls and answer, episodes and metrics), so a
kill before the commit leaves no trace of the round and a kill after it loses nothing; resuming
rebuilds the loop's state from committed rows only.

The best round has one definition, here: the committed round with the best *selection*
metric (NaN never wins; ties keep the earlier round). Evaluation episodes are reported, never
used to choose.

A robot has no reward, so its metric may be all zeros or NaN; choosing among those would be a
blind pick. `choose_best` therefore takes a basis (`BEST_ROUND_BASES`): the task metric (a
simulator), the operator's success/failure labels of the live episodes (`operator`), or the
success a configured signal reported for each episode (`signal`, e.g. a twin's success or a
fiducial's predicate, stored as the episode's `success`). A round's score is then its success
rate over the episodes that have an outcome; rounds that share the best rate (every round
failed, often, early on a robot) are told apart by the selection metric where the robot
measures one from its own observations. When nothing distinguishes the rounds (no outcome at
all, or every round scores the same and no measured metric differs) it says so and keeps the
earliest committed round by rule; the reason travels to the run's events, the console and the
summary.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from refine_core.store.db import RunDatabase


class RunExistsError(ValueError):
    """The run directory already holds a run that was not asked to resume."""


@dataclass
class EpisodeRecord:
    """One finished episode of a round, as the database keeps it."""

    kind: str
    index: int
    seed: int
    summary: dict
    table: pd.DataFrame | None = None
    """The steps, for the kinds whose steps are kept (None: summary row only)."""
    error: str | None = None
    stored: bool = False
    """Already in the database (the ROS logger commits episodes as they run): not written again."""


@dataclass
class RoundRecord:
    run_id: int
    round: int
    status: str
    """"committed" or "failed" (no program could be fitted)."""
    program: str
    fit_report: dict | None = None
    info_schema: dict | None = None
    weights: dict | None = None
    diagnostics: str | None = None
    analyses: list[dict] = field(default_factory=list)
    decision: str = "stop"
    next_program: str | None = None
    reasoning: str = ""
    decision_reason: str = ""
    """The analyst's reason for `decision`, one line."""
    error: str | None = None
    metrics: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)

    @property
    def selection_metric(self) -> float:
        """The metric that chooses the best round: the selection episodes', or the diagnostic
        episodes' when the round ran no selection episode (`selection_episodes=0`)."""
        for kind in ("selection", "diagnostic"):
            group = self.metrics.get(kind) or {}
            if group.get("episodes", 1):
                value = group.get("metric_mean")
                if value is not None:
                    return float(value)
        return math.nan

    @property
    def eval_metric(self) -> float:
        return float(self.metrics.get("eval", {}).get("metric_mean", math.nan))


# ----------------------------------------------------------------------------- best round
def better(a: float, b: float, higher_is_better: bool) -> bool:
    """Is metric value `a` strictly better than `b`? NaN is never better; anything beats NaN."""
    if a != a:
        return False
    if b != b:
        return True
    return a > b if higher_is_better else a < b


def best_round(records: Iterable[RoundRecord], higher_is_better: bool) -> RoundRecord | None:
    """The committed round with the best selection metric (the earliest among equals)."""
    best = None
    for record in records:
        if record.status != "committed" or record.selection_metric != record.selection_metric:
            continue
        if best is None or better(record.selection_metric, best.selection_metric, higher_is_better):
            best = record
    return best


BEST_ROUND_BASES = ("metric", "operator", "signal")
"""What chooses the best round: the selection metric, the operator's episode labels, or a
configured success signal."""


@dataclass(frozen=True)
class BestChoice:
    round: RoundRecord | None
    basis: str
    """The basis asked for, or 'rule' when it did not distinguish the rounds."""
    reason: str
    """One line saying what chose the round (for the report and the summary)."""


def choose_best(records: Iterable[RoundRecord], higher_is_better: bool, basis: str = "metric",
                outcomes: Mapping[int, Sequence[float]] | None = None) -> BestChoice:
    """The best committed round by `basis`; `outcomes` maps a round to its episodes' outcomes
    (1 success, 0 failure) for the `operator` and `signal` bases."""
    if basis not in BEST_ROUND_BASES:
        raise ValueError(f"the best round basis must be one of {BEST_ROUND_BASES}, got {basis!r}")
    committed = [r for r in records if r.status == "committed"]
    if not committed:
        return BestChoice(None, basis, "no committed round")
    if basis == "metric":
        scores = {r.round: r.selection_metric for r in committed}
        what, higher = "selection metric", higher_is_better
    else:
        scores = {r.round: _rate((outcomes or {}).get(r.round, ())) for r in committed}
        what = "operator label" if basis == "operator" else "success signal"
        higher = True  # a success rate
    what_a = f"{'an' if what[0] in 'aeiou' else 'a'} {what}"
    scored = [r for r in committed if scores[r.round] == scores[r.round]]
    if not scored:
        return BestChoice(committed[0], "rule", f"nothing distinguishes the rounds (none has {what_a}): round "
                          f"{committed[0].round} kept by rule (the earliest committed round)")
    if basis != "metric":
        tie_break = _by_metric_among_the_tied(scored, scores, higher_is_better, what)
        if tie_break is not None:
            return tie_break
    if len(scored) > 1 and len({scores[r.round] for r in scored}) == 1:
        return BestChoice(scored[0], "rule", f"nothing distinguishes the rounds (every round with {what_a} has "
                          f"the same, {scores[scored[0].round]:.4g}): round {scored[0].round} kept by rule (the "
                          "earliest of them)")
    best = scored[0]
    for record in scored[1:]:
        if better(scores[record.round], scores[best.round], higher):
            best = record
    if basis == "metric":
        return BestChoice(best, basis, f"round {best.round} by its selection metric {scores[best.round]:.4g}")
    counted = len((outcomes or {}).get(best.round, ()))
    return BestChoice(best, basis, f"round {best.round} by {what}s: success rate {scores[best.round]:.2f} over "
                                   f"{counted} labelled episode(s)")


def _by_metric_among_the_tied(scored: list[RoundRecord], rates: Mapping[int, float], higher_is_better: bool,
                              what: str) -> BestChoice | None:
    """Where several rounds share the best success rate (on a robot, often every round failed),
    the selection metric, when the robot measures one from its own observations (the door's
    handle-to-target distance), tells them apart: six failed rounds are not equally far from the
    task. None when it does not (one round at the top, or no measured metric among them)."""
    top = max(rates[r.round] for r in scored)
    tied = [r for r in scored if rates[r.round] == top]
    measured = [r for r in tied if r.selection_metric == r.selection_metric]
    if len(tied) < 2 or len({r.selection_metric for r in measured}) < 2:
        return None
    best = measured[0]
    for record in measured[1:]:
        if better(record.selection_metric, best.selection_metric, higher_is_better):
            best = record
    rounds = ", ".join(str(r.round) for r in tied)
    return BestChoice(best, "metric", f"round {best.round}: rounds {rounds} share the best {what} success rate "
                                      f"{top:.2f}; of them, round {best.round} has the best selection metric "
                                      f"{best.selection_metric:.4g} (measured from the robot's observations)")


def _rate(values: Sequence[float]) -> float:
    known = [float(v) for v in values if v == v]
    return sum(known) / len(known) if known else math.nan


def round_outcomes(db: RunDatabase, run_id: int, basis: str) -> dict[int, list[float]]:
    """Per round, the outcomes of its live episodes for `basis`: `operator`, the labels an
    operator gave (`episodes.label` success / failure); `signal`, the `success` each episode's
    success signal stored. Unlabelled episodes are left out."""
    if basis not in ("operator", "signal"):
        return {}
    table = db.episodes(run_id)
    table = table[table["round"].notna() & (table["kind"] != "demo")]
    out: dict[int, list[float]] = {}
    for row in table.itertuples(index=False):
        if basis == "operator":
            value = {"success": 1.0, "failure": 0.0}.get(str(row.label or ""), math.nan)
        else:
            value = math.nan if row.success is None else float(row.success)
        if value == value:
            out.setdefault(int(row.round), []).append(value)
    return out


def last_committed(records: Sequence[RoundRecord]) -> RoundRecord | None:
    """The latest committed round (what a run goes on from after a round that failed)."""
    return next((r for r in reversed(records) if r.status == "committed"), None)


def best_committed_round(db: RunDatabase, run_id: int, higher_is_better: bool) -> int | None:
    """The number of the run's best round, by the rule above (None: no round has a selection
    metric yet, e.g. rounds made by `refine fit` alone)."""
    best = best_round((round_from_row(row) for row in db.rounds(run_id)), higher_is_better)
    return None if best is None else best.round


# ----------------------------------------------------------------------------- run and resume
def open_run(db: RunDatabase, task: str, analyst: str, config: dict, *, resume: bool) -> int:
    """The run in this database (resumed, or one with no rounds yet), else a new run."""
    existing = db.latest_run()
    if existing is not None:
        if existing["task"] != task:
            raise RunExistsError(f"{db.path} holds a {existing['task']} run, not {task}")
        if not resume and db.rounds(existing["id"]):
            raise RunExistsError(f"{db.path} already holds run {existing['id']}; pass --resume to continue it")
        if not db.rounds(existing["id"]):
            # a run another process opened (the demonstration recorder, the rollout logger): the
            # settings of the refinement that now fills it are what its results must name
            opened = dict(existing.get("config") or {})
            replaced = {k: v for k, v in opened.items() if k in config and config[k] != v}
            merged = {**opened, **config, **({"opened_with": replaced} if replaced else {})}
            db.update_run(int(existing["id"]), analyst=analyst, config=merged, status="running")
        return int(existing["id"])
    return db.create_run(task, analyst=analyst, config=config, status="running")


@dataclass
class ResumeState:
    rounds: list[RoundRecord]
    best: RoundRecord | None
    next_round: int
    next_program: str | None
    finished: bool
    stop_reason: str = ""


def round_from_row(row: dict) -> RoundRecord:
    """A committed `rounds` row (JSON columns already decoded by the database) as a record.
    A selection metric stored without the metrics it came from (e.g. set by hand with
    `update_round`) still counts."""
    metrics = dict(row.get("metrics") or {})
    if "selection" not in metrics and row.get("selection_metric") is not None:
        metrics["selection"] = {"metric_mean": float(row["selection_metric"])}
    return RoundRecord(
        run_id=int(row["run_id"]), round=int(row["round"]), status=row["status"], program=row["program"] or "",
        fit_report=row.get("fit_report"), info_schema=row.get("info_schema"),
        diagnostics=row.get("diagnostics"), decision=row.get("decision") or "stop",
        next_program=row.get("next_program"), reasoning=row.get("reasoning") or "",
        decision_reason=row.get("decision_reason") or "",
        error=row.get("error"), metrics=metrics, timings=row.get("timings") or {},
    )


def resume_state(db: RunDatabase, run_id: int, higher_is_better: bool) -> ResumeState:
    """The loop's state from committed rounds only: whatever was in flight when the process
    died is simply done again, so nothing is lost or duplicated."""
    rounds = [round_from_row(row) for row in db.rounds(run_id)]
    best = best_round(rounds, higher_is_better)
    run = db.run(run_id) or {}
    if not rounds:
        return ResumeState([], None, 0, None, finished=run.get("status") == "finished")
    last = rounds[-1]
    reason = run.get("stop_reason") or last.error or f"round {last.round} decided {last.decision}"
    if last.status == "failed":  # the run goes on from the last program that fitted, if any
        previous = last_committed(rounds)
        finished = run.get("status") == "finished" or previous is None
        return ResumeState(rounds, best, last.round + 1, previous.program if previous else None, finished, reason)
    finished = run.get("status") == "finished" or last.decision != "program"
    return ResumeState(rounds, best, last.round + 1, last.next_program, finished, reason)


def finish_run(db: RunDatabase, run_id: int, best: RoundRecord | None, reason: str) -> None:
    db.update_run(run_id, status="finished", best_round=best.round if best else None, stop_reason=reason)


# ----------------------------------------------------------------------------- commit
def commit_round(db: RunDatabase, record: RoundRecord, calls: Sequence[dict],
                 episodes: Sequence[EpisodeRecord] = ()) -> None:
    """One transaction per round, with the round's episodes except those already stored."""
    run_id, index = record.run_id, record.round
    with db.transaction():
        db.save_round(
            run_id, index, status=record.status, program=record.program, fit_report=record.fit_report,
            weights=record.weights, info_schema=record.info_schema, metrics=record.metrics,
            selection_metric=_finite_or_none(record.selection_metric),
            eval_metric=_finite_or_none(record.eval_metric), diagnostics=record.diagnostics,
            decision=record.decision, reasoning=record.reasoning, error=record.error, timings=record.timings,
            next_program=record.next_program, decision_reason=record.decision_reason or None,
        )
        for row in calls:
            db.log_llm_call(run_id, index, **row)
        for row in record.analyses:
            db.log_analysis(run_id, index, **row)
        for ep in episodes:
            if ep.stored:
                continue
            db.save_episode(run_id, index, ep.kind, ep.index, seed=ep.seed, summary=ep.summary,
                            table=ep.table, complete=ep.error is None, error=ep.error)
        kind = "round_committed" if record.status == "committed" else "round_failed"
        db.log_event(run_id, index, kind, record.error or record.decision)


def _finite_or_none(value: float) -> float | None:
    return None if value != value else float(value)
