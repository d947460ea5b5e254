"""Replaying recorded LLM refinement runs, as a user would: `refine run --analyst replay` in its
own process, answered only by a transcript.

A committed run is a folder `results/llm/<task>/<run>/` holding the `transcript.jsonl` that
`refine run --analyst openai --transcript ...` recorded and the `summary.json` that run
wrote. Replaying it with step caps (shorter episodes, fewer selection and evaluation
episodes) changes every diagnostic printout and therefore every revision request, so the
replay runs in sequential mode: each role's requests get the recorded answers in recorded
order, and the run must take exactly the recorded path: the same program in every round and
the same decision after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_openai_server import Reply, by_role

from refine_core.analyst.offline.catalogue import render
from refine_core.policy.programs import starter_program

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "llm"
CAPS = ("--max-steps", "40", "--eval-episodes", "1", "--selection-episodes", "1")
"""Step caps for CI: enough steps for every program to act, few enough to take minutes."""
MODEL = "scripted-model-1"
"""The name the scripted model's server reports."""


def committed_runs(all_runs: bool | None = None) -> list[Path]:
    """The committed LLM runs to replay: one per task (the first by name), or every one with
    `all_runs` (default: the environment variable REFINE_REPLAY_ALL_RUNS=1)."""
    if all_runs is None:
        all_runs = os.environ.get("REFINE_REPLAY_ALL_RUNS") == "1"
    runs: list[Path] = []
    for task_dir in sorted(p for p in COMMITTED.glob("*") if p.is_dir()):
        found = sorted(p.parent for p in task_dir.glob("*/transcript.jsonl") if (p.parent / "summary.json").is_file())
        runs += found if all_runs else found[:1]
    return runs


def refine(*argv: str, env: dict | None = None, timeout: float = 1500) -> subprocess.CompletedProcess:
    """`refine ARGV` in a process of its own (the console script's module, this interpreter)."""
    return subprocess.run([sys.executable, "-m", "refine_core.cli", *argv], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)


def replay(run: Path, out: Path, *, mode: str = "sequential", caps: tuple[str, ...] = CAPS
           ) -> subprocess.CompletedProcess:
    """Replay the run folder `run` into the run directory `out`."""
    return refine("run", "--analyst", "replay", "--replay-mode", mode, "--transcript", str(run / "transcript.jsonl"),
                  "--run", str(out), "--quiet", *caps)


def path_of(summary: dict) -> list[tuple[int, str, str, str]]:
    """What a replay must reproduce: per round, its status, program and decision."""
    return [(r["round"], r["status"], r["program_sha256"], r["decision"]) for r in summary["rounds"]]


def assert_replay_reproduces(run: Path, out: Path, *, mode: str = "sequential",
                             caps: tuple[str, ...] = CAPS) -> dict:
    """Replay `run` and check the recorded programs and decisions come back; returns the
    replay's summary."""
    recorded = json.loads((run / "summary.json").read_text())
    done = replay(run, out, mode=mode, caps=caps)
    assert done.returncode in (0, 1), f"replay failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    replayed = json.loads((out / "summary.json").read_text())
    assert path_of(replayed) == path_of(recorded), (
        f"the replay of {run} took another path:\nrecorded {path_of(recorded)}\nreplayed {path_of(replayed)}")
    assert replayed["task"] == recorded["task"] and replayed["description"] == recorded["description"]
    assert replayed["start"].get("sha256") == recorded["start"].get("sha256")
    assert replayed["replay"]["mode"] == mode and not replayed["replay"]["unused_answers"], \
        "every recorded answer was asked for"
    assert replayed["analyst"]["models"] == recorded["analyst"]["models"], "the replay names the recorded model"
    return replayed


def _fenced(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def scripted_door_model():
    """A model that writes a program that is refused (it imports os), repairs it, asks for
    more tests once, revises with a catalogue structure, then stops: every kind of answer."""
    starter = starter_program("door_open")
    refused = starter.replace("import torch\n", "import os\nimport torch\n", 1)
    revised = render("door_open", ["door_hover_release"])
    return by_role({
        "generate": [Reply.text("A reach, grasp and pull controller.\n" + _fenced(refused))],
        "regenerate": [Reply.text("Without the os import.\n" + _fenced(starter))],
        "diagnose": [
            Reply.text("1. Task analysis: reach the door, then pull.\n5. Hypotheses: the gripper reaches it.\n"
                       + _fenced("print('rows', len(df))\nprint('mean door_x', round(float(df['door_x'].mean()), 4))")),
            Reply.text("5. Hypotheses: the hover fades.\n"
                       + _fenced("print('min gripper_z', round(float(df['gripper_z'].min()), 4))")),
        ],
        "revise": [
            Reply.text("DECISION: more_tests\nThe approach is unclear.\n"
                       + _fenced("print('max dz', round(float(df['act_dz'].abs().max()), 4))")),
            Reply.text("DECISION: revise\nThe gripper waits above the door too long. Model summary: as before, with "
                       "the hover fading faster.\n" + _fenced(revised)),
            Reply.text("DECISION: stop\nThe hover now fades as intended."),
        ],
    })
