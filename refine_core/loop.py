"""The refinement loop of METHOD.md, top to bottom.

    C0 = analyst.generate(task spec)
    for each round:
        fit C on the demonstration (in the sandbox; regenerate on failure, <= 5 attempts)
        T = analyst.diagnose(spec, C, column schema)         # names only, no numbers
        roll out: diagnostic episodes (the table T reads), selection episodes (pick the best
                  round), evaluation episodes (reported, never used to choose)
        inner loop: run T in the sandbox -> results -> analyst.revise -> more tests? run them
        commit the round (program, fit, diagnostics, results, answers, metrics) atomically
        stop, or continue with the revised program
    return the best round by the selection metric

Each stage is a function in `stages.py`; this file only orders them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from refine_core import stages
from refine_core.analyst.base import Analyst
from refine_core.stages import LoopConfig, RoundRecord
from refine_core.store.db import RunDatabase
from refine_core.tasks.base import Task


@dataclass
class LoopResult:
    run_id: int
    rounds: list[RoundRecord] = field(default_factory=list)
    best: RoundRecord | None = None
    stop_reason: str = ""


def refine(task: Task, analyst: Analyst, db: RunDatabase, config: LoopConfig, *, resume: bool = False) -> LoopResult:
    spec = task.spec
    log = stages.Reporter(config.verbose)

    # 0. The run, its demonstration, and where to pick up after a kill.
    run_id = stages.open_run(db, task, analyst, config, resume=resume)
    demo = stages.demonstration(db, run_id, task, log)
    state = stages.resume_state(db, run_id, spec)
    result = LoopResult(run_id=run_id, rounds=list(state.rounds), best=state.best)
    if state.finished:
        result.stop_reason = state.stop_reason
        log.say(f"run {run_id} already finished: {state.stop_reason}")
        return result

    # 1. Zero-shot structure (or the program the last committed round asked for).
    pending = stages.PendingCalls()
    program = state.next_program
    if program is None:
        answer = analyst.generate(spec)
        pending.add(answer.calls, role="generate")
        program = answer.program or ""
        log.say(f"round {state.next_round}: {analyst.name} wrote the zero-shot program")

    for round_index in range(state.next_round, config.max_rounds):
        timer = stages.StageTimer()

        # 2. Fit on the demonstration, regenerating from the error at most `max_attempts` times.
        with timer("fit"):
            fit = stages.fit_with_regeneration(analyst, task, program, demo, config, pending, log)
        if fit.failed:
            record = stages.failed_round(run_id, round_index, fit, timer, pending)
            stages.commit_round(db, record, pending)
            result.rounds.append(record)
            result.stop_reason = f"round {round_index}: no program could be fitted ({fit.error})"
            break
        program = fit.program

        # 3. Diagnostics from the task spec, the program and the column schema only.
        schema = stages.table_schema(spec, fit.info_schema)
        with timer("diagnose"):
            diagnostics = analyst.diagnose(spec, program, schema)
        pending.add(diagnostics.calls, role="diagnose")

        # 4. Roll out the fitted policy: the table the diagnostics read, then the metrics.
        with timer("rollout"):
            rollouts = stages.roll_out(task, fit.bundle, run_id, round_index, config, log)

        # 5. Inner loop: execute tests, ask the analyst, execute more tests if asked.
        with timer("analysis"):
            inner = stages.inner_loop(analyst, spec, program, diagnostics, rollouts, demo, config, pending, log)

        # 6. Commit everything about this round in one transaction.
        record = stages.committed_round(run_id, round_index, fit, diagnostics, rollouts, inner, timer)
        stages.commit_round(db, record, pending, rollouts)
        result.rounds.append(record)
        if stages.is_better(spec, record, result.best):
            result.best = record
        log.round_summary(record, result.best)

        # 7. Stop, or continue with the revised program.
        if inner.decision.kind != "program":
            result.stop_reason = inner.stop_reason
            break
        program = inner.decision.program
    else:
        result.stop_reason = f"reached max_rounds={config.max_rounds}"

    stages.finish_run(db, run_id, result.best, result.stop_reason)
    log.say(f"stopped: {result.stop_reason}")
    return result
