"""A language model's refinement run, recorded through the real `openai` client and replayed
without it: exactly (same requests, same scores) and sequentially under step caps (same
programs and decisions, every differing request recorded). The second half replays the
committed runs under `results/llm/` the same way (see `llm_replay`)."""

from __future__ import annotations

import json
import shutil

import pytest
from fake_openai_server import FakeOpenAIServer
from llm_replay import (
    MODEL,
    assert_replay_reproduces,
    committed_runs,
    refine,
    replay,
    scripted_door_model,
)

KEY = "sk-test-replay-0123456789"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_recorded_llm_run_replays_exactly_and_sequentially_under_step_caps(tmp_path):
    run = tmp_path / "results" / "llm" / "door_open" / "run1"
    run.mkdir(parents=True)
    live = tmp_path / "live"
    with FakeOpenAIServer(responder=scripted_door_model(), model=MODEL, api_key=KEY) as server:
        done = refine("run", "--task", "door_open", "--analyst", "openai", "--transcript", str(run / "transcript.jsonl"),
                      "--run", str(live), "--max-rounds", "3", "--max-steps", "60", "--eval-episodes", "2",
                      "--selection-episodes", "1", "--quiet",
                      env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url, "REFINE_MODEL": MODEL})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        asked = [r.role for r in server.chat_requests]
    assert asked == ["generate", "regenerate", "diagnose", "revise", "revise", "diagnose", "revise"]
    for name in ("summary.json", "summary.md"):
        shutil.copy(live / name, run / name)
    recorded = json.loads((run / "summary.json").read_text())
    assert recorded["analyst"]["name"] == "openai" and recorded["analyst"]["models"] == [MODEL]
    assert recorded["description"] == "published" and recorded["start"] == {"kind": "zero-shot"}
    assert [(r["decision"], r["tests_requested"]) for r in recorded["rounds"]] == [("program", 1), ("stop", 0)]
    assert recorded["rounds"][0]["fit"]["attempts"] == 2 and recorded["totals"]["calls"] == 7
    assert recorded["revisions"][0]["reason"].startswith("The gripper waits above the door too long")
    assert recorded["totals"]["tokens_in"] > 0 and recorded["totals"]["resets"]["diagnostic"] == 2
    first = json.loads((run / "transcript.jsonl").read_text().splitlines()[0])
    assert first["kind"] == "run" and first["settings"]["task_description"] == "published"
    assert first["settings"]["max_steps"] == 60 and KEY not in (run / "transcript.jsonl").read_text()

    # exact: no server, nothing but the transcript; the same requests, programs, decisions and scores
    exact = assert_replay_reproduces(run, tmp_path / "exact", mode="exact", caps=())
    assert exact["replay"]["divergences"] == [] and exact["replay"]["requests"] == 7
    assert [r["eval"] for r in exact["rounds"]] == [r["eval"] for r in recorded["rounds"]]
    assert [r["selection_metric"] for r in exact["rounds"]] == [r["selection_metric"] for r in recorded["rounds"]]

    # sequential under step caps: other printouts, so other revision requests; same path
    capped = assert_replay_reproduces(run, tmp_path / "capped")
    roles = {d["role"] for d in capped["replay"]["divergences"]}
    assert "revise" in roles, "shorter episodes print other results, and the replay says so"
    assert capped["rounds"][0]["resets"]["eval"] == 1 and capped["rounds"][0]["eval"]["episodes"] == 1
    assert "requests differed from the recording" in (tmp_path / "capped" / "summary.md").read_text()

    # exact under step caps cannot answer the first differing request: a clear error, not a guess
    missed = replay(run, tmp_path / "missed", mode="exact")
    assert missed.returncode == 2 and "has no answer for the 'revise' request" in missed.stderr


COMMITTED = committed_runs()


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.parametrize("run", COMMITTED or [None], ids=[f"{p.parent.name}/{p.name}" for p in COMMITTED] or ["none"])
def test_committed_llm_runs_replay_with_step_caps(run, tmp_path):
    """Every committed LLM run (one per task in CI; REFINE_REPLAY_ALL_RUNS=1 for all) comes back
    from its transcript alone: the recorded program in every round and the recorded decision."""
    if run is None:
        pytest.skip("no committed LLM runs under results/llm/<task>/<run>/ yet")
    assert_replay_reproduces(run, tmp_path / "replay")
