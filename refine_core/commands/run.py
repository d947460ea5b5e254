"""`refine run`: the whole refinement loop for one task."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.analyst.config import add_config_arguments
from refine_core.cli import UserError
from refine_core.commands._common import db_path, task_or_error
from refine_core.tasks.spec import DESCRIPTION_VARIANTS

DEFAULTS = {"rounds": 6, "eval_episodes": 10, "max_test_requests": 5}


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run the refinement loop (generate, fit, diagnose, revise)")
    p.add_argument("--task", help="task name (see `refine tasks`); taken from the run when resuming, or from "
                                  "the transcript when replaying")
    p.add_argument("--description", choices=DESCRIPTION_VARIANTS, default=None,
                   help="what the analyst is told about the task: 'published' (the default: the information the "
                        "published prompts gave) or 'detailed' (richer, true facts about our environments)")
    p.add_argument("--analyst", choices=("offline", "openai", "record", "replay"),
                   help="who writes programs and diagnostics (default: openai if an endpoint is "
                        "configured, otherwise the offline rule-based analyst)")
    p.add_argument("--start", type=Path, default=None, metavar="FILE",
                   help="begin from this program instead of asking the analyst for a zero-shot one (a "
                        "controller of your own, or a structure written elsewhere); recorded as the run's start")
    p.add_argument("--rounds", type=int, default=None, help="maximum refinement rounds (default 6)")
    p.add_argument("--run", type=Path, default=None, metavar="DIR", help="run directory (default runs/<task>)")
    p.add_argument("--resume", action="store_true", help="continue the run in DIR from its last committed round")
    p.add_argument("--transcript", type=Path,
                   help="JSONL transcript: --analyst openai (or record) writes every exchange and the run's "
                        "settings to it, --analyst replay answers from it")
    p.add_argument("--replay-mode", choices=("exact", "sequential"), default="exact",
                   help="replay: 'exact' answers only identical requests (reproduces a run bit for bit); "
                        "'sequential' answers each role's requests in recorded order and records every request "
                        "that differs (e.g. under --max-steps)")
    add_config_arguments(p)
    p.add_argument("--diagnostic-episodes", type=int, default=None,
                   help="episodes per round whose table the diagnostics read (default 1, as published)")
    p.add_argument("--selection-episodes", type=int, default=None,
                   help="episodes per round that choose the best round, counted apart (default 3; 0 chooses on "
                        "the diagnostic episodes)")
    p.add_argument("--eval-episodes", type=int, default=None, help="evaluation episodes per round (default 10)")
    p.add_argument("--max-test-requests", type=int, default=None,
                   help="'more tests' answers the analyst may give per round (default 5)")
    p.add_argument("--expert-labels", action="store_true", default=None,
                   help="relabel rollout states with the scripted expert (expert_* columns): privileged "
                        "information the published method does not use; off by default")
    p.add_argument("--rl-resets", type=int, default=None,
                   help="after refinement, RL on the best round with this many environment resets (default 0)")
    p.add_argument("--max-steps", type=int, default=None, help="cap episode length (smoke runs)")
    p.add_argument("--workers", type=int, default=1, help="local processes for rollouts")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run generated code even without OS namespaces (recorded as weak isolation)")
    p.add_argument("--quiet", action="store_true")
    return p


def run(args) -> int:
    import dataclasses

    from refine_core.analyst.config import ConfigError, config_from_args
    from refine_core.analyst.factory import default_analyst_name, make_analyst
    from refine_core.analyst.labels import describe_analyst, expert_label
    from refine_core.analyst.transcript import TranscriptError, read_settings, start_transcript
    from refine_core.loop import RefineConfig, refine
    from refine_core.run_setup import (
        RECORDED_ANALYST_FIELDS,
        StartProgramError,
        recorded_start,
        recording_settings,
        replayed,
        start_from_file,
    )
    from refine_core.store.db import RunDatabase
    from refine_core.store.records import RunExistsError
    from refine_core.summary import write_summary

    if args.resume and args.run is None:
        raise UserError("--resume needs --run DIR")
    try:
        config = config_from_args(args)
    except (ConfigError, ValueError) as exc:
        raise UserError(str(exc)) from None
    name = args.analyst or default_analyst_name(config)
    if name in ("record", "replay") and args.transcript is None:
        raise UserError(f"--analyst {name} needs --transcript FILE")
    if args.transcript is not None and name == "offline":
        raise UserError("--transcript records or replays a language model's answers; the offline analyst has none")
    settings = read_settings(args.transcript) if name == "replay" else None

    # The task and its description: given, or the resumed run's, or the replayed run's.
    task_name, description, recorded_config = args.task, args.description, {}
    if args.resume:
        latest = RunDatabase(db_path(args.run)).latest_run()
        if latest is None:
            raise UserError(f"{args.run} holds no run to resume")
        task_name = task_name or latest["task"]
        recorded_config = latest.get("config") if isinstance(latest.get("config"), dict) else {}
        was = recorded_config.get("task_description")
        if description is not None and was is not None and description != was:
            raise UserError(f"run {latest['id']} in {args.run} was described as {was!r}; it cannot resume as "
                            f"{description!r}")
        description = description or was
    task_name = task_name or (settings or {}).get("task")
    if not task_name:
        raise UserError("--task is required (see `refine tasks`)")
    description = description or (settings or {}).get("task_description")
    task = task_or_error(task_name, description)
    run_dir = args.run or Path("runs") / task.spec.name
    run_dir.mkdir(parents=True, exist_ok=True)
    db = RunDatabase(db_path(run_dir, must_exist=False))

    try:
        start = start_from_file(args.start) if args.start is not None else recorded_start(settings)
    except StartProgramError as exc:
        raise UserError(str(exc)) from None
    loop_config = RefineConfig(
        max_rounds=replayed(args.rounds, settings, "max_rounds", DEFAULTS["rounds"]),
        max_attempts=replayed(None, settings, "max_attempts", RefineConfig.max_attempts),
        diagnostic_episodes=replayed(args.diagnostic_episodes, settings, "diagnostic_episodes",
                                     RefineConfig.diagnostic_episodes),
        selection_episodes=replayed(args.selection_episodes, settings, "selection_episodes",
                                    RefineConfig.selection_episodes),
        eval_episodes=replayed(args.eval_episodes, settings, "eval_episodes", DEFAULTS["eval_episodes"]),
        max_test_requests=replayed(args.max_test_requests, settings, "max_test_requests",
                                   DEFAULTS["max_test_requests"]),
        expert_labels=bool(replayed(args.expert_labels, settings, "expert_labels", False)),
        max_steps=replayed(args.max_steps, settings, "max_steps", None),
        action_mode=replayed(None, settings, "action_mode", RefineConfig.action_mode),
        rl_resets=replayed(args.rl_resets, settings, "rl_resets", 0), workers=args.workers, verbose=not args.quiet,
        allow_weak_isolation=args.allow_weak_sandbox)
    if settings:  # the recorded requests were shaped by these
        config = dataclasses.replace(config, **{k: settings[k] for k in RECORDED_ANALYST_FIELDS
                                                if settings.get(k) is not None})
    try:
        analyst = make_analyst(name, config=config, transcript=args.transcript, task=task.spec.name,
                               max_test_requests=loop_config.max_test_requests, replay_mode=args.replay_mode)
        if args.transcript is not None and name in ("openai", "record"):
            start_transcript(args.transcript, recording_settings(task.spec.name, task.spec.description_variant,
                                                                 loop_config, config, start, config.model),
                             resume=args.resume)
    except (ConfigError, TranscriptError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"[refine] {describe_analyst(analyst)}")
    print(f"[refine] task description: {task.spec.description_variant}")
    print(f"[refine] {expert_label(loop_config.expert_labels)}")

    result = None
    try:
        result = refine(task, analyst, db, loop_config, resume=args.resume, start=start)
    except (RunExistsError, TranscriptError) as exc:
        raise UserError(str(exc)) from None
    finally:
        _close_run(db, analyst, run_dir, quiet=args.quiet, write_summary=write_summary)
    best = result.best
    if best is None:
        print(f"no round completed ({result.stop_reason})")
        return 1
    ev = best.metrics.get("eval", {})
    print(f"best round {best.round}: {task.spec.metric.name} {ev.get('metric_mean', float('nan')):.4g}"
          f" ± {ev.get('metric_std', float('nan')):.3g} on {ev.get('episodes', 0)} unseen seeds"
          f" (success {ev.get('success_rate', float('nan')):.0%}); stopped: {result.stop_reason}")
    print(f"run database: {db.path}   summary: {run_dir / 'summary.md'}   report: refine report --run {run_dir}")
    return 0


def _close_run(db, analyst, run_dir: Path, *, quiet: bool, write_summary) -> None:
    """Whatever happened: record how a replay went, and write the run's summary files."""
    run = db.latest_run()
    if run is None:
        return
    report = getattr(analyst, "replay_report", None)
    if report is not None:
        data = report()
        message = (f"{data['mode']} replay of {data['transcript']}: {len(data['divergences'])} of "
                   f"{data['requests']} requests differed from the recording")
        db.log_event(run["id"], None, "replay", message, data=data)
        print(f"[refine] {message}")
    if db.rounds(run["id"]):
        json_path, _ = write_summary(db, run_dir, run["id"])
        if not quiet:
            print(f"[refine] summary: {json_path} and summary.md")
