"""`refine run`: the whole refinement loop for one task."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.analyst.config import add_config_arguments
from refine_core.cli import UserError
from refine_core.commands._common import db_path, task_or_error


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run the refinement loop (generate, fit, diagnose, revise)")
    p.add_argument("--task", help="task name (see `refine tasks`); taken from the run when resuming")
    p.add_argument("--analyst", choices=("offline", "openai", "record", "replay"),
                   help="who writes programs and diagnostics (default: openai if an endpoint is "
                        "configured, otherwise the offline rule-based analyst)")
    p.add_argument("--rounds", type=int, default=6, help="maximum refinement rounds (default 6)")
    p.add_argument("--run", type=Path, default=None, metavar="DIR", help="run directory (default runs/<task>)")
    p.add_argument("--resume", action="store_true", help="continue the run in DIR from its last committed round")
    p.add_argument("--transcript", type=Path, help="JSONL transcript for --analyst record/replay")
    add_config_arguments(p)
    p.add_argument("--eval-episodes", type=int, default=10, help="evaluation episodes per round")
    p.add_argument("--max-test-requests", type=int, default=5,
                   help="'more tests' answers the analyst may give per round (default 5)")
    p.add_argument("--expert-labels", action="store_true",
                   help="relabel rollout states with the scripted expert (expert_* columns): privileged "
                        "information the published method does not use; off by default")
    p.add_argument("--rl-resets", type=int, default=0,
                   help="after refinement, RL on the best round with this many environment resets")
    p.add_argument("--max-steps", type=int, default=None, help="cap episode length (smoke runs)")
    p.add_argument("--workers", type=int, default=1, help="local processes for rollouts")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run generated code even without OS namespaces (recorded as weak isolation)")
    p.add_argument("--quiet", action="store_true")
    return p


def run(args) -> int:
    from refine_core.analyst.config import ConfigError, config_from_args
    from refine_core.analyst.factory import default_analyst_name, make_analyst
    from refine_core.analyst.labels import analyst_label, expert_label
    from refine_core.analyst.transcript import TranscriptError
    from refine_core.loop import RefineConfig, refine
    from refine_core.store.db import RunDatabase
    from refine_core.store.records import RunExistsError

    if args.resume and args.run is None:
        raise UserError("--resume needs --run DIR")
    task_name = args.task
    if args.resume:
        db = RunDatabase(db_path(args.run))
        latest = db.latest_run()
        if latest is None:
            raise UserError(f"{args.run} holds no run to resume")
        task_name = task_name or latest["task"]
    if not task_name:
        raise UserError("--task is required (see `refine tasks`)")
    task = task_or_error(task_name)
    run_dir = args.run or Path("runs") / task.spec.name
    run_dir.mkdir(parents=True, exist_ok=True)
    db = RunDatabase(db_path(run_dir, must_exist=False))

    try:
        config = config_from_args(args)
        name = args.analyst or default_analyst_name(config)
        if name in ("record", "replay") and args.transcript is None:
            raise UserError(f"--analyst {name} needs --transcript FILE")
        analyst = make_analyst(name, config=config, transcript=args.transcript, task=task.spec.name,
                               max_test_requests=args.max_test_requests)
    except (ConfigError, TranscriptError, ValueError) as exc:
        raise UserError(str(exc)) from None
    print(f"[refine] {analyst_label(analyst.name) or f'analyst: {analyst.name} (a language model)'}")
    print(f"[refine] {expert_label(args.expert_labels)}")

    loop_config = RefineConfig(max_rounds=args.rounds, eval_episodes=args.eval_episodes,
                               max_test_requests=args.max_test_requests, expert_labels=args.expert_labels,
                               rl_resets=args.rl_resets, max_steps=args.max_steps, workers=args.workers,
                               verbose=not args.quiet, allow_weak_isolation=args.allow_weak_sandbox)
    try:
        result = refine(task, analyst, db, loop_config, resume=args.resume)
    except (RunExistsError, TranscriptError) as exc:
        raise UserError(str(exc)) from None
    best = result.best
    if best is None:
        print(f"no round completed ({result.stop_reason})")
        return 1
    ev = best.metrics.get("eval", {})
    print(f"best round {best.round}: {task.spec.metric.name} {ev.get('metric_mean', float('nan')):.4g}"
          f" ± {ev.get('metric_std', float('nan')):.3g} on {ev.get('episodes', 0)} unseen seeds"
          f" (success {ev.get('success_rate', float('nan')):.0%}); stopped: {result.stop_reason}")
    print(f"run database: {db.path}   report: refine report --run {run_dir}")
    return 0


