"""`refine tasks`: what each bundled task asks of a program (inputs, actions, metric, seeds)."""

from __future__ import annotations

import argparse
import json

from refine_core.commands._common import task_or_error
from refine_core.tasks.spec import DESCRIPTION_VARIANTS


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("tasks", help="list the benchmark tasks with their inputs, actions and metric",
                       description="List the benchmark tasks: forward inputs, actions with bounds, "
                       "metric, episode length and seed groups.")
    p.add_argument("name", nargs="?", help="show only this task, with its full description")
    p.add_argument("--json", action="store_true", help="print the task facts as JSON")
    p.add_argument("--description", choices=DESCRIPTION_VARIANTS, default=None,
                   help="with NAME: print this description variant (default: the task's default, published)")
    return p


def _facts(spec) -> dict:
    return {
        "name": spec.name,
        "env_id": spec.env_id,
        "policy_class": spec.policy_class,
        "inputs": {i.name: list(i.shape) for i in spec.inputs},
        "actions": {a.name: [a.low, a.high] for a in spec.actions},
        "metric": spec.metric.name,
        "higher_is_better": spec.metric.higher_is_better,
        "episode_steps": spec.episode_steps,
        "demo_seed": spec.demo_seed,
        "eval_seeds": list(spec.eval_seeds),
        "description": spec.description_variant,
    }


def run(args) -> int:
    from refine_core.tasks.registry import get_task, task_names

    names = [args.name] if args.name else list(task_names())
    specs = [task_or_error(n, args.description if args.name else None).spec for n in names]
    if args.json:
        print(json.dumps([_facts(s) for s in specs], indent=1))
        return 0
    for spec in specs:
        inputs = ", ".join(f"{i.name} {tuple(i.shape)}" for i in spec.inputs)
        actions = ", ".join(f"{a.name} [{a.low:g}, {a.high:g}]" for a in spec.actions)
        better = "higher" if spec.metric.higher_is_better else "lower"
        print(f"{spec.name}  ({spec.env_id}, class {spec.policy_class})")
        print(f"  inputs:  {inputs}")
        print(f"  actions: {actions}")
        print(f"  metric:  {spec.metric.name} ({better} is better)")
        print(f"  episodes of {spec.episode_steps} steps; demo seed {spec.demo_seed}; "
              f"eval seeds {spec.eval_seeds[0]}-{spec.eval_seeds[-1]}")
        offered = type(get_task(spec.name)).description_variants or (spec.description_variant,)
        print(f"  descriptions: {', '.join(offered)} (default {offered[0]})")
        if args.name:
            print(f"\n[{spec.description_variant} description, as the analyst reads it]")
            print(spec.for_analyst().describe())
    return 0
