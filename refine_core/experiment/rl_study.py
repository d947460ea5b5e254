"""The RL study behind `refine rl`: one RL run, fully instrumented, for questions about RL
itself (docs/RL.md is written from these runs).

It does what an experiment's train and eval jobs do for one condition (record the
demonstration, fit the program by IL, run RL from the IL weights), prints every update's
record as it comes, and evaluates the IL weights, the final RL weights and the checkpoint RL
kept (accepted or best) on the evaluation seeds, mean action and sampled. The settings are a
named preset (`--rl-preset ours|published`) changed by `RLConfig` fields spelled out on the
command line (`refine_core.commands.rl`), so a result can always be traced to them.

    refine rl --program docs/rl_runs/refined_program.py --reset-budget 400 --out /tmp/refined_400.json
"""

from __future__ import annotations

import copy
import json
import math
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

    from refine_core.rollout.schema import action_column

    table = pd.concat([r.table for r in results])
    acts = {a.name: table[action_column("act", a.name)] for a in task.spec.actions}
    parts = [f"{a.name} {acts[a.name].mean():.3f} (>{a.low:g} on {(acts[a.name] > a.low).mean():.0%})"
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


def run_study(task_name: str, program: str, config, *, eval_seeds: int = 10, perturb: list[str] | None = None,
              noise_shift: float = 0.0) -> dict:
    """Demonstration, IL, then RL with `config` (or, with `perturb`, the IL weights probed
    instead), printing as it goes; the full record (for `--out`)."""
    import torch

    from refine_core.learn.il import ILConfig, fit_il
    from refine_core.learn.rl import train_rl
    from refine_core.policy.contract import build_policy
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    torch.set_num_threads(1)
    task = get_task(task_name)
    source = _program(program, task.spec)
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
    if perturb:
        probe(task, policy, il_state, perturb, noise_shift)
        return {}
    print(f"# {program}: {config.departures() or 'published method'}", flush=True)

    last: dict = {}

    def show(r: dict) -> None:
        last["state"] = copy.deepcopy(policy.state_dict())  # the final weights, even if "best" wins
        if "start_selection_metric" in r:
            print(f"u  0 sel {r['start_selection_metric']:7.4g} (the starting weights)", flush=True)
        sel = "" if math.isnan(r["selection_metric"]) else \
            f" sel {r['selection_metric']:7.4g}{' accepted' if r.get('selection_accepted') else ''}" \
            f"{' (restart from the accepted weights)' if r.get('selection_restored') else ''}"
        moved = sorted(((v["delta_max"], n) for n, v in r["params"].items()), reverse=True)[:3]
        print(f"u{r['update']:3d} ret {r['return_mean']:7.1f}±{r['return_std']:5.1f}{sel} "
              f"H {r['entropy']:6.3f} kl {r['kl']:.5f} (approx {r['approx_kl']:.5f}, step kept {r['step_kept']:.3g}, "
              f"epochs {r['epochs_done']}) clip {r['clip_frac']:.2f} "
              f"ratio[{r['ratio_q05']:.2f},{r['ratio_q50']:.2f},{r['ratio_q95']:.2f}] "
              f"moved " + ", ".join(f"{n} {d:.3f}" for d, n in moved), flush=True)

    started = time.perf_counter()
    report = train_rl(task, policy, config, progress=False, on_update=show)
    result = {"rl": report.to_dict(), "rl_seconds": time.perf_counter() - started}
    if eval_seeds:
        seeds = list(task.spec.eval_seeds)[:eval_seeds]
        states = {"eval_il": il_state, "eval_final": last.get("state", il_state)}
        if report.checkpoint_update != report.updates:  # the accepted (or best) weights the policy holds
            states[f"eval_{report.checkpoint}"] = copy.deepcopy(policy.state_dict())
        print(f"checkpoint: {report.describe_checkpoint()}")
        for key, state in states.items():
            policy.load_state_dict(state)
            e = result[key] = evaluate(task, policy, seeds)
            print(f"{key}: mean action {e['mean']['mean']:.1f} ± {e['mean']['std']:.1f}, "
                  f"sampled {e['sample']['mean']:.1f} ± {e['sample']['std']:.1f}", flush=True)
    return result
