"""The refinement method, top to bottom.

    C = analyst.generate(task), or a given start     the zero-shot structure
    for each round (at most max_rounds):
        fit C on the one demonstration                regenerate from the error, <= max_attempts
          still failing: record the round, go on from the last program that fitted
        T = analyst.diagnose(task, C, column names)   names only: no rollout number yet
        roll out C: diagnostic episodes (the table T reads; one, as published), selection
                    episodes (choose the best round), evaluation episodes (reported only)
        run T in the sandbox over the rollout table   (and the demonstration's, if the run
                                                       says so) -> printed results r
        b = analyst.revise(r), continuing T's exchange; b = more tests? run them, ask again
        commit the round (one transaction)
        b = stop -> leave; b = a program -> C = b
    optionally: RL polishes the best round's continuous parameters
    the best round is the one with the best selection metric

The analyst reads the task through `task.spec.for_analyst()`: the description variant's
words and column names (`refine_core.tasks.spec`); tables it reads are renamed to match. Its
analysis code receives the rollout table only, as published, unless the run's
`diagnostics_see_demo` gives it the demonstration too; every episode executes the run's
`action_mode`, by default the one the task's published results were verified in.

Where a program is fitted and who runs the episodes are the two seams in `backends` (local
defaults; `refine_ros.loop.graph` runs them over DDS). Records, commits and resume live with the
store (`store.records`). Everything else about the method is in this file.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from refine_core.analyst.base import Analyst, Conversation, Decision, DiagnosticsAnswer, LLMCall
from refine_core.analyst.prompts import DEFAULT_MAX_TEST_REQUESTS
from refine_core.backends import (
    EpisodeRunner,
    FitOutcome,
    Fitter,
    LocalEpisodes,
    LocalFitter,
    LocalPolisher,
    Polisher,
    Rollouts,
)
from refine_core.rollout.demo import (
    Demonstration,
    DemonstrationError,
    parse_takes,
    record_demonstration,
)
from refine_core.rollout.plan import episode_plan
from refine_core.rollout.schema import RolloutSchema, analyst_renames
from refine_core.sandbox import SandboxResult, run_diagnostics
from refine_core.sandbox.fit import FIT_VALIDATION_S
from refine_core.store import records
from refine_core.store.db import RunDatabase
from refine_core.store.records import RoundRecord
from refine_core.tasks.base import Task
from refine_core.tasks.spec import ACTION_MODES, TaskSpec

DEMONSTRATION_SOURCES = ("expert", "recorded")


@dataclass
class RefineConfig:
    max_rounds: int = 6
    """Outer-loop rounds."""
    max_attempts: int = 5
    """Build/fit attempts per round before the round is given up with a recorded error."""
    max_test_requests: int = DEFAULT_MAX_TEST_REQUESTS
    """'More tests' answers executed per round before the analyst must revise or stop (the
    revision prompt states the same cap)."""
    diagnostic_episodes: int = 1
    """Episodes whose step table the diagnostics read: one diagnostic rollout per round, as
    published (9 calls and 4 resets for 3 revisions)."""
    selection_episodes: int = 3
    """Episodes that decide the best round (never the evaluation seeds), counted apart from
    the diagnostic ones. 0: the best round is chosen on the diagnostic episodes alone."""
    eval_episodes: int = 10
    """Episodes on unseen evaluation seeds, reported only."""
    action_mode: str | None = field(default=None, metadata={"choices": ACTION_MODES})
    """'mean' executes the Gaussian's mean, 'sample' a draw from it seeded by the episode's seed,
    in every episode of the run. None: the mode the task's published results were verified in
    (`TaskSpec.eval_mode`: the car's mean action, the door's sampled actions)."""
    diagnostics_see_demo: bool | None = None
    """Give the diagnostic analysis code the demonstration table (`demo`) besides the rollout
    table (`df`). The published method gives it the rollout only, and a language model is
    never given the demonstration unless this is on; None: off for a language model, on for
    the offline analyst (its pre-written checks compare with the demonstration). Every
    transcript, summary and results table names the value used."""
    expert_labels: bool = False
    """Relabel every rollout state with the scripted expert's action (`expert_*` columns).
    Privileged information the published method does not have: off unless asked for, and
    impossible on a robot."""
    demonstration: str = field(default="expert", metadata={"choices": DEMONSTRATION_SOURCES})
    """'expert': record the task's scripted expert when the run has no demonstration yet;
    'recorded': only ever use a demonstration already in the run and never the simulated
    expert's (robots: one teleoperated on the robot)."""
    best_round_by: str = field(default="metric", metadata={"choices": records.BEST_ROUND_BASES})
    """What chooses the best round: 'metric' (the selection episodes' task metric: a
    simulator); on a robot, which measures no reward, 'operator' (the operator's success /
    failure labels of the live episodes) or 'signal' (the success each episode's success
    signal stored). When it does not tell the rounds apart, the earliest committed round is
    kept by rule, and the run says so."""
    demo_takes: str = ""
    """The recorded takes every fit uses: '' (or 'all') = every take stored in the run,
    concatenated take after take; '0,2' = those takes, in that order."""
    il: dict = field(default_factory=dict)
    """`learn.il.ILConfig` overrides for every fit."""
    rl_resets: int = 0
    """Environment resets for RL on the best round after refinement (0 = no RL)."""
    rl_preset: str = field(default="ours", metadata={"choices": ("ours", "published")})
    """That RL's named settings (`learn.rl.PRESETS`): "ours", the product default (trust region,
    checkpoints accepted in the deployed mode), or "published" (METHOD.md exactly)."""
    rl: dict = field(default_factory=dict)
    """`learn.rl.RLConfig` overrides for that RL, over the preset."""
    sandbox_timeout_s: float = 120.0
    """Wall-clock limit for one diagnostics script."""
    fit_timeout_s: float = 600.0
    """Wall-clock limit for one sandboxed fit."""
    fit_validation_s: float = FIT_VALIDATION_S
    """CPU-time budget of a fit's validation phase (build, contract check, first epochs; six
    times as much wall clock at most): a program whose forward never returns is refused within it."""
    workers: int = 1
    """Local processes for rollouts."""
    allow_weak_isolation: bool = False
    """Run generated code even where OS namespaces are unavailable (recorded as 'weak')."""
    max_steps: int | None = None
    """Cap on episode length (tests and smoke runs); None = the task's length."""
    verbose: bool = True

    def __post_init__(self) -> None:
        if self.action_mode is not None and self.action_mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {self.action_mode!r}")
        if self.demonstration not in DEMONSTRATION_SOURCES:
            raise ValueError(f"demonstration must be one of {DEMONSTRATION_SOURCES}, got {self.demonstration!r}")
        parse_takes(self.demo_takes)
        if self.best_round_by not in records.BEST_ROUND_BASES:
            raise ValueError(f"best_round_by must be one of {records.BEST_ROUND_BASES}, got {self.best_round_by!r}")
        for name in ("max_rounds", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclass(frozen=True)
class StartProgram:
    """A program the run begins from instead of asking the analyst for a zero-shot one (a
    user's own controller, or a structure written elsewhere); recorded as such."""

    source: str
    label: str
    """Where it came from (e.g. the file it was read from), for the run's records."""

    def record(self) -> dict:
        import hashlib

        return {"kind": "program", "label": self.label,
                "sha256": hashlib.sha256(self.source.encode("utf-8")).hexdigest()}


def resolve_defaults(config: RefineConfig, spec: TaskSpec, analyst: Analyst) -> RefineConfig:
    """`config` with the settings left to the task or the analyst made explicit (the action
    mode, the diagnostics' demonstration access), as the run records and uses them."""
    from dataclasses import replace

    see_demo = config.diagnostics_see_demo
    return replace(config, action_mode=config.action_mode or spec.eval_mode,
                   diagnostics_see_demo=bool(analyst.reads_demonstration if see_demo is None else see_demo))


ZERO_SHOT = {"kind": "zero-shot"}
"""How a run that asked the analyst for its first program records its start."""


@dataclass
class RefineResult:
    run_id: int
    rounds: list[RoundRecord] = field(default_factory=list)
    best: RoundRecord | None = None
    stop_reason: str = ""
    best_reason: str = ""
    """What chose `best` (`records.choose_best`)."""


@dataclass
class Run:
    """What every step of one refinement run shares (CleanRL keeps this in its globals)."""

    task: Task
    analyst: Analyst
    db: RunDatabase
    config: RefineConfig
    fitter: Fitter
    episodes: EpisodeRunner
    polisher: Polisher
    run_id: int
    demo: Demonstration
    calls: list[dict] = field(default_factory=list)
    """The analyst's calls since the last commit: they land with the round that used them."""
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def analyst_spec(self) -> TaskSpec:
        """The task as the analyst reads it (the description variant's words and column names)."""
        return self.task.spec.for_analyst()

    def record(self, calls: list[LLMCall], role: str) -> None:
        self.calls += [{**call.to_dict(), "role": call.role or role} for call in calls]

    def take_calls(self) -> list[dict]:
        calls, self.calls = self.calls, []
        return calls

    @contextmanager
    def timed(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start

    def say(self, message: str) -> None:
        if self.config.verbose:
            print(f"[refine] {message}", flush=True)


def refine(task: Task, analyst: Analyst, db: RunDatabase, config: RefineConfig | None = None, *,
           fitter: Fitter | None = None, episodes: EpisodeRunner | None = None,
           polisher: Polisher | None = None, resume: bool = False, on_round: Callable[[RoundRecord], None] | None = None,
           start: StartProgram | None = None) -> RefineResult:
    """Run (or resume) the refinement method on `task` and return its rounds and best round.
    `on_round` hears about every committed round (progress bars, the ROS status topic);
    `start` replaces the analyst's zero-shot program."""
    config = resolve_defaults(config or RefineConfig(), task.spec, analyst)
    spec, higher = task.spec, task.spec.metric.higher_is_better

    # 0. The run, its one demonstration, and where a killed run picks up.
    recorded = {**asdict(config), "task_description": spec.description_variant,
                "start": start.record() if start is not None else ZERO_SHOT}
    run_id = records.open_run(db, spec.name, analyst.name, recorded, resume=resume)
    run = Run(task, analyst, db, config,
              fitter or LocalFitter(task, config.il, config.fit_timeout_s, config.allow_weak_isolation,
                                    config.fit_validation_s),
              episodes or LocalEpisodes(task, config.action_mode, config.workers, config.max_steps,
                                        config.expert_labels, progress=None if config.verbose else False),
              polisher or LocalPolisher(task, config.rl_preset, progress=config.verbose),
              run_id, demonstration(db, run_id, task, config))
    state = records.resume_state(db, run_id, higher)
    result = RefineResult(run_id, list(state.rounds), state.best)
    if state.finished:
        result.stop_reason = state.stop_reason
        run.say(f"run {run_id} already finished: {state.stop_reason}")
        return result

    # 1. The zero-shot structure, a given start (or what the last committed round asked for).
    program, conversation = state.next_program, None
    if program is None and start is not None:
        program = start.source
        run.say(f"starting from the given program ({start.label})")
    elif program is None:
        answer = analyst.generate(run.analyst_spec)
        run.record(answer.calls, "generate")
        program, conversation = answer.program or "", answer.conversation
        run.say(f"{analyst.name} wrote the zero-shot program")

    for index in range(state.next_round, config.max_rounds):
        run.seconds = {}

        # 2. Fit on the demonstration; a program that fails goes back to the analyst with its error.
        with run.timed("fit"):
            fit, attempts, conversation = fit_with_regeneration(run, program, conversation)
        if fit.failed:
            record = RoundRecord(run_id, index, "failed", fit.program, fit_report={"attempts": attempts},
                                 error=fit.error, timings=dict(run.seconds))
            records.commit_round(db, record, run.take_calls())
            result.rounds.append(record)
            previous = records.last_committed(result.rounds)
            if previous is None:
                result.stop_reason = f"round {index}: no program could be fitted ({fit.error})"
                break
            run.say(f"round {index}: no program could be fitted after {len(attempts)} attempt(s); the run goes "
                    f"on from round {previous.round}'s program")
            program, conversation = previous.program, None
            continue
        program = fit.program

        # 3. Diagnostics written from the program and the table's column names only.
        schema = RolloutSchema.for_task(run.analyst_spec, fit.info_schema.keys, expert=config.expert_labels)
        with run.timed("diagnose"):
            diagnostics = analyst.diagnose(run.analyst_spec, program, schema.columns,
                                           demo=config.diagnostics_see_demo)
        run.record(diagnostics.calls, "diagnose")

        # 4. Roll out the fitted policy: the table the diagnostics read, then the metrics.
        plan = episode_plan(spec, diagnostic=config.diagnostic_episodes, selection=config.selection_episodes,
                            evaluation=config.eval_episodes)
        with run.timed("rollout"):
            rollouts = run.episodes.run(fit.bundle, plan, run_id=run_id, round=index)

        # 5. Inner loop: run the tests, read the results, more tests or an answer.
        with run.timed("analysis"):
            decision, analyses = diagnose_and_revise(run, program, diagnostics, rollouts)

        # 6. Commit everything about this round in one transaction.
        record = RoundRecord(
            run_id, index, "committed", program, fit_report={**(fit.report or {}), "attempts": attempts},
            info_schema=asdict(fit.info_schema), weights=fit.bundle.weights, diagnostics=diagnostics.code,
            analyses=analyses, decision=decision.kind,
            next_program=decision.program if decision.kind == "program" else None,
            reasoning="\n\n".join(x for x in (diagnostics.reasoning, decision.reasoning) if x),
            decision_reason=decision_reason(decision),
            error=decision.error, metrics=rollouts.metrics, timings=dict(run.seconds))
        records.commit_round(db, record, run.take_calls(), rollouts.episodes)
        result.rounds.append(record)
        result.best = choose_best_round(run, result.rounds).round
        run.say(round_summary(record, result.best))
        if on_round is not None:
            on_round(record)

        # 7. Stop, or continue with the revised program (and the exchange that wrote it).
        if decision.kind != "program":
            result.stop_reason = stop_reason(decision)
            break
        program, conversation = decision.program, decision.conversation
    else:
        result.stop_reason = f"reached max_rounds={config.max_rounds}"

    # 8. Optionally, RL on the best round's parameters (its own committed round).
    if config.rl_resets > 0 and result.best is not None:
        polished = polish_with_rl(run, result.best, result.rounds[-1].round + 1)
        result.rounds.append(polished)

    choice = choose_best_round(run, result.rounds)
    result.best, result.best_reason = choice.round, choice.reason
    db.log_event(run_id, None, "best_round", choice.reason, {"basis": choice.basis, "asked": config.best_round_by,
                                                            "round": None if choice.round is None else choice.round.round})
    run.say(f"best round: {choice.reason}")
    records.finish_run(db, run_id, result.best, result.stop_reason)
    run.say(f"stopped: {result.stop_reason}")
    return result


def choose_best_round(run: Run, rounds: list[RoundRecord]) -> records.BestChoice:
    """The best round so far by the configured basis (the operator's labels are read from the
    database, where they arrive while the run goes on)."""
    basis = run.config.best_round_by
    return records.choose_best(rounds, run.task.spec.metric.higher_is_better, basis,
                               records.round_outcomes(run.db, run.run_id, basis))


def demonstration(db: RunDatabase, run_id: int, task: Task, config: RefineConfig) -> Demonstration:
    """The run's demonstration (its chosen takes, concatenated). Only in simulation may the
    scripted expert record one."""
    try:
        demo = Demonstration.load(db, run_id, parse_takes(config.demo_takes))
    except DemonstrationError:
        if db.demonstration_takes(run_id):
            raise  # takes were recorded, the chosen ones are missing
        if config.demonstration == "recorded":
            raise DemonstrationError(
                f"run {run_id} in {db.path} has no demonstration and this profile never records the "
                "simulated expert: record one on the robot first") from None
    else:
        if config.demonstration == "recorded" and demo.simulated_expert:
            raise DemonstrationError(
                f"run {run_id} in {db.path} holds a demonstration of the {demo.source}, and this profile fits "
                "only one recorded on the robot: record one on the robot first")
        return demo
    if config.verbose:
        print(f"[refine] recording the scripted expert's demonstration (seed {task.spec.demo_seed})", flush=True)
    demo = record_demonstration(task)
    demo.save(db, run_id)
    return demo


def fit_with_regeneration(run: Run, program: str, conversation: Conversation | None
                          ) -> tuple[FitOutcome, list[dict], Conversation | None]:
    """Fit `program`; on failure ask the analyst for a repaired one, continuing the exchange
    that wrote the failed program, at most `max_attempts` fits in all."""
    attempts: list[dict] = []
    nothing_to_fit = "the analyst wrote no program"
    for attempt in range(1, run.config.max_attempts + 1):
        # a repair that brought no program is recorded as that, with the analyst's reason
        fit = run.fitter.fit(program, run.demo) if program else FitOutcome(program="", error=nothing_to_fit)
        attempts.append({"attempt": attempt, "error": fit.error})
        if not fit.failed or attempt == run.config.max_attempts:
            return fit, attempts, conversation
        run.say(f"fit attempt {attempt}/{run.config.max_attempts} failed: {fit.error}")
        answer = run.analyst.generate(run.analyst_spec, failed_program=program, error=fit.error, context=conversation)
        run.record(answer.calls, "regenerate")
        if not answer.ok:
            attempts[-1]["regenerate_error"] = answer.error
        nothing_to_fit = f"the analyst wrote no program: {answer.error}" if answer.error else "the analyst wrote no program"
        program, conversation = answer.program or "", answer.conversation or conversation
    raise AssertionError("unreachable: the last attempt returns")


def diagnose_and_revise(run: Run, program: str, diagnostics: DiagnosticsAnswer, rollouts: Rollouts
                        ) -> tuple[Decision, list[dict]]:
    """Run the diagnostics over the rollout table, then let the analyst read the results as a
    follow-up of its own diagnostic exchange; 'more tests' runs and asks again (capped)."""
    config, spec = run.config, run.analyst_spec
    analyses: list[dict] = []
    if diagnostics.ok:
        results = sandboxed(run, 0, diagnostics.code, rollouts, analyses)
    else:
        results = f"[no diagnostics] the analyst gave no usable diagnostic code: {diagnostics.error}"
    if rollouts.errors:
        results += "\n[episodes that failed]\n" + "\n".join(rollouts.errors)
    conversation = diagnostics.conversation or None
    for request in range(config.max_test_requests + 1):
        decision = run.analyst.revise(spec, program, results, conversation=conversation,
                                      demo=config.diagnostics_see_demo)
        run.record(decision.calls, "revise")
        if decision.error or decision.kind != "tests" or request == config.max_test_requests:
            break
        run.say(f"the analyst asked for more tests ({request + 1}/{config.max_test_requests})")
        results = sandboxed(run, request + 1, decision.tests, rollouts, analyses)
        conversation = decision.conversation
    if decision.kind == "tests" and not decision.error:
        decision = Decision("stop", reasoning=f"the cap of {config.max_test_requests} 'more tests' answers "
                            "was reached without a revision", calls=[], conversation=decision.conversation)
    return decision, analyses


def sandboxed(run: Run, iteration: int, code: str, rollouts: Rollouts, analyses: list[dict]) -> str:
    """Run analysis code over the rollout table (`df`) in the sandbox, and over the
    demonstration (`demo`) only when the run's `diagnostics_see_demo` says so (the published
    method gives it the rollout only), both under the analyst's column names; record it and
    return what the analyst reads."""
    demo = analyst_table(run.task.spec, run.demo.table) if run.config.diagnostics_see_demo else None
    result = run_diagnostics(code, analyst_table(run.task.spec, rollouts.diagnostic), demo,
                             timeout_s=run.config.sandbox_timeout_s,
                             allow_weak_isolation=run.config.allow_weak_isolation)
    analyses.append({"iteration": iteration, "code": code, "stdout": result.stdout,
                     "stderr_tail": result.stderr_tail, "status": result.status,
                     "isolation": result.isolation, "duration_s": result.duration_s})
    return results_text(result)


def analyst_table(spec: TaskSpec, table):
    """A stored table (canonical column names) as the analyst's code reads it."""
    renames = analyst_renames(spec)
    if table is None or not renames:
        return table
    return table.rename(columns=renames)


def results_text(result: SandboxResult) -> str:
    """The printed results, or the failure and its stderr tail."""
    if result.status == "ok":
        return result.stdout or "(the diagnostics printed nothing)"
    return f"[diagnostics {result.status}] {result.message}\n{result.stdout}\n--- stderr (tail) ---\n{result.stderr_tail}"


def polish_with_rl(run: Run, best: RoundRecord, index: int) -> RoundRecord:
    """RL on the best round's fitted parameters (structure unchanged), evaluated like a round
    and committed as one (decision 'rl'), so choosing between it and the IL fit uses the same
    selection rule."""
    from refine_core.learn.rl import RLReport
    from refine_core.policy.bundle import PolicyBundle

    spec, config = run.task.spec, run.config
    run.seconds = {}
    bundle = PolicyBundle(best.program, run.db.round_weights(run.run_id, best.round))
    with run.timed("rl"):  # every update's record lands as it is made (a killed RL keeps them)
        settings = {"reset_budget": config.rl_resets, **({"max_steps": config.max_steps} if config.max_steps else {}),
                    **config.rl}
        outcome = run.polisher.polish(bundle, settings, run_id=run.run_id,
                                      round=index, on_update=lambda record: run.db.log_rl_update(run.run_id, index,
                                                                                                 record))
    if outcome.bundle is None:  # RL could not run (e.g. a robot that measures no reward): a failed round, said
        record = RoundRecord(run.run_id, index, "failed", best.program,
                             fit_report={"rl": outcome.report, "from_round": best.round}, decision="rl",
                             error=f"RL on round {best.round}'s parameters: {outcome.error}", timings=dict(run.seconds))
        records.commit_round(run.db, record, run.take_calls())
        run.say(record.error)
        return record
    tuned, report = outcome.bundle, RLReport(**outcome.report)
    plan = episode_plan(spec, diagnostic=0, selection=config.selection_episodes, evaluation=config.eval_episodes)
    with run.timed("rollout"):
        rollouts = run.episodes.run(tuned, plan, run_id=run.run_id, round=index)
    record = RoundRecord(run.run_id, index, "committed", best.program,
                         fit_report={"rl": report.to_dict(), "from_round": best.round},
                         info_schema=best.info_schema, weights=tuned.weights, decision="rl",
                         reasoning=f"RL on round {best.round}'s parameters: {report.resets} resets; "
                                   f"{report.describe_checkpoint()}",
                         metrics=rollouts.metrics, timings=dict(run.seconds))
    records.commit_round(run.db, record, run.take_calls(), rollouts.episodes)
    run.say(round_summary(record, None))
    return record


def stop_reason(decision: Decision) -> str:
    if decision.error:
        return f"the analyst gave no usable answer: {decision.error}"
    return decision_reason(decision) or f"the analyst decided {decision.kind}"


def decision_reason(decision: Decision) -> str:
    """The analyst's reason for its decision in one line (the summary's 'why')."""
    if decision.error:
        return f"no usable answer: {decision.error}"
    return decision.headline or one_line_reason(decision.reasoning)


def one_line_reason(text: str, limit: int = 240) -> str:
    """The first sentence of an answer's prose after its DECISION line (or of the prose)."""
    import re

    lines = [line.strip(" \t*#>_-`") for line in (text or "").strip().splitlines()]
    lines = [line for line in lines if line]
    if lines and re.match(r"(?i)decision\b", lines[0]):
        head = re.sub(r"(?i)^decision[\s*_`]*[:=\-]\s*[\w-]+(\s+tests)?\s*[—:,.-]*\s*", "", lines[0]).strip()
        lines = ([head] if head else []) + lines[1:]
    prose = " ".join(lines)
    match = re.match(r"(.+?[.!?])(\s|$)", prose)
    sentence = (match.group(1) if match else prose).strip()
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def round_summary(record: RoundRecord, best: RoundRecord | None) -> str:
    ev = record.metrics.get("eval", {})
    text = (f"round {record.round}: selection metric {record.selection_metric:.4g}, eval "
            f"{ev.get('metric_mean', float('nan')):.4g} ± {ev.get('metric_std', float('nan')):.3g}, "
            f"decision {record.decision}")
    return text + (f"; best so far: round {best.round}" if best is not None else "")
