"""Every text the analyst reads is frozen: runs recorded before a refactoring replay exactly.

The transcripts under `test/fixtures/frozen_prompts/` were recorded with `frozen_prompts.py`
(the real `openai` client against a scripted server) and committed. An exact replay answers a
request only if its hash matches the recorded one, so any byte that changed in the system
prompt, a task description, an input / action / metric line, a column name or the way
diagnostic results are printed ends the replay with "has no answer for the ... request". The
same seeds must also give the same numbers: the recorded scores come back.
"""

from __future__ import annotations

import json

import pytest
from frozen_prompts import FIXTURES, RUNS
from llm_replay import assert_replay_reproduces
from published_words import FORBIDDEN


@pytest.mark.slow  # a whole refinement run: out of make test-fast
@pytest.mark.timeout(900)
@pytest.mark.parametrize("task", sorted(RUNS))
def test_a_run_recorded_before_the_refactoring_replays_exactly(task, tmp_path):
    run = FIXTURES / task
    recorded = json.loads((run / "summary.json").read_text())
    replayed = assert_replay_reproduces(run, tmp_path / "replay", mode="exact", caps=())
    assert replayed["replay"]["divergences"] == []
    assert replayed["replay"]["requests"] == recorded["totals"]["calls"]
    assert [r["eval"] for r in replayed["rounds"]] == [r["eval"] for r in recorded["rounds"]]
    assert [r["selection_metric"] for r in replayed["rounds"]] == [r["selection_metric"] for r in recorded["rounds"]]
    assert [r["fit"] for r in replayed["rounds"]] == [r["fit"] for r in recorded["rounds"]]


def test_the_frozen_published_requests_name_no_simulator_and_no_demonstration_table():
    """The door fixture freezes the published texts with rollout-only diagnostics: none of its
    requests names a simulator or a library, or the demonstration table; the car fixture freezes
    the detailed texts with the demonstration table given, and its requests say so."""
    def requests(task):
        lines = [json.loads(line) for line in (FIXTURES / task / "transcript.jsonl").read_text().splitlines()]
        assert lines[0]["settings"]["diagnostics_see_demo"] is (task == "car_racing")
        return [m["content"] for line in lines[1:] for m in line["request"]["messages"]]

    door = requests("door_open")
    assert door and not [FORBIDDEN.findall(text) for text in door if FORBIDDEN.search(text)]
    assert not [text for text in door if "`demo`" in text]
    assert any("`demo`" in text for text in requests("car_racing"))
