"""A refinement run in one page: what it was given, what each round did, what it cost.

Why a file of its own: a run's database is large and local, but what a reader (and `refine
experiment --from-run`) needs to know about a run is small: the task and the description
variant the analyst read, whether its analysis code read the demonstration, which
demonstration the fits used, how the episodes executed the actions and on which evaluation
seeds, who answered (which model, or the offline catalogue), where the run
started (a zero-shot program or a given one), each round's program, fit, scores and decision
with the analyst's one-line reason, and the calls, tokens and environment resets it took.
`summary.json` holds that, every round's program text included, so a committed summary
alone is enough to rebuild the published comparison from the run; `summary.md` is the same
for people. Both are rebuilt from the database at any time (`refine report --summary`).

Resets are counted by what they were for: diagnostic episodes (the table the analyst's code
reads; the published method's resets), selection episodes (choosing the best round; not in
the published method), evaluation episodes (reported only) and RL.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from refine_core.analyst.inbox import FINGERPRINT as INBOX_FINGERPRINT
from refine_core.analyst.labels import analyst_label, demo_access_setting
from refine_core.store.db import RunDatabase
from refine_core.store.records import choose_best, round_from_row, round_outcomes

SUMMARY_VERSION = 2
"""2: `diagnostics_see_demo`, `demonstration` and `evaluation` (what every results table must
name). A version-1 summary has none of them: its run's analysis code read the demonstration."""
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
RESET_KINDS = ("diagnostic", "selection", "eval")


def program_hash(source: str) -> str:
    """The first 12 hex digits of the sha256 of a program's text (how summaries name it)."""
    return hashlib.sha256((source or "").encode("utf-8")).hexdigest()[:12]


def program_title(source: str) -> str:
    """A program's own one-line name for itself: the first line of its module or policy-class
    docstring ("" when it has none or does not parse)."""
    try:
        tree = ast.parse(source or "")
    except (SyntaxError, ValueError):
        return ""
    nodes = [tree, *(n for n in tree.body if isinstance(n, ast.ClassDef))]
    for node in nodes:
        doc = ast.get_docstring(node)
        if doc and doc.strip():
            return doc.strip().splitlines()[0][:120]
    return ""


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _round_entry(db: RunDatabase, run_id: int, row: dict, calls: list[dict]) -> dict:
    metrics = row.get("metrics") or {}
    ev = metrics.get("eval") or {}
    fit = row.get("fit_report") or {}
    attempts = fit.get("attempts") or []
    analyses = db.analyses(run_id, row["round"])
    episodes = db.episodes(run_id, row["round"])
    resets = {kind: int((episodes["kind"] == kind).sum()) for kind in RESET_KINDS}
    rl = fit.get("rl") or {}
    if rl:
        resets["rl"] = int(rl.get("resets", 0)) + int(rl.get("selection_resets", 0))
    mine = [c for c in calls if c.get("round") == row["round"]]
    program = row.get("program") or ""
    return {
        "round": int(row["round"]),
        "status": row["status"],
        "program_sha256": program_hash(program),
        "program_title": program_title(program),
        "fit": {"ok": row["status"] == "committed", "attempts": len(attempts) or (1 if row["status"] == "committed"
                                                                                 else 0),
                "error": row.get("error") if row["status"] != "committed" else None,
                "rl_from_round": fit.get("from_round") if rl else None},
        "selection_metric": _finite(row.get("selection_metric")),
        "eval": {"metric_mean": _finite(ev.get("metric_mean")), "metric_std": _finite(ev.get("metric_std")),
                 "success_rate": _finite(ev.get("success_rate")), "episodes": int(ev.get("episodes") or 0)},
        "decision": row.get("decision") if row["status"] == "committed" else "failed",
        "reason": row.get("decision_reason") or "",
        "tests_requested": max(0, len(analyses) - 1),
        "diagnostics_status": [a.get("status") for a in analyses],
        "calls": len(mine),
        "calls_by_role": {role: sum(1 for c in mine if c.get("role") == role)
                          for role in sorted({str(c.get("role")) for c in mine})},
        "tokens_in": sum(int(c.get("tokens_in") or 0) for c in mine),
        "tokens_out": sum(int(c.get("tokens_out") or 0) for c in mine),
        "resets": resets,
    }


def _demonstration(db: RunDatabase, run_id: int) -> dict | None:
    """Who drove the run's demonstration and on which seed (-1: a physical scene)."""
    takes = db.demonstration_takes(run_id)
    row = db.load_demonstration(run_id, takes[0]) if takes else None
    if row is None:
        return None
    return {"source": row.get("source"), "seed": int(row["seed"]) if row.get("seed") is not None else None,
            "takes": len(takes)}


def _evaluation(spec, config: dict, rows: list[dict]) -> dict:
    """How the run's evaluation episodes executed the actions and on which seeds, next to the
    mode the task's published results were verified in."""
    seeds = next(((r.get("metrics") or {}).get("eval", {}).get("seeds") for r in rows
                  if (r.get("metrics") or {}).get("eval", {}).get("seeds")), None)
    return {"action_mode": config.get("action_mode"), "seeds": seeds, "verified_mode": spec.eval_mode,
            "verified_seeds": list(spec.eval_seeds)}


def build_summary(db: RunDatabase, run_id: int | None = None) -> dict:
    """The summary of run `run_id` (default: the database's latest run)."""
    from refine_core.run_setup import upgrade_recorded
    from refine_core.tasks.registry import get_task

    run = db.run(run_id) if run_id is not None else db.latest_run()
    if run is None:
        raise ValueError(f"{db.path} holds no run")
    rid = int(run["id"])
    config = upgrade_recorded(run.get("config") if isinstance(run.get("config"), dict) else {})
    rows = db.rounds(rid)
    calls = db.llm_calls(rid)
    spec = get_task(run["task"]).spec
    higher = spec.metric.higher_is_better
    records = [round_from_row(r) for r in rows]
    basis = config.get("best_round_by") or "metric"
    choice = choose_best(records, higher, basis, round_outcomes(db, rid, basis))
    best = choice.round
    committed = [r for r in records if r.status == "committed" and r.decision != "rl"]
    rounds = [_round_entry(db, rid, row, calls) for row in rows]
    totals_resets = {kind: sum(r["resets"].get(kind, 0) for r in rounds) for kind in (*RESET_KINDS, "rl")}
    models = sorted({str(c["model"]) for c in calls if c.get("model")})
    endpoints = sorted({str(c["endpoint"]) for c in calls if c.get("endpoint")})
    replay = next((e.get("data") for e in reversed(db.events(rid, kind="replay"))), None)
    analyst = run.get("analyst") or ""
    llm = bool(calls) or analyst in ("openai", "record", "replay")
    return {
        "summary_version": SUMMARY_VERSION,
        "run_id": rid,
        "task": run["task"],
        "description": config.get("task_description") or "unrecorded",
        "diagnostics_see_demo": demo_access_setting(config),
        "demonstration": _demonstration(db, rid),
        "evaluation": _evaluation(spec, config, rows),
        "analyst": {
            "name": analyst,
            "language_model": llm,
            "models": models,
            "label": analyst_label(analyst) or ("a language model" if llm else ""),
            "token_counts": ("estimated by refine serve-inbox (4 characters a token)"
                             if INBOX_FINGERPRINT in endpoints else "as reported by the endpoint") if calls else "",
            "endpoints": endpoints,
        },
        "start": config.get("start") or {"kind": "zero-shot"},
        "settings": {k: config.get(k) for k in ("max_rounds", "max_attempts", "max_test_requests",
                                               "diagnostic_episodes", "selection_episodes", "eval_episodes",
                                               "action_mode", "max_steps", "expert_labels", "rl_resets",
                                               "diagnostics_see_demo")},
        "rounds": rounds,
        "programs": {program_hash(r.program): r.program for r in records if r.program},
        "first_round": committed[0].round if committed else None,
        "best_round": best.round if best is not None else None,
        "best_round_reason": choice.reason,
        "revisions": [{"round": r["round"], "reason": r["reason"]} for r in rounds if r["decision"] == "program"],
        "totals": {
            "rounds": len(rounds),
            "calls": len(calls),
            "tokens_in": sum(int(c.get("tokens_in") or 0) for c in calls),
            "tokens_out": sum(int(c.get("tokens_out") or 0) for c in calls),
            "resets": totals_resets,
        },
        "status": run.get("status"),
        "stop_reason": run.get("stop_reason") or "",
        "replay": replay,
    }


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def demo_access(summary: dict) -> bool | None:
    """Whether a run's analysis code read the demonstration (a version-1 summary's did)."""
    if "diagnostics_see_demo" in summary:
        return summary["diagnostics_see_demo"]
    return True if summary.get("summary_version", 1) < 2 else None


def seed_span(seeds) -> str:
    """"0-9" for consecutive seeds, else the list."""
    seeds = [int(s) for s in seeds or []]
    if not seeds:
        return "unrecorded seeds"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ", ".join(map(str, seeds))


def mode_words(mode: str | None) -> str:
    return {"mean": "the action mean", "sample": "sampled actions"}.get(mode or "", "an unrecorded action mode")


def protocol_lines(summary: dict) -> list[str]:
    """What every reader of a run's numbers must know, one line each: the description, the
    demonstration access of the diagnostics, the demonstration, the evaluation and the start."""
    start = summary.get("start") or {}
    see = demo_access(summary)
    demo = summary.get("demonstration") or {}
    ev = summary.get("evaluation") or {}
    mode = ev.get("action_mode") or (summary.get("settings") or {}).get("action_mode")
    verified = ev.get("verified_mode")
    seeds = ev.get("seeds")
    started = ("the analyst's zero-shot program" if start.get("kind", "zero-shot") == "zero-shot"
               else f"a given program, {start.get('label')} (sha256 {str(start.get('sha256'))[:12]})")
    lines = [
        f"task description: **{summary.get('description')}**",
        "demonstration in the diagnostics: " + ("**on** (the analysis code also read `demo`; the published method "
                                                "gives it the rollout only)" if see else
                                                "off (the analysis code read the rollout table `df` only, as published)"
                                                if see is False else "not recorded"),
        "demonstration: " + (f"{demo.get('source')}, seed {demo.get('seed')}"
                             + (f", {demo.get('takes')} takes" if (demo.get("takes") or 1) > 1 else "")
                             if demo else "not recorded in this summary"),
        f"episodes executed {mode_words(mode)}; evaluation seeds {seed_span(seeds)}"
        + ("" if not verified else f" (the task's published results were verified with {mode_words(verified)} on "
           f"seeds {seed_span(ev.get('verified_seeds'))}"
           + (")" if mode == verified and (not seeds or list(seeds) == list(ev.get("verified_seeds") or []))
              else "; this run differs)")),
        f"start: {started}",
    ]
    return lines


def summary_markdown(summary: dict) -> str:
    """The summary for people: one header block, one row per round, the totals."""
    a, totals = summary["analyst"], summary["totals"]
    who = (f"`{a['name']}` ({', '.join(a['models']) or 'model not recorded'})" if a["language_model"]
           else f"`{a['name']}` (rule-based, not a language model)")
    mode = (summary.get("evaluation") or {}).get("action_mode") or (summary.get("settings") or {}).get("action_mode")
    lines = [
        f"# Refinement run {summary['run_id']}: {summary['task']}",
        "",
        *(f"- {line}" for line in protocol_lines(summary)[:1]),
        f"- analyst: {who}" + (f"; {a['label']}" if a["label"] and not a["language_model"] else ""),
        *(f"- {line}" for line in protocol_lines(summary)[1:]),
        f"- calls: {totals['calls']}, tokens in / out: {totals['tokens_in']:,} / {totals['tokens_out']:,}"
        + (f" ({a['token_counts']})" if a["token_counts"] else ""),
        "- environment resets: " + ", ".join(f"{totals['resets'][k]} {k}" for k in (*RESET_KINDS, "rl")
                                             if totals["resets"].get(k) or k != "rl")
        + " (diagnostic episodes are the published method's resets; selection episodes choose the best"
          " round; evaluation episodes are only reported)",
        f"- best round: {summary['best_round']} ({summary.get('best_round_reason') or 'by its selection metric'}); "
        f"stopped: {summary['stop_reason']}",
    ]
    if summary.get("relabelled"):
        lines.append(f"- relabelled after it was recorded: {summary['relabelled']}")
    replay = summary.get("replay")
    if replay:
        lines.append(f"- replay ({replay.get('mode')}) of {replay.get('transcript')}, recorded with model "
                     f"{replay.get('model')}: {len(replay.get('divergences') or [])} of {replay.get('requests')} "
                     "requests differed from the recording")
    shown = {"mean": "mean action", "sample": "sampled"}.get(mode or "", "action mode unrecorded")
    lines += ["", f"| round | program | fit | selection | eval ({shown}) | success | decision | why |",
              "|---|---|---|---|---|---|---|---|"]
    for r in summary["rounds"]:
        fit = "ok" if r["fit"]["ok"] else f"failed: {str(r['fit']['error'] or '')[:80]}"
        if r["fit"]["attempts"] > 1:
            fit += f" ({r['fit']['attempts']} attempts)"
        ev = r["eval"]
        score = "-" if ev["metric_mean"] is None else f"{_num(ev['metric_mean'])} ± {_num(ev['metric_std'], 3)}"
        success = "-" if ev["success_rate"] is None else f"{ev['success_rate']:.0%}"
        decision = r["decision"] + (f" (+{r['tests_requested']} tests)" if r["tests_requested"] else "")
        title = f" {r['program_title']}" if r["program_title"] else ""
        why = r["reason"].replace("|", "/")
        lines.append(f"| {r['round']} | `{r['program_sha256']}`{title} | {fit} | {_num(r['selection_metric'])} | "
                     f"{score} | {success} | {decision} | {why} |")
    if summary["revisions"]:
        lines += ["", "Revisions made:"]
        lines += [f"- after round {v['round']}: {v['reason']}" for v in summary["revisions"]]
    return "\n".join(lines) + "\n"


def write_summary(db: RunDatabase, out_dir: Path, run_id: int | None = None) -> tuple[Path, Path]:
    """Write `summary.json` and `summary.md` of a run into `out_dir`."""
    summary = build_summary(db, run_id)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out_dir / SUMMARY_JSON, out_dir / SUMMARY_MD
    json_path.write_text(json.dumps(summary, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    md_path.write_text(summary_markdown(summary), encoding="utf-8")
    return json_path, md_path


def load_summary(path: Path) -> dict:
    """A committed run's summary: `path` is its folder or its summary.json."""
    path = Path(path)
    file = path / SUMMARY_JSON if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read a run summary at {file}: {exc}") from None
    if not isinstance(data, dict) or "rounds" not in data or "programs" not in data:
        raise ValueError(f"{file} is not a run summary (no rounds or programs)")
    return data
