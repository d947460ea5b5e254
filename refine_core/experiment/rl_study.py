"""`python -m refine_core.experiment.rl_study`: one RL run, fully instrumented, for questions
about RL itself (docs/RL.md is written from these runs).

It does what an experiment's train and eval jobs do for one condition (record the
demonstration, fit the program by IL, run RL from the IL weights), prints every update's
record as it comes, and evaluates the IL weights, the final RL weights and the best
checkpoint on the evaluation seeds, mean action and sampled. Options beyond the published
method are spelled out on the command line, so a result can always be traced to them.

    python -m refine_core.experiment.rl_study --program docs/rl_runs/refined_program.py \
        --resets 400 --out /tmp/refined_400.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path

import numpy as np


def _program(name: str, spec) -> str:
    from refine_core.policy.mlp import mlp_program
    from refine_core.policy.programs import starter_program

    if name == "mlp":
        return mlp_program(spec)
    if name == "starter":
        return starter_program(spec.name)
    return Path(name).read_text()


def evaluate(task, policy, seeds, max_steps=None) -> dict:
    """Mean-action and sampled return on `seeds`, the way `eval_job` runs them."""
    from refine_core.rollout.runner import run_episode

    out = {}
    for mode in ("mean", "sample"):
        values = [run_episode(task, policy, s, mode=mode, rng_seed=s, label_expert=False,
                              max_steps=max_steps).summary["metric"] for s in seeds]
        out[mode] = {"mean": float(np.mean(values)), "std": float(np.std(values)), "per_seed": values}
    return out


def probe(task, policy, state: dict, perturbations: list[str], noise_shift: float) -> None:
    """Mean action and sampled return of the IL weights moved by fixed offsets: what RL's
    objective (the sampled return) and the table's (the mean action) say about one direction."""
    from refine_core.rollout.runner import run_episode

    seeds = [*task.spec.selection_seeds, 5000, 5001, 5002]
    for text in ["", *perturbations]:
        moved = copy.deepcopy(state)
        for item in filter(None, text.split(",")):
            name, _, delta = item.partition("=")
            moved[name] = moved[name] + float(delta)
        for name in moved:
            if name.endswith("log_std"):
                moved[name] = moved[name] + noise_shift
        policy.load_state_dict(moved)
        runs = {"mean": [run_episode(task, policy, s, mode="mean", label_expert=False) for s in seeds],
                "sample": [run_episode(task, policy, s, mode="sample", rng_seed=r, label_expert=False)
                           for s in seeds for r in (0, 1)]}
        mean = [r.summary["return"] for r in runs["mean"]]
        sampled = [r.summary["return"] for r in runs["sample"]]
        print(f"{text or 'IL weights':40s} mean action {np.mean(mean):7.1f} {np.round(mean, 0).tolist()}  "
              f"sampled {np.mean(sampled):7.1f} ± {np.std(sampled) / np.sqrt(len(sampled)):.1f} (s.e.)", flush=True)
        if not text:
            for mode, results in runs.items():
                print(f"    executed actions, {mode}: {action_summary(task, results)}", flush=True)


def action_summary(task, results) -> str:
    """Per action: mean executed value and share of steps above its lower bound; and the
    mean of an observation column named `speed` when the task has one."""
    import pandas as pd

    table = pd.concat([r.table for r in results])
    parts = [f"{a.name} {table[f'act_{a.name}'].mean():.3f} (>{a.low:g} on {(table[f'act_{a.name}'] > a.low).mean():.0%})"
             for a in task.spec.actions]
    if "speed" in table:
        parts.append(f"speed {table['speed'].mean():.3f}")
    return ", ".join(parts)


def compare(runs: list[Path], figure: Path, param: str) -> None:
    """Selection-seed mean action and one parameter against updates, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from refine_core.learn.rl import config_from_dict

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    for path in runs:
        rl = json.loads(path.read_text())["rl"]
        label = ", ".join(config_from_dict(rl["config"]).departures()) or "published method"
        sel = rl["selection"]
        axes[0].plot([s["update"] for s in sel], [s["metric"] for s in sel], "o-", label=label)
        curve = [c for c in rl["curve"] if param in c["params"]]
        if curve:
            axes[1].plot([c["update"] for c in curve], [c["params"][param]["value"][0] for c in curve], ".-",
                         label=label)
    axes[0].set_title("mean action on the selection seeds (return)")
    axes[1].set_title(f"{param} after each update")
    for ax in axes:
        ax.set_xlabel("update (20 resets each)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(figure, dpi=100, bbox_inches="tight")
    plt.close(fig)
    print(f"figure: {figure}")


def _param_lr(items: list[str]) -> dict[str, float]:
    out = {}
    for item in items:
        fragment, _, value = item.partition("=")
        out[fragment] = float(value)
    return out


def main(argv: list[str] | None = None) -> int:
    import torch

    from refine_core.learn.il import ILConfig, fit_il
    from refine_core.learn.rl import RLConfig, train_rl
    from refine_core.policy.contract import build_policy
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="car_racing")
    p.add_argument("--program", help="'mlp', 'starter' or a program file")
    p.add_argument("--compare", nargs="+", type=Path, default=None, metavar="RUN.json",
                   help="instead of running: plot the selection curves of earlier --out files into --figure")
    p.add_argument("--figure", type=Path, default=None)
    p.add_argument("--param", default="v_straight", help="with --compare: the parameter drawn beside")
    p.add_argument("--resets", type=int, default=400)
    p.add_argument("--lr", type=float, default=None, help="Adam step (default: METHOD.md's)")
    p.add_argument("--select-every", type=int, default=None)
    p.add_argument("--window-direction", default="forward", choices=("forward", "backward"))
    p.add_argument("--std-scale", type=float, default=1.0, help="action noise factor during RL")
    p.add_argument("--window-mean", action="store_true", help="geometric-mean window ratio (GSPO)")
    p.add_argument("--max-grad-norm", type=float, default=None)
    p.add_argument("--param-lr", nargs="*", default=[], metavar="FRAGMENT=LR")
    p.add_argument("--eval-seeds", type=int, default=10, help="evaluation seeds at the end (0: none)")
    p.add_argument("--perturb", action="append", default=[], metavar="NAME=DELTA[,NAME=DELTA]",
                   help="instead of RL: evaluate the IL weights with these parameter offsets (repeatable; "
                        "mean action and sampled on the selection seeds and seeds 5000-5002)")
    p.add_argument("--noise-shift", type=float, default=0.0,
                   help="with --perturb: add this to every log-std element first (the sampled policy's noise)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="write the full record as JSON here")
    args = p.parse_args(argv)
    if args.compare:
        compare(args.compare, args.figure or Path("rl_compare.png"), args.param)
        return 0
    if not args.program:
        p.error("--program is required unless --compare is given")

    torch.set_num_threads(1)
    task = get_task(args.task)
    source = _program(args.program, task.spec)
    demo = record_demonstration(task)
    policy = build_policy(source, task.spec)
    fit_il(policy, demo.inputs, demo.actions, ILConfig(progress=False), spec=task.spec)
    il_state = copy.deepcopy(policy.state_dict())
    with torch.no_grad():
        batch = {k: torch.tensor(v[:1]) for k, v in demo.inputs.items()}
        _mean, tril, _info = policy(*[batch[s.name] for s in task.spec.inputs])
    noise = torch.linalg.vector_norm(tril[0], dim=-1).tolist()
    print("# IL noise std per action: " + ", ".join(f"{a} {v:.3f}" for a, v in zip(task.spec.action_names, noise,
                                                                                       strict=True)), flush=True)
    if args.perturb:
        probe(task, policy, il_state, args.perturb, args.noise_shift)
        return 0

    overrides = {"reset_budget": args.resets, "window_direction": args.window_direction,
                 "max_grad_norm": args.max_grad_norm, "window_mean": args.window_mean,
                 "std_scale": args.std_scale, "param_lr": _param_lr(args.param_lr), "seed": args.seed}
    if args.lr is not None:
        overrides["lr"] = args.lr
    if args.select_every is not None:
        overrides["select_every"] = args.select_every
    config = RLConfig(**overrides)
    print(f"# {args.program}: {config.departures() or 'published method'}", flush=True)

    last: dict = {}

    def show(r: dict) -> None:
        last["state"] = copy.deepcopy(policy.state_dict())  # the final weights, even if "best" wins
        sel = "" if math.isnan(r["selection_metric"]) else f" sel {r['selection_metric']:7.1f}"
        moved = sorted(((v["delta_max"], n) for n, v in r["params"].items()), reverse=True)[:3]
        print(f"u{r['update']:3d} ret {r['return_mean']:7.1f}±{r['return_std']:5.1f}{sel} "
              f"H {r['entropy']:6.3f} kl {r['approx_kl']:.4f} clip {r['clip_frac']:.2f} "
              f"ratio[{r['ratio_q05']:.2f},{r['ratio_q50']:.2f},{r['ratio_q95']:.2f}] "
              f"moved " + ", ".join(f"{n} {d:.3f}" for d, n in moved), flush=True)

    started = time.perf_counter()
    report = train_rl(task, policy, config, progress=False, on_update=show)
    result = {"argv": sys.argv[1:] if argv is None else argv, "rl": report.to_dict(),
              "rl_seconds": time.perf_counter() - started}
    if args.eval_seeds:
        seeds = list(task.spec.eval_seeds)[: args.eval_seeds]
        states = {"eval_il": il_state, "eval_final": last.get("state", il_state)}
        if report.checkpoint_update != report.updates:
            states["eval_best"] = copy.deepcopy(policy.state_dict())
        print(f"checkpoint: {report.describe_checkpoint()}")
        for key, state in states.items():
            policy.load_state_dict(state)
            e = result[key] = evaluate(task, policy, seeds)
            print(f"{key}: mean action {e['mean']['mean']:.1f} ± {e['mean']['std']:.1f}, "
                  f"sampled {e['sample']['mean']:.1f} ± {e['sample']['std']:.1f}", flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
