"""The labels that say who analysed a run and what it saw, in `refine report` and for reuse."""

import html

import pytest

from refine_core.analyst import labels
from refine_core.report import build_report
from refine_core.store.db import RunDatabase


@pytest.mark.parametrize(
    "analyst, config, must, must_not",
    [
        ("offline", {"expert_relabels": False}, [labels.OFFLINE_ANALYST, labels.EXPERT_OFF],
         [labels.EXPERT_ON]),
        ("offline", {"expert_relabels": True}, [labels.OFFLINE_ANALYST, labels.EXPERT_ON],
         [labels.EXPERT_OFF]),
        ("openai", {}, [labels.EXPERT_UNKNOWN], [labels.OFFLINE_ANALYST]),
        ("replay", {"label_expert": False}, [labels.REPLAY_ANALYST, labels.EXPERT_OFF],
         [labels.OFFLINE_ANALYST]),
    ],
)
def test_report_states_the_analyst_and_the_expert_setting(tmp_path, analyst, config, must,
                                                          must_not):
    db = RunDatabase(tmp_path / "runs.db")
    db.create_run("car_racing", config=config, analyst=analyst, status="finished")
    out, summary = build_report(db, tmp_path / "report.html")
    page = out.read_text()
    for text in must:
        assert text in summary
        assert html.escape(text) in page
    for text in must_not:
        assert text not in summary and html.escape(text) not in page


def test_offline_wording_says_what_its_results_are():
    text = labels.OFFLINE_ANALYST
    for phrase in ("not an LLM", "pre-written programs", "two bundled tasks",
                   "not LLM results"):
        assert phrase in text
    assert "not LLM results" in labels.OFFLINE_ROWS
    assert labels.analyst_label("openai") == ""
    assert labels.expert_setting({"expert_relabels": "yes"}) is None  # only a real bool counts
