"""`refine eval`: roll out fitted rounds on the task's unseen evaluation configurations."""

from __future__ import annotations

import argparse
import math

from refine_core.cli import UserError
from refine_core.commands._common import add_run_dir


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("eval", help="evaluate fitted rounds on unseen configurations",
                       description="Roll out a fitted round on the task's evaluation seeds "
                       "(`refine tasks` lists them: the car's 1000, 1001, ..., the door's 0, 1, ...), store the "
                       "episodes and steps, and print return and metric mean ± std and the success rate.")
    add_run_dir(p)
    p.add_argument("--round", default="last", metavar="N|best|last|all",
                   help="which round(s) to evaluate (default: last)")
    p.add_argument("--episodes", type=int, default=10, help="number of evaluation seeds")
    p.add_argument("--mode", choices=("mean", "sample"), default=None,
                   help="execute the action mean or sample from the Gaussian (default: the mode the task's "
                        "published results were verified in: the car's mean, the door's sample)")
    p.add_argument("--rng-seed", type=int, default=None,
                   help="action-noise seed for --mode sample (default: each episode's own seed, as verified)")
    p.add_argument("--workers", type=int, default=1, help="parallel rollout processes")
    p.add_argument("--max-steps", type=int, default=None, help="cut episodes short (testing)")
    return p


def _rounds(db, run_id: int, which: str, higher_is_better: bool) -> list[int]:
    committed = [r["round"] for r in db.rounds(run_id, status="committed")]
    if not committed:
        raise UserError("the run has no fitted round; fit a program first (refine fit)")
    if which == "all":
        return committed
    if which == "last":
        return [committed[-1]]
    if which == "best":
        from refine_core.store.records import best_committed_round

        best = best_committed_round(db, run_id, higher_is_better)
        if best is None:
            raise UserError("no round has a selection metric yet (rounds made by `refine fit` alone); "
                            "give a round number")
        return [best]
    try:
        number = int(which)
    except ValueError:
        raise UserError(f"--round must be a number, best, last or all; got {which!r}") from None
    if number not in committed:
        raise UserError(f"round {number} is not a committed round; committed: {committed}")
    return [number]


def run(args) -> int:
    from refine_core.commands.fit import open_run
    from refine_core.policy.bundle import PolicyBundle
    from refine_core.policy.errors import ContractError
    from refine_core.rollout.metrics import summarise
    from refine_core.rollout.plan import seeds_for
    from refine_core.rollout.runner import run_episodes

    if args.episodes < 1:
        raise UserError("--episodes must be at least 1")
    if args.workers < 1:
        raise UserError("--workers must be at least 1")
    db, run_row, task = open_run(args.run)
    args.mode = args.mode or task.spec.eval_mode
    with db:
        spec = task.spec
        run_id = run_row["id"]
        seeds = seeds_for(spec, "eval", args.episodes)
        for number in _rounds(db, run_id, str(args.round), spec.metric.higher_is_better):
            row = db.round(run_id, number)
            bundle = PolicyBundle(row["program"], row["weights"])
            try:
                results = run_episodes(
                    task, bundle, seeds, workers=args.workers, mode=args.mode,
                    rng_seed=args.rng_seed, ids={"run_id": run_id, "round": number, "kind": "eval"},
                    max_steps=args.max_steps, desc=f"eval round {number}",
                )
            except ContractError as exc:
                raise UserError(f"round {number}'s program no longer loads: "
                                f"{str(exc).splitlines()[0]}") from None
            stats = summarise(r.summary for r in results)
            stats.update(mode=args.mode, rng_seed=args.rng_seed, max_steps=args.max_steps)
            metrics = dict(row["metrics"] or {})
            metrics["eval"] = stats
            with db.transaction():
                for episode, result in enumerate(results):
                    db.save_episode(
                        run_id, number, "eval", episode,
                        seed=result.summary["seed"], summary=result.summary, table=result.table,
                        complete=result.error is None, error=result.error,
                    )
                db.log_event(run_id, number, "eval", f"evaluated on {len(seeds)} seeds", stats)
                db.update_round(run_id, number, metrics=metrics,
                                eval_metric=stats["metric_mean"]
                                if math.isfinite(stats["metric_mean"]) else None)
            line = (f"round {number}: return {stats['return_mean']:.1f} ± {stats['return_std']:.1f}")
            if spec.metric.name != "return":
                line += f", {spec.metric.name} {stats['metric_mean']:.4g} ± {stats['metric_std']:.4g}"
            line += (f", success {100 * stats['success_rate']:.0f}% over {stats['episodes']} "
                     f"episodes (seeds {seeds[0]}-{seeds[-1]}, {args.mode} actions)")
            print(line)
            if stats["errors"]:
                print(f"  {stats['errors']} episode(s) ended early with a policy error; "
                      f"first: {next(r.error for r in results if r.error)}")
    return 0
