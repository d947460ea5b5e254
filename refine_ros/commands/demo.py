"""`refine demo`: what `make demo` runs — a refinement of the door simulation through the ROS 2
node graph in one process, then the report and the run's summary.

The refinement shown is a language model's, replayed: the answers come from a recorded run's
transcript (`results/llm/door_open/<run>/transcript.jsonl`, or `--transcript FILE`), so the
demo needs no model endpoint and shows what a model actually did. The replay is sequential
(each kind of question gets the recorded answers in recorded order, and every request that
differs from the recorded one is counted), because episodes through the graph need not match
the recorded run's step for step. Without a recorded run the offline analyst runs instead,
and the output says plainly that it is a rule-based program, not a language model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

RECORDED_RUNS = Path("results") / "llm" / "door_open"
SHOWN_RUN = "published-zero-shot-1"
"""The run the demo replays when it is there: the median of the runs that had only the published
information and rollout-only diagnostics, so the demo shows the method as published, not a variant."""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("demo", help="the main job: replay a language model's recorded refinement of door_open "
                                    "through the ROS 2 nodes, then report")
    p.add_argument("--run", type=Path, default=Path("runs/demo"), metavar="DIR")
    p.add_argument("--transcript", type=Path, default=None, metavar="FILE",
                   help=f"a recorded LLM run's transcript to replay (default: {RECORDED_RUNS}/{SHOWN_RUN}, "
                        f"else the first of {RECORDED_RUNS}/*/transcript.jsonl)")
    p.add_argument("--offline", action="store_true",
                   help="run the offline analyst (rule-based, not an LLM) instead of a recorded LLM run")
    p.add_argument("--max-rounds", "--rounds", dest="max_rounds", type=int, default=None,
                   help="most rounds (RefineConfig.max_rounds; default: the recorded run's, 4 with the offline "
                        "analyst). --rounds: the old spelling, deprecated")
    p.add_argument("--max-steps", type=int, default=None, help="cap episode length (a quick look)")
    p.add_argument("--profile", default="door_sim")
    return p


def recorded_transcript(folder: Path = RECORDED_RUNS) -> Path | None:
    """The shown run's transcript under `folder`, else the first recorded one, if any."""
    if (folder / SHOWN_RUN / "transcript.jsonl").is_file():
        return folder / SHOWN_RUN / "transcript.jsonl"
    found = sorted(folder.glob("*/transcript.jsonl"))
    return found[0] if found else None


def run(args) -> int:
    from refine_core.analyst.labels import OFFLINE_ANALYST
    from refine_core.analyst.transcript import ReplayBackend, TranscriptError
    from refine_core.cli import UserError
    from refine_core.cli import main as refine_main

    transcript = None if args.offline else (args.transcript or recorded_transcript())
    if transcript is not None:
        try:
            recorded = ReplayBackend(transcript, "sequential")
        except TranscriptError as exc:
            raise UserError(str(exc)) from None
        from refine_core.run_setup import upgrade_recorded

        settings = upgrade_recorded(recorded.settings) or {}
        rounds = args.max_rounds or settings.get("max_rounds") or 6
        banner = (f"REPLAY of a language model's recorded answers: model {recorded.model}, from {transcript} "
                  f"(task description: {settings.get('task_description', 'not recorded')}; demonstration in the diagnostics: "
                  f"{'on' if settings.get('diagnostics_see_demo') else 'off'}). No model is queried; "
                  "the ROS graph fits, rolls out and diagnoses every recorded program again.")
        up = ["up", args.profile, "--run", str(args.run), "--analyst", "replay", "--transcript", str(transcript),
              "--replay-mode", "sequential", "--max-rounds", str(rounds), "--no-rviz"]
    else:
        why = "as asked (--offline)" if args.offline else f"no recorded LLM run was found under {RECORDED_RUNS}"
        banner = f"OFFLINE ANALYST, {why}. {OFFLINE_ANALYST}"
        up = ["up", args.profile, "--run", str(args.run), "--analyst", "offline", "--max-rounds", str(args.max_rounds or 4),
              "--no-rviz"]
    if args.max_steps:
        up += ["--max-steps", str(args.max_steps)]
    print(f"[demo] {banner}", flush=True)
    args.run.mkdir(parents=True, exist_ok=True)
    for argv in (up, ["report", "--run", str(args.run), "--summary"]):
        print(f"$ refine {' '.join(argv)}", flush=True)
        code = refine_main(argv)
        if code:
            return code
    print(f"[demo] {banner}", flush=True)
    return 0
