"""Choosing the best round where no reward says which is best (a robot): by the operator's
labels or a success signal, and never a blind pick among rounds nothing tells apart."""

import math

import pandas as pd
import pytest

from refine_core.analyst.offline import OfflineAnalyst
from refine_core.loop import RefineConfig, refine
from refine_core.store.db import RunDatabase
from refine_core.store.records import RoundRecord, choose_best, round_outcomes
from refine_core.summary import build_summary, summary_markdown
from refine_core.tasks.registry import get_task


def _round(number: int, metric: float) -> RoundRecord:
    return RoundRecord(1, number, "committed", "program", metrics={"selection": {"episodes": 2, "metric_mean": metric}})


def test_the_metric_chooses_when_it_tells_the_rounds_apart():
    choice = choose_best([_round(0, 0.2), _round(1, 0.7), _round(2, 0.5)], higher_is_better=True)
    assert choice.round.round == 1 and choice.basis == "metric" and "selection metric 0.7" in choice.reason


@pytest.mark.parametrize("metric", [0.0, math.nan])
def test_rounds_nothing_tells_apart_are_not_a_blind_choice(metric):
    """A robot's all-zero (or unmeasured) metric: the choice says so and follows a stated rule."""
    choice = choose_best([_round(0, metric), _round(1, metric), _round(2, metric)], higher_is_better=True)
    assert choice.basis == "rule" and choice.round.round == 0
    assert "nothing distinguishes the rounds" in choice.reason and "kept by rule (the earliest" in choice.reason


def test_operator_labels_choose_and_unlabelled_rounds_do_not_compete():
    rounds = [_round(0, 0.0), _round(1, 0.0), _round(2, 0.0)]
    labels = {0: [1.0, 0.0], 1: [1.0, 1.0]}  # round 2 ran unlabelled
    choice = choose_best(rounds, True, "operator", labels)
    assert choice.round.round == 1 and choice.basis == "operator"
    assert "operator labels: success rate 1.00 over 2 labelled episode(s)" in choice.reason
    tied = choose_best(rounds, True, "operator", {0: [1.0], 1: [1.0]})
    assert tied.basis == "rule" and tied.round.round == 0 and "every round with an operator label has the same" \
        in tied.reason
    none = choose_best(rounds, True, "signal", {})
    assert none.basis == "rule" and "none has a success signal" in none.reason
    with pytest.raises(ValueError, match="basis"):
        choose_best(rounds, True, "vibes")


def test_rounds_that_share_the_best_label_rate_are_told_apart_by_the_measured_metric():
    """Six failed rounds on the arm's twin are not equally far from the door: where the robot
    measures its metric (the handle's distance to the target, lower is better), it chooses among
    the rounds tied on the operator's labels; rounds with a worse label rate never compete."""
    rounds = [_round(0, 0.5416), _round(1, 0.5433), _round(2, 0.498), _round(3, 0.3408)]
    failed = {r: [0.0, 0.0] for r in range(4)}
    choice = choose_best(rounds, False, "operator", failed)
    assert choice.round.round == 3 and choice.basis == "metric"
    assert "rounds 0, 1, 2, 3 share the best operator label success rate 0.00" in choice.reason
    assert "selection metric 0.3408 (measured from the robot's observations)" in choice.reason
    one_opened = {**failed, 1: [1.0, 0.0]}
    assert choose_best(rounds, False, "operator", one_opened).round.round == 1, "a label beats any metric"
    unmeasured = [_round(0, math.nan), _round(1, math.nan)]
    assert choose_best(unmeasured, False, "operator", {0: [0.0], 1: [0.0]}).basis == "rule"


def _episode(db: RunDatabase, run_id: int, round_: int, index: int, *, success: float, label: str | None) -> None:
    db.save_episode(run_id, round_, "selection", index, seed=index, table=pd.DataFrame(),
                    summary={"return": math.nan, "metric": 0.0, "success": success, "steps": 5})
    if label:
        db.set_episode_label(run_id, round_, "selection", index, label)


def test_labels_and_signals_are_read_from_the_run_database_and_the_summary_says_which(tmp_path):
    with RunDatabase(tmp_path) as db:
        run_id = db.create_run("door_open", config={"best_round_by": "operator"})
        for number in (0, 1):
            db.save_round(run_id, number, program="p", decision="stop", metrics={"selection": {"episodes": 2, "metric_mean": 0.0}},
                          selection_metric=0.0)
        _episode(db, run_id, 0, 0, success=1.0, label="failure")
        _episode(db, run_id, 0, 1, success=1.0, label=None)
        _episode(db, run_id, 1, 0, success=0.0, label="success")
        assert round_outcomes(db, run_id, "operator") == {0: [0.0], 1: [1.0]}
        assert round_outcomes(db, run_id, "signal") == {0: [1.0, 1.0], 1: [0.0]}
        summary = build_summary(db, run_id)
        assert summary["best_round"] == 1 and "by operator labels" in summary["best_round_reason"]
        assert "best round: 1 (round 1 by operator labels" in summary_markdown(summary)
        db.update_run(run_id, config={"best_round_by": "signal"})
        assert build_summary(db, run_id)["best_round"] == 0, "the success signal says round 0"


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_a_run_without_labels_says_it_kept_a_round_by_rule(tmp_path, capsys):
    """The loop with best_round_by=operator and no operator at hand: the run ends saying that
    nothing distinguished its rounds, in the console and in its events."""
    config = RefineConfig(max_rounds=2, diagnostic_episodes=1, selection_episodes=1, eval_episodes=0, max_steps=15,
                          best_round_by="operator")
    with RunDatabase(tmp_path / "run.db") as db:
        result = refine(get_task("door_open"), OfflineAnalyst(), db, config)
        assert "nothing distinguishes the rounds (none has an operator label)" in result.best_reason
        (event,) = db.events(result.run_id, kind="best_round")
        assert event["data"]["basis"] == "rule" and event["data"]["asked"] == "operator"
        assert db.run(result.run_id)["best_round"] == result.best.round == 0
    assert "[refine] best round: nothing distinguishes" in capsys.readouterr().out
    with pytest.raises(ValueError, match="best_round_by"):
        RefineConfig(best_round_by="reward")
