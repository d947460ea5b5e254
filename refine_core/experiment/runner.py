"""`refine experiment`: every condition of the published table on one task, side by side.

    demonstration (the task's demonstration seed: the car's 0, the door's 500)
    programs: MLP baseline; the zero-shot and the refined structure of a committed LLM run
              (--from-run), and/or of the offline catalogue (bundled starter, refined now or
              taken from a run directory), each row labelled with who wrote it
    train jobs: IL on the demonstration, then RL at the low / high reset budget under each RL
                preset: ours (the product default: trust region, the checkpoint accepted in
                the deployed mode) and published (METHOD.md: final weights; with
                --best-checkpoint also the best weights on the selection seeds from the same
                training, their extra resets counted)
    eval jobs:  each trained policy x each unseen evaluation seed, mean action and sampled (the
                task's verified mode is the primary column: the car's mean, the door's sample)
    outputs:    results/<task>/<date>/{table.md, episodes.csv, pvalues.md, rl_updates.csv, *.png,
                summary.json}
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from refine_core.experiment import outputs
from refine_core.experiment.conditions import Condition, Program, conditions
from refine_core.experiment.jobs import eval_job, pack_demo, train_job
from refine_core.experiment.pool import JobPool
from refine_core.learn.rl import PRESETS, RLConfig
from refine_core.tasks.base import Task
from refine_core.tasks.spec import DESCRIPTION_VARIANTS

BEST_SELECT_EVERY = 5
"""Updates between selection evaluations when best-checkpoint rows are asked for."""
SMOKE_RL = ("window",)
"""RL settings a smoke run shrinks in every preset (the window must fit its 40-step episodes)."""


class ExperimentSetupError(ValueError):
    """The experiment cannot start as asked (a run to take programs from is missing or unfit,
    an RL setting is refused); said in one line before any job runs."""


@dataclass
class ExperimentOptions:
    """What `refine experiment` runs; its flags are these fields (`refine_core.flags`)."""

    task: str
    """Task name (see `refine tasks`)."""
    seeds: int = 10
    """Evaluation seeds per condition."""
    workers: int | None = None
    """Local processes for the jobs; None: the CPU count."""
    ray: str | None = None
    """Run jobs as Ray tasks at this address ('local' starts one)."""
    low_resets: int = 400
    """The low RL reset budget."""
    high_resets: int = 2000
    """The high RL reset budget."""
    refined_run: Path | None = None
    """A run directory (run.db) whose zero-shot and best programs are the non-LLM-run rows (default: refine
    now with `analyst`)."""
    from_run: Path | None = None
    """A committed LLM run (a folder with summary.json, e.g. results/llm/<task>/<run>): its zero-shot program
    and its best refined program get rows of their own."""
    offline_rows: bool = True
    """With `from_run`: also the offline catalogue's rows (bundled starter and its refinement)."""
    analyst: str = "offline"
    """Analyst of the refinement run started here when no `refined_run` is given."""
    description: str | None = field(default=None, metadata={"choices": DESCRIPTION_VARIANTS})
    """Task description for a refinement run started here (None: the task's default)."""
    max_rounds: int = 6
    """Most rounds of a refinement run started here."""
    rl_presets: tuple[str, ...] = field(default=("ours", "published"), metadata={"choices": tuple(PRESETS)})
    """RL presets with rows of their own: "ours" (the product default, `learn.rl`) and
    "published" (METHOD.md exactly; only these rows stand beside the published figures)."""
    best_checkpoint: bool = False
    """Beside every published-preset RL row (final weights, the published rule), a row with the best
    weights on the selection seeds from the same training; its selection resets are counted as extra."""
    out: Path = Path("results")
    """Results root: the results go to <out>/<task>/<date>/."""
    smoke: bool = False
    """Every condition with tiny budgets (CI): proves the pipeline, measures nothing."""
    date: str | None = None
    """Results sub-folder name (None: today)."""
    group_size: int = 20
    """RL trajectories per update (capped by the budget)."""
    mlp_rl_lr: float | None = None
    """Adam step for the MLP's RL rows under our preset; None: the preset's step, like every other
    program. The results table names it."""
    rl: dict = field(default_factory=dict)
    """RLConfig fields changed in our preset's RL rows (e.g. {"std_scale": 0.25}); the published
    rows keep METHOD.md's settings. The results table names every departure of every row."""
    max_steps: int | None = None
    """Cap on episode length (smoke runs)."""
    il: dict = field(default_factory=dict)
    """ILConfig fields set for every fit; the results table names them."""
    reuse: Path | None = None
    """An earlier results folder of this task: a final-weights RL row there with the same program source
    and RL settings is taken instead of trained again, when the program's IL row here reproduces that
    folder's seed for seed (both modes). The table names every reused row."""

    @classmethod
    def from_args(cls, args) -> ExperimentOptions:
        from refine_core.flags import check_settings, given
        from refine_core.learn.il import ILConfig

        values = given(args, cls)
        values["rl"] = check_settings(RLConfig, values.get("rl", {}), "--rl-set")
        values["il"] = check_settings(ILConfig, values.get("il", {}), "--il-set")
        opts = cls(**values)
        return opts.smoke_profile() if opts.smoke else opts

    def smoke_profile(self) -> ExperimentOptions:
        """Every condition, tiny budgets: proves the pipeline in minutes, measures nothing.
        The RL window shrinks to fit the 40-step episodes so the surrogate has terms, and
        best-checkpoint selection (when asked for) runs on two selection seeds every update."""
        self.seeds, self.low_resets, self.high_resets = min(self.seeds, 2), 2, 4
        self.group_size, self.max_steps, self.max_rounds = 2, 40, min(self.max_rounds, 2)
        self.il = {"max_epochs": 30, **self.il}
        self.rl = {"window": 10, "select_every": 1, "selection_episodes": 2, **self.rl}
        self.date = self.date or "smoke"
        return self

    @property
    def scale(self) -> float:
        """Budget relative to the published 400 / 2,000 resets (1.0 = full)."""
        return self.high_resets / 2000


@dataclass
class Refinement:
    """A refinement run whose programs have rows: where it is, and how its rounds went."""

    key: str
    """The refined program's key (refined, llm_refined)."""
    location: str
    summary: dict
    round_metrics: list[dict]


def run_experiment(opts: ExperimentOptions) -> Path:
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    started = time.perf_counter()
    task = get_task(opts.task, opts.description)
    spec = task.spec
    out = opts.out / spec.name / (opts.date or dt.date.today().isoformat())
    out.mkdir(parents=True, exist_ok=True)

    # 1. One demonstration and the programs.
    demo = record_demonstration(task)
    demo_npz = pack_demo(demo.inputs, demo.actions)
    programs, refinements = experiment_programs(opts, task, out)
    by_key = {p.key: p for p in programs}

    # 2. Train every program once per budget (IL, then RL from the IL weights), in parallel:
    #    the IL rows first, so that rows of an earlier folder (--reuse) can be checked against them.
    conds = conditions(programs, opts.low_resets, opts.high_resets, best=opts.best_checkpoint,
                       presets=tuple(opts.rl_presets))
    order = [p.key for p in programs]
    plans = sorted({(c.program, c.rl_resets, c.preset) for c in conds},
                   key=lambda k: (order.index(k[0]), k[1], k[2]))
    configs = {plan: rl_config(by_key[plan[0]], plan[1], opts, plan[2], task.spec.rl_settings) for plan in plans}
    #    Steps 2 and 3 share one pool of workers (or one Ray instance): each worker's imports once.
    with JobPool(workers=opts.workers or os.cpu_count() or 1, ray_address=opts.ray) as pool:
        seeds = evaluation_seeds(task, opts.seeds)
        il_plans = [plan for plan in plans if plan[1] == 0]
        done = dict(zip(il_plans, train_plans(spec.name, il_plans, configs, by_key, demo_npz, opts, pool), strict=True))
        il_rows = evaluate([done[plan]["bundle"] for plan in il_plans], seeds, spec, opts, pool)
        il_episodes = {plan[0]: pd.DataFrame(rows) for plan, rows in zip(il_plans, il_rows, strict=True)}
        episodes_of = {plan: rows for plan, rows in zip(il_plans, il_rows, strict=True)}
        rl_plans = [plan for plan in plans if plan[1] > 0]
        if opts.reuse is not None:
            from refine_core.experiment import reuse

            earlier = reuse.load(opts.reuse)
            for plan in rl_plans:
                if opts.best_checkpoint and plan[2] == "published":
                    continue  # its best-checkpoint twin needs the weights the earlier folder did not keep
                name = reuse.find(earlier, plan[0], by_key[plan[0]].source, il_episodes[plan[0]], configs[plan])
                if name is not None:
                    done[plan] = reuse.reused_job(earlier, name, done[(plan[0], 0, "")]["il"])
                    episodes_of[plan] = reuse.reused_episodes(earlier, name)
                    print(f"reused: {plan[0]} RL {plan[1]:,} [{plan[2]}] <- {opts.reuse}/{name}", flush=True)
        todo = [plan for plan in rl_plans if plan not in done]
        done.update(zip(todo, train_plans(spec.name, todo, configs, by_key, demo_npz, opts, pool), strict=True))
        trained = [condition_weights(c, done[(c.program, c.rl_resets, c.preset)]) for c in conds]

        # 3. Evaluate each trained policy on the unseen evaluation seeds (the IL rows already are).
        fresh = [(c, t) for c, t in zip(conds, trained, strict=True)
                 if (c.program, c.rl_resets, c.preset) not in episodes_of or c.checkpoint == "best"]
        for (cond, _t), rows in zip(fresh, evaluate([t["bundle"] for _c, t in fresh], seeds, spec, opts, pool),
                                    strict=True):
            episodes_of[cond.name] = rows

    # 4. Tables, statistics, plots; everything also lands in experiment.db.
    rows = []
    for cond in conds:
        found = episodes_of.get(cond.name)
        if found is None:
            found = episodes_of[(cond.program, cond.rl_resets, cond.preset)]
        rows += [{"condition": cond.name, "label": cond.label, **r} for r in found]
    episodes = pd.DataFrame(rows)
    summary = outputs.summarise(conds, episodes, trained, by_key, spec)
    store(out / "experiment.db", opts, conds, episodes, trained, refinements)
    outputs.write_all(out, spec, conds, episodes, trained, programs, refinements, summary, opts,
                      wall_time_s=time.perf_counter() - started)
    return out


def train_plans(task_name: str, plans: list[tuple], configs: dict, by_key: dict[str, Program], demo_npz: bytes,
                opts: ExperimentOptions, pool: JobPool) -> list[dict]:
    """One training job per (program, budget, preset): IL, then RL with its settings."""
    jobs = [(task_name, by_key[key].source, demo_npz, opts.il, configs[(key, resets, preset)])
            for key, resets, preset in plans]
    return pool.map(train_job, jobs, desc="train") if jobs else []


def evaluate(bundles: list[bytes], seeds: list[int], spec, opts: ExperimentOptions, pool: JobPool) -> list[list[dict]]:
    """Each policy on every evaluation seed; per policy its rows in seed order."""
    jobs = [(spec.name, bundle, s, opts.max_steps) for bundle in bundles for s in seeds]
    results = pool.map(eval_job, jobs, desc="evaluate") if jobs else []
    return [results[i * len(seeds):(i + 1) * len(seeds)] for i in range(len(bundles))]


def condition_weights(cond: Condition, job: dict) -> dict:
    """A condition's share of its training job: the final weights, or the best ones."""
    if cond.checkpoint == "best":
        if "best_bundle" not in job:
            raise RuntimeError(f"{cond.name}: the training kept no best checkpoint (no selection evaluation ran)")
        return {"bundle": job["best_bundle"], "il": job["il"], "rl": job["rl_best"]}
    return {k: v for k, v in job.items() if k not in ("best_bundle", "rl_best")}


def evaluation_seeds(task: Task, n: int) -> list[int]:
    """The first `n` evaluation seeds (the plan's rule: never another group's seeds)."""
    from refine_core.rollout.plan import seeds_for

    return seeds_for(task.spec, "eval", n)


def rl_config(program: Program, resets: int, opts: ExperimentOptions, preset: str = "ours",
              task_settings: dict | None = None) -> dict | None:
    """RL settings of one training, every field spelled out. "ours": the product default with
    the task's own settings (`TaskSpec.rl_settings`), then `opts.rl` (and `mlp_rl_lr`) on top,
    the accepted checkpoint. "published": METHOD.md's
    settings and rule (final weights, no selection resets), with selection evaluations added
    when best-checkpoint rows are asked for (they never change the final weights, see
    `learn.rl`); a smoke run's shrunken window applies to both."""
    from dataclasses import asdict

    if resets == 0:
        return None
    if preset == "ours":
        if opts.rl.get("checkpoint", "accepted") == "best":
            raise ExperimentSetupError("our rows keep the accepted checkpoint; ask for best-checkpoint rows beside the "
                                       "published ones with --best-checkpoint instead of --rl-set checkpoint=best")
        changes = dict(opts.rl)
        if program.role == "mlp" and opts.mlp_rl_lr is not None:
            changes["lr"] = opts.mlp_rl_lr
    elif preset == "published":
        changes = {k: v for k, v in opts.rl.items() if k in SMOKE_RL} if opts.smoke else {}
        changes["select_every"] = BEST_SELECT_EVERY if opts.best_checkpoint else 0
        if opts.smoke and opts.best_checkpoint:
            changes.update({k: opts.rl[k] for k in ("select_every", "selection_episodes") if k in opts.rl})
    else:
        raise ExperimentSetupError(f"unknown RL preset {preset!r} (presets: {', '.join(PRESETS)})")
    changes.update(reset_budget=resets, group_size=min(opts.group_size, resets))
    if opts.max_steps:
        changes["max_steps"] = opts.max_steps
    try:
        cfg = asdict(RLConfig.preset(preset, task_settings, **changes))  # refuse a bad setting before any job starts
    except ValueError as exc:
        raise ExperimentSetupError(f"RL settings: {exc}") from None
    return cfg


def experiment_programs(opts: ExperimentOptions, task: Task, out: Path) -> tuple[list[Program], list[Refinement]]:
    """The MLP, the committed LLM run's zero-shot and refined programs (--from-run), and the
    offline catalogue's (or a given run directory's) zero-shot and refined programs."""
    from refine_core.policy.mlp import mlp_program
    from refine_core.summary import load_summary

    programs = [Program("mlp", "mlp", "MLP", mlp_program(task.spec))]
    refinements: list[Refinement] = []
    if opts.from_run is not None:
        try:
            summary = load_summary(opts.from_run)
        except ValueError as exc:
            raise ExperimentSetupError(str(exc)) from None
        if summary.get("task") != task.spec.name:
            raise ExperimentSetupError(f"{opts.from_run} is a {summary.get('task')} run, not {task.spec.name}")
        if not summary["analyst"].get("language_model"):
            raise ExperimentSetupError(f"{opts.from_run} was not analysed by a language model; give a run "
                                       "directory of the offline analyst with --refined-run")
        tag = f"LLM run {task.spec.name}/{Path(opts.from_run).name}"
        model = ", ".join(summary["analyst"].get("models") or []) or "model not recorded"
        programs += run_programs(summary, "llm", tag, f"LLM {model}")
        refinements.append(Refinement("llm_refined", str(opts.from_run), summary, round_metrics(summary)))
    if opts.from_run is None or opts.offline_rows:
        summary, location = offline_refinement(opts, task, out)
        offline = summary["analyst"].get("name") == "offline"
        who = "offline catalogue (not an LLM)" if offline else \
            f"LLM {', '.join(summary['analyst'].get('models') or []) or summary['analyst'].get('name')}"
        tag = "offline catalogue" if offline else f"run {location}"
        programs += run_programs(summary, "", tag, who)
        refinements.append(Refinement("refined", location, summary, round_metrics(summary)))
    return programs, refinements


def run_programs(summary: dict, prefix: str, tag: str, who: str) -> list[Program]:
    """A run's zero-shot program (its first fitted round: the analyst's zero-shot, or the
    given start program) and its refined one (its best round), with what each cost: the
    zero-shot the calls that wrote it; the refined one the whole run (every call, every
    diagnostic and selection episode)."""
    if summary.get("first_round") is None or summary.get("best_round") is None:
        raise ExperimentSetupError(f"the {tag} run has no fitted round to take programs from")
    rounds = {r["round"]: r for r in summary["rounds"]}
    first, best = rounds[summary["first_round"]], rounds[summary["best_round"]]
    start = summary.get("start") or {}
    given = start.get("kind") == "program"
    zero_calls = 0 if given else sum(r.get("calls_by_role", {}).get(role, 0) for r in summary["rounds"]
                                     if r["round"] <= first["round"] for role in ("generate", "regenerate"))
    if not given and not summary["analyst"].get("language_model"):
        zero_calls = 1  # the offline analyst's one answer
    total = summary["totals"]
    calls = total["calls"]
    if not summary["analyst"].get("language_model"):  # a rule-based analyst: count its answers instead
        calls = 1 + sum(2 + r["tests_requested"] for r in summary["rounds"]
                        if r["status"] == "committed" and r["decision"] != "rl")
    keys = (f"{prefix}_zero_shot", f"{prefix}_refined") if prefix else ("starter", "refined")
    zero_label = f"start program ({start.get('label')}) [{tag}]" if given else f"zero-shot structure [{tag}]"
    return [
        # a given start program stands for no published row
        Program(keys[0], "start" if given else "zero_shot", zero_label, summary["programs"][first["program_sha256"]],
                analyst="given program" if given else who, calls=zero_calls, resets={}),
        Program(keys[1], "refined", f"refined structure [{tag}]", summary["programs"][best["program_sha256"]],
                analyst=who, calls=int(calls),
                resets={k: int(total["resets"].get(k, 0)) for k in ("diagnostic", "selection")}),
    ]


def round_metrics(summary: dict) -> list[dict]:
    """Per round of a run: status and scores, for the refinement plot and experiment.db."""
    return [{"round": r["round"], "status": r["status"], "decision": r["decision"],
             "program_sha256": r["program_sha256"], "selection_metric_mean": r["selection_metric"],
             "eval_metric_mean": r["eval"]["metric_mean"], "eval_metric_std": r["eval"]["metric_std"],
             "eval_success_rate": r["eval"]["success_rate"]} for r in summary["rounds"]]


def offline_refinement(opts: ExperimentOptions, task: Task, out: Path) -> tuple[dict, str]:
    """The summary of the run the offline-catalogue rows come from: a given run directory, or
    a refinement run started here with `opts.analyst` (the offline analyst by default)."""
    from refine_core.store.db import RunDatabase
    from refine_core.summary import build_summary

    if opts.refined_run is not None:
        db_file = Path(opts.refined_run) / "run.db"
        if not db_file.exists():
            raise FileNotFoundError(f"no run database at {db_file}")
    else:
        from refine_core.analyst.config import load_config
        from refine_core.analyst.factory import make_analyst
        from refine_core.loop import RefineConfig, refine

        run_dir = out / "refinement"
        run_dir.mkdir(parents=True, exist_ok=True)
        db_file = run_dir / "run.db"
        if db_file.exists():
            db_file.unlink()  # a fresh refinement each time, so re-runs reproduce it exactly
            for suffix in ("-wal", "-shm"):
                Path(str(db_file) + suffix).unlink(missing_ok=True)
        analyst = make_analyst(opts.analyst, config=load_config())
        cfg = RefineConfig(max_rounds=opts.max_rounds, eval_episodes=opts.seeds, max_steps=opts.max_steps,
                           il=opts.il, verbose=False)
        refine(task, analyst, RunDatabase(db_file), cfg)
    db = RunDatabase(db_file)
    try:
        return build_summary(db), str(db_file.parent)
    finally:
        db.close()


def store(path: Path, opts: ExperimentOptions, conds: list[Condition], episodes: pd.DataFrame,
          trained: list[dict], refinements: list[Refinement]) -> None:
    """Results of every job in one SQLite file (local or Ray jobs alike)."""
    from refine_core.store.experiment import write_experiment

    rows = [{"name": c.name, "label": c.label, "program": c.program, "rl_resets": c.rl_resets,
             "checkpoint": c.checkpoint, "il": json.dumps(t["il"]), "rl": json.dumps(t["rl"])}
            for c, t in zip(conds, trained, strict=True)]
    rounds = [{"refinement": r.key, **m} for r in refinements for m in r.round_metrics]
    write_experiment(path, asdict(opts), "; ".join(r.location for r in refinements), rows, episodes,
                     outputs.rl_updates_frame(conds, trained), rounds)
