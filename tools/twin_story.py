"""The robot story on a twin, measured: one teleoperated take, refinement by an analyst (a
language model through `refine serve-inbox`, or a recorded transcript replayed), every episode
live on the twin, then the zero-shot and the refined program evaluated live, with the twin's
ground truth beside every figure and the wall clock of every stage.

    python tools/twin_story.py --robot arm --run runs/twin/arm/r1 --seed 1 \\
        --analyst openai --llm-base-url http://127.0.0.1:8851/v1 --max-rounds 6

Stages (all by default; `--stages` picks some, each reads what the earlier ones left in the run
directory):
1. `record`: `refine up <profile>_record_demo --twin --processes`, the teleoperator
   (tools/twin_operator.py) on the gamepad until one take is kept; `take.db` is the run
   database as it stands then (the take, nothing else): what a replay starts from.
2. `refine`: `refine up <profile> --twin --processes --analyst A` on that take, the operator
   resetting the twin, confirming and judging every live episode (`truth_refine.jsonl`: the
   twin's ground truth of each).
3. `evaluate`: the best refined program and the zero-shot one, each fitted again on the same
   take (the fit is deterministic: the weights' hash is checked against the refinement's) and
   run for `--eval-episodes` live episodes (`refine up ... --start PROGRAM --max-rounds 1`,
   evaluation episodes only, the offline analyst, whose decision is not used), in
   `eval_refined/` and `eval_zero_shot/`.
4. `summary`: `twin_summary.json` and `twin_summary.md`: the take (steps, the operator's
   corrections, the attempts), both evaluations with the ground-truth figures, rounds, calls,
   tokens, and the time to a working policy (the first take's start to the end of the refined
   program's evaluation) with its parts and the load average beside each stage.

Every node is its own process; the gamepad and the person are this process. Nothing here
writes to a run database: the recorder, the logger and the analysis node do.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from twin_operator import Operator, write_truths  # noqa: E402
from twin_person import PersonConfig  # noqa: E402

STAGES = ("record", "refine", "evaluate", "summary")
ROOT = Path(__file__).resolve().parent.parent


class Load:
    """The 1-minute load average, sampled every `every` s while a stage runs."""

    def __init__(self, every: float = 10.0) -> None:
        self.samples: list[float] = []
        self.every, self._stop = every, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.samples.append(os.getloadavg()[0])

    def figures(self) -> dict[str, float]:
        return {"load_mean": round(float(np.mean(self.samples)), 2), "load_max": round(float(np.max(self.samples)), 2)}


def _up(profile: str, run_dir: Path, log: Path, *extra: str, env: dict | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "refine_core.cli", "up", profile, "--twin", "--processes", "--run", str(run_dir),
           *extra]  # fmt: skip
    print("$ refine", " ".join(cmd[3:]), file=sys.stderr, flush=True)
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})  # fmt: skip


def _stop(proc: subprocess.Popen, timeout: float = 60.0) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            return proc.wait(timeout=30.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a WAL database (sqlite's backup, not a file copy)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        target.unlink()
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    with sqlite3.connect(target) as dst:
        dst.execute("PRAGMA journal_mode=DELETE")
        dst.execute("VACUUM")


def _save(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


# ---- stages -------------------------------------------------------------------------------------
def record(args, op: Operator, run: Path, timing: dict) -> None:
    run.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with Load() as load:
        proc = _up(f"{op.setup.profile}_record_demo", run, run / "record.log", "--set", "demo_recorder.takes=1",
                   "--set", f"demo_recorder.reset_time={args.reset_time}", "--timeout", "1800")
        try:
            attempts = op.record(keep=1, attempts=args.attempts)
            code = _stop(proc, 120.0)
        finally:
            if proc.poll() is None:
                proc.kill()
    if code != 0:
        raise RuntimeError(f"the recorder ended with {code}: see {run / 'record.log'}")
    copy_database(run / "run.db", run / "take.db")
    timing["record"] = {"start": t0, "end": time.time(), "seconds": round(time.time() - t0, 1),
                        "attempts": attempts, **load.figures()}


def refine(args, op: Operator, run: Path, timing: dict) -> None:
    env, extra = {}, ["--analyst", args.analyst, "--max-rounds", str(args.max_rounds)]
    if args.analyst in ("openai", "record"):
        env = {"OPENAI_BASE_URL": args.llm_base_url, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "inbox"),
               "REFINE_MODEL": args.llm_model, "REFINE_LLM_TIMEOUT": str(args.llm_timeout_s)}
        extra += ["--transcript", str(run / "transcript.jsonl")]
    elif args.analyst == "replay":
        extra += ["--transcript", str(args.transcript), "--replay-mode", args.replay_mode]
    if args.max_steps:
        extra += ["--max-steps", str(args.max_steps)]
    for setting in args.set:
        extra += ["--set", setting]
    t0 = time.time()
    with Load() as load:
        proc = _up(op.setup.profile, run, run / "refine.log", *extra, env=env)
        try:
            op.watch_episodes(proc, timeout_s=args.refine_timeout)
            code = _stop(proc, 120.0)
        finally:
            if proc.poll() is None:
                proc.kill()
    write_truths(run / "truth_refine.jsonl", op.truth_records())
    timing["refine"] = {"start": t0, "end": time.time(), "seconds": round(time.time() - t0, 1), "exit": code,
                        **load.figures()}
    subprocess.run([sys.executable, "-m", "refine_core.cli", "report", "--run", str(run), "--summary"],
                   stdout=(run / "report.log").open("w"), stderr=subprocess.STDOUT, check=False)
    if code != 0:
        raise RuntimeError(f"the refinement run ended with {code}: see {run / 'refine.log'}")


def _rounds(run: Path) -> tuple[list[dict], dict]:
    from refine_core.store.db import RunDatabase

    with RunDatabase(run, create=False) as db:
        rid = int(db.latest_run()["id"])
        rounds = [dict(r) for r in db.rounds(rid)]
        for r in rounds:
            r["weights_hash"] = _weights_hash(db.round_weights(rid, int(r["round"]))) if r["status"] == "committed" \
                else None
    return rounds, _load(run / "summary.json")


def _weights_hash(weights: dict | None) -> str | None:
    if not weights:
        return None
    h = hashlib.sha256()
    for name in sorted(weights):
        h.update(name.encode())
        h.update(np.ascontiguousarray(np.asarray(weights[name], dtype=np.float64)).tobytes())
    return h.hexdigest()[:16]


def chosen_programs(run: Path) -> dict[str, dict]:
    """The zero-shot program (round 0) and the refined one: the run's best round when it is a
    refined one, else the refined round the operator's labels rate best (earliest on ties)."""
    rounds, summary = _rounds(run)
    committed = [r for r in rounds if r["status"] == "committed"]
    if not committed:
        raise RuntimeError(f"{run}: no committed round to evaluate")
    truths = [json.loads(line) for line in (run / "truth_refine.jsonl").read_text().splitlines() if line.strip()]
    rate = {}
    for t in truths:
        rate.setdefault(t["round"], []).append(1.0 if t["success"] else 0.0)
    best = summary.get("best_round")
    out = {"zero_shot": {**_pick(committed, 0), "why": "round 0: the analyst's zero-shot program"}}
    refined = [r for r in committed if int(r["round"]) > 0]
    if best is not None and int(best) > 0:
        out["refined"] = {**_pick(committed, int(best)), "why": f"the run's best round ({summary.get('best_round_reason')})"}
    elif refined:
        top = max(refined, key=lambda r: (np.mean(rate.get(int(r["round"]), [0.0])), -int(r["round"])))
        out["refined"] = {**_pick(committed, int(top["round"])),
                          "why": f"the run kept round {best} as its best; of the refined rounds, round {top['round']} "
                                 "has the best live success by the operator's verdicts"}
    return out


def _pick(rounds: list[dict], number: int) -> dict:
    r = next(r for r in rounds if int(r["round"]) == number)
    return {"round": number, "program": r["program"], "weights_hash": r["weights_hash"]}


def evaluate(args, op: Operator, run: Path, timing: dict) -> None:
    chosen = chosen_programs(run)
    _save(run / "chosen.json", {k: {**v, "program": None} for k, v in chosen.items()})
    for label in ("refined", "zero_shot"):
        if label not in chosen:
            continue
        where = run / f"eval_{label}"
        if where.exists():
            shutil.rmtree(where)
        where.mkdir(parents=True)
        copy_database(run / "take.db", where / "run.db")
        program = where / "program.py"
        program.write_text(chosen[label]["program"])
        extra = ["--analyst", "offline", "--start", str(program), "--max-rounds", "1", "--diagnostic-episodes", "0",
                 "--set", "analysis_node.selection_episodes=0", "--set",
                 f"analysis_node.eval_episodes={args.eval_episodes}"]
        if args.max_steps:
            extra += ["--max-steps", str(args.max_steps)]
        t0 = time.time()
        op.truths.clear()
        with Load() as load:
            proc = _up(op.setup.profile, where, where / "eval.log", *extra)
            try:
                op.watch_episodes(proc, timeout_s=args.refine_timeout)
                code = _stop(proc, 120.0)
            finally:
                if proc.poll() is None:
                    proc.kill()
        write_truths(where / "truth.jsonl", op.truth_records())
        rounds, _ = _rounds(where)
        same = bool(rounds) and rounds[0]["weights_hash"] == chosen[label]["weights_hash"]
        timing[f"eval_{label}"] = {"start": t0, "end": time.time(), "seconds": round(time.time() - t0, 1),
                                   "exit": code, "round": chosen[label]["round"], "why": chosen[label]["why"],
                                   "same_weights_as_the_refinement": same, **load.figures()}
        if code != 0:
            raise RuntimeError(f"the evaluation of {label} ended with {code}: see {where / 'eval.log'}")


# ---- the summary --------------------------------------------------------------------------------
def corrections(actions: np.ndarray, names: tuple[str, ...], threshold: float = 0.15) -> dict[str, int]:
    """The operator's corrections in a take: per stick action, how often the command reversed
    (from beyond +threshold to beyond -threshold or back), as a person does after overshooting."""
    out = {}
    for i, name in enumerate(names):
        sign, flips = 0, 0
        for v in actions[:, i]:
            now = 1 if v > threshold else -1 if v < -threshold else 0
            if now and sign and now != sign:
                flips += 1
            sign = now or sign
        out[name] = flips
    return out


def _take(run: Path, task: str) -> dict:
    from refine_core.rollout.demo import Demonstration
    from refine_core.store.db import RunDatabase
    from refine_core.tasks.registry import get_task

    spec = get_task(task).spec
    with RunDatabase(run / "take.db", create=False) as db:
        rid = int(db.latest_run()["id"])
        demo = Demonstration.load(db, rid)
        row = db.load_demonstration(rid, 0)
    sticks = [n for n in spec.action_names if n not in ("gripper", "gas", "brake")]
    idx = [spec.action_names.index(n) for n in sticks]
    summary = row.get("summary") if isinstance(row.get("summary"), dict) else json.loads(row.get("summary") or "{}")
    return {"steps": int(demo.actions.shape[0]), "source": demo.source, "label": row.get("label"),
            "success_label": row.get("success"), "paused_steps": summary.get("paused_steps"),
            "gaps": summary.get("gaps"), "corrections": corrections(demo.actions[:, idx], tuple(sticks))}


def _evaluation(where: Path, task: str) -> dict:
    path = where / "truth.jsonl"
    if not path.exists():
        return {}
    truths = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    truths = [t for t in truths if t["kind"] == "eval"]
    keys = sorted({k for t in truths for k in t["figures"]})
    figures = {}
    for k in keys:
        values = [t["figures"][k] for t in truths if k in t["figures"]]
        figures[k] = {"mean": round(float(np.mean(values)), 4), "n": len(values)}
    return {"episodes": len(truths), "successes": sum(bool(t["success"]) for t in truths),
            "success_rate": round(sum(bool(t["success"]) for t in truths) / max(1, len(truths)), 3),
            "figures": figures, "reconfirmations": sum(int(t.get("confirmations", 0)) for t in truths)}


def summarise(args, op: Operator, run: Path, timing: dict) -> dict:
    from refine_core.store.db import RunDatabase

    task = op.setup.task
    product = _load(run / "summary.json")
    with RunDatabase(run, create=False) as db:
        rid = int(db.latest_run()["id"])
        calls = db.llm_calls(rid)
        rounds = db.rounds(rid)
    fit_s = sum(float((r.get("timings") or {}).get("fit", 0.0)) for r in rounds)
    rollout_s = sum(float((r.get("timings") or {}).get("rollout", 0.0)) for r in rounds)
    llm_s = sum(float(c.get("latency_s") or 0.0) for c in calls)
    record_t, refine_t = timing.get("record", {}), timing.get("refine", {})
    refined_t = timing.get("eval_refined", {})
    working = (refined_t.get("end", 0) - record_t.get("start", 0)) if refined_t and record_t else None
    out = {
        "robot": op.setup.robot, "profile": op.setup.profile, "task": task,
        "analyst": product.get("analyst"), "description": product.get("description"),
        "diagnostics_see_demo": product.get("diagnostics_see_demo"),
        "take": _take(run, task),
        "record_attempts": record_t.get("attempts"),
        "rounds": len(rounds), "best_round": product.get("best_round"),
        "best_round_reason": product.get("best_round_reason"), "stop_reason": product.get("stop_reason"),
        "calls": len(calls), "tokens_in": sum(int(c.get("tokens_in") or 0) for c in calls),
        "tokens_out": sum(int(c.get("tokens_out") or 0) for c in calls),
        "token_counts": (product.get("analyst") or {}).get("token_counts"),
        "zero_shot": {"round": timing.get("eval_zero_shot", {}).get("round"), **_evaluation(run / "eval_zero_shot", task)},
        "refined": {"round": refined_t.get("round"), "why": refined_t.get("why"),
                    **_evaluation(run / "eval_refined", task)},
        "time_to_working_policy_s": round(working, 1) if working else None,
        "goal_s": 1800,
        "parts_s": {"takes": record_t.get("seconds"), "refinement": refine_t.get("seconds"),
                    "fits": round(fit_s, 1), "episodes": round(rollout_s, 1), "llm_latency": round(llm_s, 1),
                    "refined_evaluation": refined_t.get("seconds")},
        "stages": {k: {kk: vv for kk, vv in v.items() if kk not in ("start", "end", "attempts")}
                   for k, v in timing.items()},
    }
    _save(run / "twin_summary.json", out)
    (run / "twin_summary.md").write_text(markdown(out))
    return out


def _rate(e: dict) -> str:
    return f"{e.get('successes', '-')}/{e.get('episodes', '-')}" if e else "-"


def _figs(e: dict, task: str) -> str:
    f = e.get("figures", {}) if e else {}
    if task == "door_open":
        keys = (("door_angle_reached", "door angle reached {:.2f} rad"), ("min_handle_target_distance",
                                                                         "min handle-target {:.3f} m"))
    else:
        keys = (("tiles_covered", "tiles {:.0%}"), ("lap_time_s", "lap {:.1f} s"))
    return ", ".join(fmt.format(f[k]["mean"]) + (f" (n={f[k]['n']})" if k == "lap_time_s" else "")
                     for k, fmt in keys if k in f) or "-"


def markdown(s: dict) -> str:
    t, task = s["take"], s["task"]
    parts = s["parts_s"]
    ttw = s["time_to_working_policy_s"]
    buf = io.StringIO()
    buf.write(f"# {s['profile']} on its twin: one take, refined by {((s.get('analyst') or {}).get('models') or ['?'])[0]}\n\n")
    buf.write(f"description **{s.get('description')}**, analysis code reads the rollout only: "
              f"{s.get('diagnostics_see_demo') is False}\n\n")
    buf.write("| take (steps, corrections) | zero-shot + IL | refined + IL | rounds | calls | tokens in / out | "
              "time to a working policy (goal 30 min) |\n|---|---|---|---|---|---|---|\n")
    corr = sum(t["corrections"].values())
    buf.write(f"| {t['steps']} steps, {corr} corrections | {_rate(s['zero_shot'])}: {_figs(s['zero_shot'], task)} | "
              f"{_rate(s['refined'])} (round {s['refined'].get('round')}): {_figs(s['refined'], task)} | "
              f"{s['rounds']} | {s['calls']} | {s['tokens_in']} / {s['tokens_out']} | "
              f"{(ttw or 0) / 60:.1f} min |\n\n")
    buf.write(f"Parts: takes {parts['takes']} s, refinement {parts['refinement']} s (fits {parts['fits']} s, live "
              f"episodes {parts['episodes']} s, LLM latency {parts['llm_latency']} s), refined evaluation "
              f"{parts['refined_evaluation']} s. Token counts: {s.get('token_counts')}.\n\n")
    buf.write("Load average (1 min) per stage: " + ", ".join(
        f"{k} {v.get('load_mean')} (max {v.get('load_max')})" for k, v in s["stages"].items()) + "\n\n")
    buf.write(f"Best round: {s.get('best_round')} ({s.get('best_round_reason')}); stop: {s.get('stop_reason')}\n")
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    from refine_ros.robots.registry import robot_names

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--robot", choices=list(robot_names()), required=True)
    p.add_argument("--run", type=Path, required=True, help="run directory (created)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, of {', '.join(STAGES)}")
    p.add_argument("--seed", type=int, default=0, help="the person's seed (their noise, pauses, reactions)")
    p.add_argument("--fumble", default="", help="attempts (0-based, comma-separated) in which the person fumbles")
    p.add_argument("--attempts", type=int, default=8, help="most attempts at a take worth keeping")
    p.add_argument("--reset-time", type=float, default=4.0, help="the recorder's reset phase, s")
    p.add_argument("--analyst", default="openai", choices=("openai", "record", "replay", "offline"))
    p.add_argument("--transcript", type=Path, help="replay: the recorded transcript")
    p.add_argument("--replay-mode", default="sequential", choices=("exact", "sequential"))
    p.add_argument("--llm-base-url", default="http://127.0.0.1:8851/v1")
    p.add_argument("--llm-model", default="claude-helper-via-serve-inbox")
    p.add_argument("--llm-timeout-s", type=float, default=86400.0)
    p.add_argument("--max-rounds", type=int, default=6)
    p.add_argument("--max-steps", type=int, default=0, help="step cap of every episode (0: the profile's length)")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--refine-timeout", type=float, default=6 * 3600.0)
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="a parameter of the refinement's `refine up` (repeatable), e.g. a replay's longer fit limit")
    args = p.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    unknown = set(stages) - set(STAGES)
    if unknown:
        p.error(f"unknown stages {sorted(unknown)}")
    args.run.mkdir(parents=True, exist_ok=True)
    timing_path = args.run / "timing.json"
    timing = _load(timing_path)
    fumbles = tuple(int(x) for x in args.fumble.split(",") if x.strip())
    op = Operator(args.robot, seed=args.seed, person=PersonConfig(), fumbles=fumbles)
    try:
        for stage, work in (("record", record), ("refine", refine), ("evaluate", evaluate), ("summary", summarise)):
            if stage in stages:
                print(f"[story] {stage}", file=sys.stderr, flush=True)
                result = work(args, op, args.run, timing)
                _save(timing_path, timing)
                if stage == "summary":
                    print(markdown(result))
    finally:
        _save(timing_path, timing)
        op.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
