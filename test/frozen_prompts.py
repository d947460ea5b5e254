"""Two language-model runs recorded once, to hold every text the analyst reads fixed.

Recorded language-model runs are replayed by request hash: a replay in exact mode answers a
request only if it is byte for byte the recorded one (system prompt, task description, input,
action and metric lines, column names, diagnostic results as printed). So a change to any of
these breaks the replay of every run recorded before it. The two runs under
`test/fixtures/frozen_prompts/` were recorded with `record()` below (the real `openai` client
against the scripted server of `fake_openai_server`) and are committed; `test_frozen_prompts.py`
replays them exactly after every change. They were re-recorded, deliberately, when the published
variant lost its simulator names and the analysis code lost the demonstration table by default
(issue 25): the door run freezes the published texts with rollout-only diagnostics, the car run
the detailed texts with the demonstration table given to the code.

    .venv/bin/python test/frozen_prompts.py     # re-records them (only when a prompt change is meant)

- door_open, published description (the analyst reads features 4-6 as `door_x`...), the
  analysis code reads the rollout only: a refused program, its regeneration, diagnostics, a
  request for more tests, a revision from the offline catalogue, a second round's diagnostics
  and a stop.
- car_racing, detailed description, the analysis code also reads the demonstration
  (`--diagnostics-see-demo`): the starter, diagnostics, a stop.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_openai_server import FakeOpenAIServer, Reply, by_role  # noqa: E402
from llm_replay import MODEL, refine, scripted_door_model  # noqa: E402

FIXTURES = HERE / "fixtures" / "frozen_prompts"
KEY = "sk-test-frozen-0123456789"
RUNS = {
    "door_open": ("--task", "door_open", "--max-rounds", "3", "--max-steps", "60", "--eval-episodes", "2",
                  "--selection-episodes", "1"),
    "car_racing": ("--task", "car_racing", "--description", "detailed", "--max-rounds", "2", "--max-steps", "80",
                   "--eval-episodes", "1", "--selection-episodes", "1", "--diagnostics-see-demo"),
}


def scripted_car_model():
    from refine_core.policy.programs import starter_program

    code = ("print('rows', len(df))\n"
            "print('mean speed', round(float(df['speed'].mean()), 3))\n"
            "print('mean |tile0_x|', round(float(df['tile0_x'].abs().mean()), 3))\n"
            "print('demo rows', len(demo))")
    return by_role({
        "generate": [Reply.text("Follow the tiles ahead.\n```python\n" + starter_program("car_racing") + "\n```")],
        "diagnose": [Reply.text("1. Task analysis: stay on the track.\n```python\n" + code + "\n```")],
        "revise": [Reply.text("DECISION: stop\nThe car stays on the track.")],
    })


MODELS = {"door_open": scripted_door_model, "car_racing": scripted_car_model}


def record(task: str, work: Path) -> Path:
    """Record the run of `task` into FIXTURES/<task>/ (transcript.jsonl, summary.json)."""
    out = FIXTURES / task
    out.mkdir(parents=True, exist_ok=True)
    transcript = out / "transcript.jsonl"
    transcript.unlink(missing_ok=True)
    live = work / task
    with FakeOpenAIServer(responder=MODELS[task](), model=MODEL, api_key=KEY) as server:
        # a generous fit-validation limit: a fit refused only because the machine was busy would
        # record a repair request that no replay on a quiet machine asks for
        done = refine("run", *RUNS[task], "--analyst", "openai", "--transcript", str(transcript),
                      "--run", str(live), "--quiet", "--fit-validation-s", "600",
                      env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url, "REFINE_MODEL": MODEL})
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-3000:])
    shutil.copy(live / "summary.json", out / "summary.json")
    summary = json.loads((out / "summary.json").read_text())
    print(task, [(r["round"], r["decision"]) for r in summary["rounds"]], f"{transcript.stat().st_size} bytes")
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name in sys.argv[1:] or list(RUNS):
            record(name, Path(tmp))
