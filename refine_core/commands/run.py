"""`refine run`: the whole refinement loop for one task."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.analyst.config import add_config_arguments
from refine_core.cli import UserError
from refine_core.commands._common import db_path, task_or_error
from refine_core.tasks.spec import DESCRIPTION_VARIANTS

LOOP_ALIASES = {"max_rounds": ("--rounds",), "allow_weak_isolation": ("--allow-weak-sandbox",)}
"""The flags' spellings before they were generated from `RefineConfig` (deprecated, still accepted)."""


HELP = 'run the refinement loop (generate, fit, diagnose, revise)'
"""The one line `refine --help` shows (without building this verb's flags)."""


def add_parser(sub) -> argparse.ArgumentParser:
    from refine_core.flags import add_flags
    from refine_core.learn.il import ILConfig
    from refine_core.learn.rl import RLConfig
    from refine_core.loop import RefineConfig

    p = sub.add_parser("run", help=HELP)
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
    p.add_argument("--run", type=Path, default=None, metavar="DIR", help="run directory (default runs/<task>)")
    p.add_argument("--resume", action="store_true", help="continue the run in DIR from its last committed round")
    p.add_argument("--transcript", type=Path,
                   help="JSONL transcript: --analyst openai (or record) writes every exchange and the run's "
                        "settings to it, --analyst replay answers from it")
    p.add_argument("--replay-mode", choices=("exact", "sequential"), default="exact",
                   help="replay: 'exact' answers only identical requests (reproduces a run bit for bit); "
                        "'sequential' answers each role's requests in recorded order and records every request "
                        "that differs (e.g. under --max-steps)")
    p.add_argument("--quiet", action="store_true")
    add_config_arguments(p)
    loop = p.add_argument_group("the loop (refine_core.loop.RefineConfig; a replay takes what is not given from "
                                "the transcript)")
    add_flags(loop, RefineConfig, exclude=("verbose",), aliases=LOOP_ALIASES, settings={"il": ILConfig, "rl": RLConfig})
    return p


def run(args) -> int:
    import dataclasses

    from refine_core.analyst.config import ConfigError, config_from_args
    from refine_core.analyst.factory import default_analyst_name, make_analyst
    from refine_core.analyst.labels import demo_access_label, describe_analyst, expert_label
    from refine_core.analyst.transcript import TranscriptError, start_transcript
    from refine_core.loop import refine, resolve_defaults
    from refine_core.run_setup import (
        RECORDED_ANALYST_FIELDS,
        StartProgramError,
        recorded_settings,
        recorded_start,
        recording_settings,
        start_from_file,
        upgrade_recorded,
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
    settings = recorded_settings(args.transcript) if name == "replay" else None

    # The task and its description: given, or the resumed run's, or the replayed run's.
    task_name, description, recorded_config = args.task, args.description, {}
    if args.resume:
        latest = RunDatabase(db_path(args.run)).latest_run()
        if latest is None:
            raise UserError(f"{args.run} holds no run to resume")
        task_name = task_name or latest["task"]
        recorded_config = upgrade_recorded(latest.get("config") if isinstance(latest.get("config"), dict) else {})
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
    try:  # a resumed run keeps the tables and action mode it had unless told otherwise
        loop_config = loop_config_from(args, settings or {k: recorded_config.get(k) for k in
                                                          ("action_mode", "diagnostics_see_demo")})
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if settings:  # the recorded requests were shaped by these
        config = dataclasses.replace(config, **{k: settings[k] for k in RECORDED_ANALYST_FIELDS
                                                if settings.get(k) is not None})
    try:
        analyst = make_analyst(name, config=config, transcript=args.transcript,
                               max_test_requests=loop_config.max_test_requests, replay_mode=args.replay_mode)
        loop_config = resolve_defaults(loop_config, task.spec, analyst)
        if args.transcript is not None and name in ("openai", "record"):
            start_transcript(args.transcript, recording_settings(task.spec.name, task.spec.description_variant,
                                                                 loop_config, config, start, config.model),
                             resume=args.resume)
    except (ConfigError, TranscriptError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"[refine] {describe_analyst(analyst)}")
    print(f"[refine] task description: {task.spec.description_variant}")
    print(f"[refine] {demo_access_label(loop_config.diagnostics_see_demo)}")
    modes = {"mean": "the action mean", "sample": "sampled actions"}
    print(f"[refine] every episode executes {modes[loop_config.action_mode]} (the task's published results were "
          f"verified with {modes[task.spec.eval_mode]})")
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


def loop_config_from(args, settings: dict | None):
    """The loop's settings: the flags given, then (replaying) the recorded run's, then
    `RefineConfig`'s defaults; `--quiet` turns the progress lines off."""
    from refine_core.flags import check_settings, given
    from refine_core.learn.il import ILConfig
    from refine_core.learn.rl import RLConfig
    from refine_core.loop import RefineConfig
    from refine_core.run_setup import loop_settings

    values = given(args, RefineConfig)
    for name, cls in (("il", ILConfig), ("rl", RLConfig)):
        if name in values:
            values[name] = check_settings(cls, values[name], f"--{name}-set")
    return RefineConfig(**loop_settings(values, settings), verbose=not args.quiet)
