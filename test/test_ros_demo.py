"""`refine demo` (what `make demo` runs), as a user runs it: a language model's recorded
refinement of the door replayed through the ROS graph, labelled as such; the offline analyst,
labelled as not an LLM, when asked or when no recorded run exists."""

from __future__ import annotations

import json

import pytest
from fake_openai_server import FakeOpenAIServer
from llm_replay import MODEL, path_of, refine, scripted_door_model

pytestmark = pytest.mark.ros


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_make_demo_replays_a_recorded_llm_refinement_through_the_ros_graph(tmp_path):
    recorded = tmp_path / "recorded"
    with FakeOpenAIServer(responder=scripted_door_model(), model=MODEL) as server:
        done = refine("run", "--task", "door_open", "--analyst", "openai", "--transcript",
                      str(recorded / "transcript.jsonl"), "--run", str(recorded), "--max-rounds", "3", "--max-steps", "40",
                      "--eval-episodes", "2", "--selection-episodes", "1", "--quiet",
                      env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": server.base_url, "REFINE_MODEL": MODEL})
    assert done.returncode == 0, done.stderr[-2000:]

    demo = refine("demo", "--transcript", str(recorded / "transcript.jsonl"), "--run", str(tmp_path / "demo"),
                  "--max-steps", "40")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    banner = f"REPLAY of a language model's recorded answers: model {MODEL}"
    assert demo.stdout.count(banner) == 2, "said before the run and again at its end"
    assert "--analyst replay" in demo.stdout and "--replay-mode sequential" in demo.stdout
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert path_of(summary) == path_of(json.loads((recorded / "summary.json").read_text()))
    assert summary["analyst"]["name"] == "replay" and summary["analyst"]["models"] == [MODEL]
    assert summary["replay"]["mode"] == "sequential" and summary["description"] == "published"
    assert "replay (sequential)" in (tmp_path / "demo" / "summary.md").read_text()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_demo_without_a_recorded_run_says_it_runs_the_offline_analyst(tmp_path):
    demo = refine("demo", "--offline", "--max-rounds", "1", "--run", str(tmp_path / "demo"), "--max-steps", "30")
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "OFFLINE ANALYST, as asked (--offline)" in demo.stdout and "not an LLM" in demo.stdout
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["analyst"]["name"] == "offline" and not summary["analyst"]["language_model"]
