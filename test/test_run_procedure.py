"""The procedure as published (one diagnostic rollout per round; a revision that never fits is
recorded and the run goes on from the previous program), a run that starts from a given
program, and the one-page summary every run writes."""

import json

import pytest

from refine_core.analyst.base import Analyst, Decision, ProgramAnswer
from refine_core.analyst.offline import OfflineAnalyst
from refine_core.cli import main
from refine_core.loop import RefineConfig, refine
from refine_core.policy.programs import starter_program
from refine_core.store.db import RunDatabase
from refine_core.summary import program_hash
from refine_core.tasks.registry import get_task

BROKEN = "class OpenDoorPolicy:\n    pass\n"


def small(**kw) -> RefineConfig:
    base = dict(selection_episodes=1, eval_episodes=1, max_steps=30, verbose=False)
    return RefineConfig(**{**base, **kw})


class RevisesIntoABrokenProgram(Analyst):
    """Offline answers, except that the first revision is a program that never fits and every
    repair of it is broken too; the repair requests are written down."""

    name, is_llm = "broken-revision", False
    reads_demonstration = True  # it defers to the offline analyst, whose checks read the demonstration

    def __init__(self):
        self.inner = OfflineAnalyst()
        self.repairs: list[dict] = []
        self.revisions = 0

    def generate(self, spec, *, failed_program=None, error=None, context=None):
        if failed_program is not None:
            self.repairs.append({"failed": failed_program, "error": error, "context": context})
            return ProgramAnswer(BROKEN, reasoning="still broken", conversation=list(context or []))
        return self.inner.generate(spec)

    def diagnose(self, spec, program, schema, *, demo=False):
        answer = self.inner.diagnose(spec, program, schema, demo=demo)
        answer.conversation = [{"role": "user", "content": f"diagnose this program:\n{program}"},
                               {"role": "assistant", "content": answer.reasoning}]
        return answer

    def revise(self, spec, program, results, *, conversation=None, demo=False):
        self.revisions += 1
        if self.revisions == 1:
            return Decision("program", program=BROKEN, reasoning="DECISION: revise\nA new structure.",
                            conversation=[*(conversation or []), {"role": "assistant", "content": BROKEN}])
        return Decision("stop", reasoning="DECISION: stop\nThe program behaves as intended.")


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_a_revision_that_never_fits_is_recorded_and_the_run_goes_on_from_the_previous_program(tmp_path):
    analyst = RevisesIntoABrokenProgram()
    db = RunDatabase(tmp_path / "run.db")
    result = refine(get_task("door_open"), analyst, db, small(max_rounds=4, max_attempts=5))
    rows = db.rounds(result.run_id)
    assert [r["status"] for r in rows] == ["committed", "failed", "committed"]
    assert len(rows[1]["fit_report"]["attempts"]) == 5 and rows[1]["program"] == BROKEN
    assert rows[2]["program"] == rows[0]["program"], "round 2 goes on from round 0's program"
    assert rows[2]["decision"] == "stop" and result.best.round in (0, 2)
    # four repairs, each continuing the exchange that holds the preceding program and its diagnostics
    assert len(analyst.repairs) == 4
    assert all(rows[0]["program"] in r["context"][0]["content"] for r in analyst.repairs)
    assert db.events(result.run_id, kind="round_failed")
    # one diagnostic rollout per round (the published count), selection and evaluation apart
    episodes = db.episodes(result.run_id)
    per_round = episodes.groupby(["round", "kind"]).size().to_dict()
    assert per_round[(0, "diagnostic")] == 1 and per_round[(2, "diagnostic")] == 1
    assert (1, "diagnostic") not in per_round, "a round that failed to fit ran no episode"


def test_a_resumed_run_goes_on_from_the_program_before_a_failed_round(tmp_path):
    from refine_core.store import records

    db = RunDatabase(tmp_path / "run.db")
    run_id = db.create_run("door_open", status="running")
    db.save_round(run_id, 0, program="PROGRAM ZERO", decision="program", next_program=BROKEN,
                  metrics={"selection": {"metric_mean": 0.3, "episodes": 1}}, selection_metric=0.3)
    db.save_round(run_id, 1, status="failed", program=BROKEN, error="never fits")
    state = records.resume_state(db, run_id, higher_is_better=False)
    assert not state.finished and state.next_round == 2 and state.next_program == "PROGRAM ZERO"


def test_selection_episodes_zero_chooses_on_the_diagnostic_episodes(tmp_path):
    db = RunDatabase(tmp_path / "run.db")
    result = refine(get_task("door_open"), OfflineAnalyst(), db, small(max_rounds=1, selection_episodes=0))
    (row,) = db.rounds(result.run_id)
    assert set(db.episodes(result.run_id)["kind"]) - {"demo"} == {"diagnostic", "eval"}
    assert row["selection_metric"] == row["metrics"]["diagnostic"]["metric_mean"]
    assert result.best is not None and result.best.round == 0


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_refine_run_from_a_given_program_records_its_start_and_writes_the_summary(tmp_path, capsys):
    start = tmp_path / "mine.py"
    program = starter_program("door_open").replace("Zero-shot starter", "A user's own controller", 1)
    start.write_text(program)
    run_dir = tmp_path / "run"
    assert main(["run", "--task", "door_open", "--analyst", "offline", "--start", str(start), "--run", str(run_dir),
                 "--max-rounds", "1", "--eval-episodes", "2", "--selection-episodes", "1", "--max-steps", "30",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "task description: published" in out
    with RunDatabase(run_dir / "run.db") as db:
        run = db.latest_run()
        (row,) = db.rounds(run["id"])
    assert row["program"] == program, "the run began from the file, not from a zero-shot program"
    assert run["config"]["start"]["kind"] == "program" and "mine.py" in run["config"]["start"]["label"]
    assert run["config"]["task_description"] == "published"

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task"] == "door_open" and summary["description"] == "published"
    assert summary["start"]["kind"] == "program" and summary["analyst"]["name"] == "offline"
    assert not summary["analyst"]["language_model"]
    (r0,) = summary["rounds"]
    assert r0["program_sha256"] == program_hash(program) and summary["programs"][r0["program_sha256"]] == program
    assert r0["program_title"].startswith("A user's own controller")
    assert r0["fit"]["ok"] and r0["eval"]["episodes"] == 2 and r0["eval"]["metric_mean"] is not None
    assert r0["resets"] == {"diagnostic": 1, "selection": 1, "eval": 2}
    assert summary["totals"]["resets"]["diagnostic"] == 1 and summary["totals"]["calls"] == 0
    assert summary["first_round"] == 0 and summary["best_round"] == 0
    md = (run_dir / "summary.md").read_text()
    assert "task description: **published**" in md and "mine.py" in md and "| 0 | `" in md

    # rebuilt on demand from the database
    (run_dir / "summary.json").unlink()
    assert main(["report", "--run", str(run_dir), "--summary"]) == 0
    assert json.loads((run_dir / "summary.json").read_text())["rounds"] == summary["rounds"]


def test_the_analyst_reads_the_published_door_under_its_column_names_and_storage_keeps_the_task_names(
        tmp_path, capsys):
    """Diagnostics written against `door_x` run on the stored `handle_x` table; `refine analyze`
    reads the run's tables under the same names."""
    seen = {}

    class Reader(OfflineAnalyst):
        def diagnose(self, spec, program, schema, *, demo=False):
            seen["schema"] = list(schema)
            answer = super().diagnose(spec, program, schema, demo=demo)
            answer.code = "print('door columns', [c for c in df.columns if 'door_' in c][:3])\n" \
                          "print('demo has door_x', 'door_x' in demo.columns)\n" + answer.code
            return answer

    db = RunDatabase(tmp_path / "run.db")
    result = refine(get_task("door_open"), Reader(), db, small(max_rounds=1))
    observed = [c for c in seen["schema"] if not c.startswith(("latent_", "weight_"))]  # the starter's own names
    assert "door_x" in observed and not any("handle" in c for c in observed)
    out = db.analyses(result.run_id, 0)[0]["stdout"]
    assert "door columns ['door_x', 'door_y', 'door_z']" in out and "demo has door_x True" in out
    assert "handle_x" in db.load_steps(result.run_id, round=0, kind="diagnostic").columns
    script = tmp_path / "mine.py"
    script.write_text("print('max door_x', round(float(df['door_x'].max()), 3) > -10)\n")
    assert main(["analyze", "--run", str(tmp_path), "--round", "0", "--code", str(script)]) == 0
    assert "max door_x True" in capsys.readouterr().out
