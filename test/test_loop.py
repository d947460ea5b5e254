"""The refinement loop end to end: real simulators, real sandbox, real database, and the real
`openai` client against a local OpenAI-compatible server for the LLM path."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from fake_openai_server import FakeOpenAIServer, Reply, by_role

from refine_core.analyst.base import Analyst, ProgramAnswer
from refine_core.analyst.config import AnalystConfig
from refine_core.analyst.factory import make_analyst
from refine_core.analyst.offline import OfflineAnalyst
from refine_core.analyst.offline.catalogue import render
from refine_core.cli import main
from refine_core.loop import RefineConfig, refine
from refine_core.policy.programs import starter_program
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task


def small(**kw) -> RefineConfig:
    base = dict(diagnostic_episodes=1, selection_episodes=1, eval_episodes=1, verbose=False)
    return RefineConfig(**{**base, **kw})


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_offline_loop_on_door_commits_every_round_and_improves(tmp_path, capsys):
    task = get_task("door_open")
    db = RunDatabase(tmp_path / "run.db")
    result = refine(task, OfflineAnalyst(), db, small(max_rounds=3))

    rounds = db.rounds(result.run_id)
    assert [r["status"] for r in rounds] == ["committed"] * len(rounds) and len(rounds) >= 2
    assert rounds[0]["decision"] == "program" and rounds[0]["next_program"] == rounds[1]["program"]
    first, best = rounds[0]["selection_metric"], result.best.selection_metric
    assert best <= first, "the best round is never worse than the zero-shot one on the selection seeds"
    assert "# refine-edit:" in rounds[1]["program"], "the revision is a catalogue edit of the starter"
    # every committed round holds its diagnostics, their sandboxed results and the table they read
    for r in rounds:
        analyses = db.analyses(result.run_id, r["round"])
        assert analyses and analyses[0]["status"] == "ok" and "CHECK" in analyses[0]["stdout"]
        steps = db.load_steps(result.run_id, round=r["round"], kind="diagnostic")
        assert len(steps) > 0 and any(c.startswith("latent_") for c in steps.columns)
        assert {"mean_dx", "act_dx", "next_handle_x"} <= set(steps.columns)
        assert not any(c.startswith("expert_") for c in steps.columns), "no privileged columns by default"
        kinds = set(db.episodes(result.run_id, r["round"])["kind"])
        assert kinds == {"diagnostic", "selection", "eval"}
    run = db.run(result.run_id)
    assert run["status"] == "finished" and run["best_round"] == result.best.round
    assert db.load_demonstration(result.run_id)["seed"] == task.spec.demo_seed

    # the report shows the metric per round, the program diff, each diagnostic and the traces
    assert main(["report", "--run", str(tmp_path)]) == 0
    html = (tmp_path / "report.html").read_text()
    assert html.count("<img src='data:image/png;base64,") >= 2
    assert "diff from the previous round" in html and "refine-edit" in html
    assert "printed results" in html and "CHECK" in html and "not an LLM" in html

    # a user's own analysis script runs over the logged table through the same sandbox
    script = tmp_path / "mine.py"
    script.write_text("print('rows', len(df), 'demo rows', len(demo))\nprint(df['act_dx'].abs().max() <= 1)\n")
    assert main(["analyze", "--run", str(tmp_path), "--round", "0", "--code", str(script)]) == 0
    printed = capsys.readouterr().out
    assert f"rows {len(db.load_steps(result.run_id, round=0, kind='diagnostic'))} demo rows 500" in printed
    assert "True" in printed
    script.write_text("import socket\nsocket.create_connection(('127.0.0.1', 9))\n")
    assert main(["analyze", "--run", str(tmp_path), "--round", "0", "--code", str(script)]) == 1
    assert "refused" in capsys.readouterr().out


class BrokenFirst(Analyst):
    """Writes programs that fail the way LLM programs do, then defers to the offline analyst."""

    name, is_llm = "broken-first", False
    reads_demonstration = True  # it defers to the offline analyst, whose checks read the demonstration

    def __init__(self, bad_programs):
        self.bad = list(bad_programs)
        self.inner = OfflineAnalyst()
        self.repair_requests = []

    def generate(self, spec, *, failed_program=None, error=None, context=None):
        if error is not None:
            self.repair_requests.append(error)
        if self.bad:
            return ProgramAnswer(program=self.bad.pop(0), reasoning="deliberately bad")
        return self.inner.generate(spec)

    def diagnose(self, spec, program, schema, *, demo=False):
        return self.inner.diagnose(spec, program, schema, demo=demo)

    def revise(self, spec, program, results, *, conversation=None, demo=False):
        return self.inner.revise(spec, program, results, conversation=conversation, demo=demo)


def test_failed_builds_are_sent_back_and_regenerated(tmp_path):
    task = get_task("door_open")
    forbidden = starter_program("door_open").replace("import torch", "import torch\nimport os", 1)
    analyst = BrokenFirst(["def broken(:\n", forbidden])
    db = RunDatabase(tmp_path / "run.db")
    result = refine(task, analyst, db, small(max_rounds=1))
    attempts = db.rounds(result.run_id)[0]["fit_report"]["attempts"]
    assert [a["error"] is None for a in attempts] == [False, False, True]
    assert "[syntax]" in analyst.repair_requests[0] and "os" in analyst.repair_requests[1]
    assert result.best is not None


def test_a_round_that_never_fits_is_recorded_and_the_loop_stops(tmp_path):
    task = get_task("door_open")
    db = RunDatabase(tmp_path / "run.db")
    result = refine(task, BrokenFirst(["class OpenDoorPolicy: pass\n"] * 9), db, small(max_attempts=3))
    (row,) = db.rounds(result.run_id)
    assert row["status"] == "failed" and len(row["fit_report"]["attempts"]) == 3
    assert "no program could be fitted" in result.stop_reason and result.best is None
    assert db.events(result.run_id, kind="round_failed")


class SilentRepairs(BrokenFirst):
    """Writes a program that does not compile, then answers every repair request with an error."""

    def generate(self, spec, *, failed_program=None, error=None, context=None):
        if error is None:
            return ProgramAnswer(program="def broken(:\n")
        self.repair_requests.append(error)
        return ProgramAnswer(program=None, error="the endpoint did not answer in 60 s")


def test_a_repair_that_brings_no_program_is_recorded_with_the_analysts_reason(tmp_path):
    db = RunDatabase(tmp_path / "run.db")
    result = refine(get_task("door_open"), SilentRepairs([]), db, small(max_attempts=3))
    (row,) = db.rounds(result.run_id)
    errors = [a["error"] for a in row["fit_report"]["attempts"]]
    assert "[syntax]" in errors[0]
    assert errors[1:] == ["the analyst wrote no program: the endpoint did not answer in 60 s"] * 2
    assert row["error"] == errors[-1] and errors[-1] in result.stop_reason


def _wait_for_committed_round(db_file, n, timeout=300):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db_file.exists():
            try:
                with sqlite3.connect(db_file, timeout=1) as conn:
                    if conn.execute("select count(*) from rounds where status='committed'").fetchone()[0] >= n:
                        return True
            except sqlite3.OperationalError:
                pass  # schema not created yet
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "refine_core.cli", "run", "--task", "door_open", "--run", str(run_dir),
           "--max-rounds", "3", "--eval-episodes", "1", "--max-steps", "150", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert _wait_for_committed_round(run_dir / "run.db", 1), "first round never committed"
        time.sleep(1.0)  # now somewhere inside the next round's fit / rollouts
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    db = RunDatabase(run_dir / "run.db")
    before = db.rounds(db.latest_run()["id"])
    done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    run_id = db.latest_run()["id"]
    after = db.rounds(run_id)
    assert [r["round"] for r in after] == list(range(len(after)))
    assert [r["program"] for r in after[: len(before)]] == [r["program"] for r in before]
    episodes = db.episodes(run_id)
    keys = episodes[["round", "kind", "episode"]].apply(tuple, axis=1)
    assert keys.is_unique, "an episode was logged twice"
    for (rnd, ep), n in db.load_steps(run_id, kind="diagnostic").groupby(["round", "episode"]).size().items():
        logged = episodes[(episodes["round"] == rnd) & (episodes["kind"] == "diagnostic") & (episodes["episode"] == ep)]
        assert int(logged["steps"].iloc[0]) == n
    assert db.run(run_id)["status"] == "finished"


# ----------------------------------------------------------------------------- the LLM path
SECRET = "sk-test-never-store-this-1234567890"


def _fenced(code):
    return f"Here you go.\n```python\n{code}\n```\nThat should work."


def _scripted_llm():
    program = starter_program("car_racing")
    revised = render("car_racing", ["car_corner_speed"])
    return by_role({
        "generate": [Reply.text("The car should steer toward the centre line."),  # no code: corrected
                     Reply.text(_fenced(program))],
        "diagnose": [Reply.status(429), Reply.text(_fenced("print('mean steer', round(df['act_steer'].mean(), 4))")),
                     Reply.text(_fenced("print('rows', len(df))"))],
        "revise": [Reply.status(500),
                   Reply.text("DECISION: more_tests\n" + _fenced("print('max |x|', round(df['tile0_x'].abs().max(), 4))")),
                   Reply.slow("DECISION: stop", delay_s=4.0),  # slower than the client timeout
                   Reply.text("DECISION: revise\nSteer from the tiles further ahead.\n" + _fenced(revised)),
                   Reply.text("DECISION: stop\nThe lookahead fixed the oscillation.")],
    })


def _config(server) -> AnalystConfig:
    return AnalystConfig(model="fake-model", base_url=server.base_url, api_key=SECRET, timeout_s=1.5,
                         max_attempts=4, backoff_s=0.01, backoff_max_s=0.05)


def _all_text(db_file) -> str:
    with sqlite3.connect(db_file) as conn:
        chunks = []
        for (table,) in conn.execute("select name from sqlite_master where type='table'"):
            for row in conn.execute(f"select * from [{table}]"):
                chunks.extend(str(v) for v in row)
    return "\n".join(chunks)


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_openai_path_end_to_end_then_replay_reproduces_it(tmp_path, capsys):
    task = get_task("car_racing")
    transcript = tmp_path / "transcript.jsonl"
    cfg = small(max_rounds=3, max_steps=60)
    with FakeOpenAIServer(responder=_scripted_llm(), api_key=SECRET) as server:
        analyst = make_analyst("record", config=_config(server), transcript=transcript)
        db = RunDatabase(tmp_path / "live.db")
        live = refine(task, analyst, db, cfg)
        auth = [{k.lower(): v for k, v in r.headers.items()}.get("authorization") for r in server.chat_requests]
        assert auth and all(a == f"Bearer {SECRET}" for a in auth), "the key travels only in the header"

    rounds = db.rounds(live.run_id)
    assert [r["decision"] for r in rounds] == ["program", "stop"]
    assert "# refine-edit: car_corner_speed" in rounds[1]["program"]
    assert len(db.analyses(live.run_id, 0)) == 2, "the more-tests answer ran on the same table"
    calls = db.llm_calls(live.run_id)
    assert {c["role"] for c in calls} >= {"generate", "diagnose", "revise"}
    assert sum(c["tokens_in"] or 0 for c in calls) > 0 and sum(c["tokens_out"] or 0 for c in calls) > 0
    assert SECRET not in _all_text(tmp_path / "live.db")
    assert SECRET not in capsys.readouterr().out
    assert SECRET not in transcript.read_text()

    # replay: no server, the same programs and metrics
    replayed_db = RunDatabase(tmp_path / "replay.db")
    replay = refine(task, make_analyst("replay", transcript=transcript), replayed_db, cfg)
    again = replayed_db.rounds(replay.run_id)
    assert [r["program"] for r in again] == [r["program"] for r in rounds]
    assert [json.dumps(r["metrics"], sort_keys=True) for r in again] == \
           [json.dumps(r["metrics"], sort_keys=True) for r in rounds]


# ----------------------------------------------------------------------------- the method's rules
class Recording(Analyst):
    """The offline analyst, with every question it is asked written down."""

    name, is_llm = "recording", False
    reads_demonstration = True  # it defers to the offline analyst, whose checks read the demonstration

    def __init__(self, tests_forever: bool = False):
        self.inner = OfflineAnalyst()
        self.schemas, self.contexts, self.revisions = [], [], []
        self.tests_forever = tests_forever

    def generate(self, spec, *, failed_program=None, error=None, context=None):
        self.contexts.append(context)
        return self.inner.generate(spec, failed_program=failed_program, error=error, context=context)

    def diagnose(self, spec, program, schema, *, demo=False):
        self.schemas.append(list(schema))
        answer = self.inner.diagnose(spec, program, schema, demo=demo)
        answer.conversation = [{"role": "assistant", "content": "diagnostic exchange"}]
        return answer

    def revise(self, spec, program, results, *, conversation=None, demo=False):
        from refine_core.analyst.base import Decision

        self.revisions.append((results, conversation))
        if self.tests_forever:
            return Decision("tests", tests="print('again', len(df))", reasoning="not sure yet",
                            conversation=[*(conversation or []), {"role": "assistant", "content": "more"}])
        return self.inner.revise(spec, program, results, conversation=conversation, demo=demo)


def test_expert_relabels_are_off_unless_asked_for(tmp_path):
    task = get_task("door_open")
    off, on = Recording(), Recording()
    refine(task, off, RunDatabase(tmp_path / "off.db"), small(max_rounds=1, max_steps=20))
    refine(task, on, RunDatabase(tmp_path / "on.db"), small(max_rounds=1, max_steps=20, expert_labels=True))
    assert not [c for c in off.schemas[0] if c.startswith("expert_")]
    assert [c for c in on.schemas[0] if c.startswith("expert_")] == [f"expert_{a}" for a in task.spec.action_names]
    with RunDatabase(tmp_path / "on.db") as db:
        steps = db.load_steps(db.latest_run()["id"], kind="diagnostic")
        assert steps["expert_dx"].notna().all(), "the labelled table holds what the schema promised"


def test_more_tests_are_capped_and_continue_the_same_exchange(tmp_path):
    analyst = Recording(tests_forever=True)
    db = RunDatabase(tmp_path / "run.db")
    result = refine(get_task("door_open"), analyst, db, small(max_rounds=2, max_steps=15, max_test_requests=3))
    assert len(analyst.revisions) == 4, "three more-tests answers run, then the cap ends the round"
    assert analyst.revisions[0][1] == [{"role": "assistant", "content": "diagnostic exchange"}]
    assert analyst.revisions[1][1][-1]["content"] == "more", "each revision continues the last answer"
    assert analyst.revisions[1][0].startswith("again"), "the analyst reads the new tests' printed results"
    assert len(db.analyses(result.run_id, 0)) == 4
    assert "cap of 3" in result.stop_reason and len(result.rounds) == 1


def test_a_repair_continues_the_exchange_that_wrote_the_failed_program(tmp_path):
    class BadRevision(Recording):
        def revise(self, spec, program, results, *, conversation=None, demo=False):
            from refine_core.analyst.base import Decision

            if not self.revisions:
                self.revisions.append((results, conversation))
                return Decision("program", program="class OpenDoorPolicy: pass\n", reasoning="rewrite",
                                conversation=[{"role": "assistant", "content": "the revision exchange"}])
            return super().revise(spec, program, results, conversation=conversation, demo=demo)

    analyst = BadRevision()
    refine(get_task("door_open"), analyst, RunDatabase(tmp_path / "run.db"), small(max_rounds=2, max_steps=15))
    repairs = [c for c in analyst.contexts if c]
    assert repairs and repairs[0][-1]["content"] == "the revision exchange"


def test_a_robot_run_never_records_the_simulated_expert(tmp_path):
    from refine_core.rollout.demo import DemonstrationError

    db = RunDatabase(tmp_path / "run.db")
    with pytest.raises(DemonstrationError, match="record one on the robot"):
        refine(get_task("door_open"), OfflineAnalyst(), db, small(demonstration="recorded"))
    assert db.load_demonstration(db.latest_run()["id"]) is None


def test_a_robot_run_refuses_the_simulated_experts_demonstration_already_in_the_run(tmp_path):
    from refine_core.rollout.demo import DemonstrationError, record_demonstration

    db = RunDatabase(tmp_path / "run.db")
    run_id = db.create_run("door_open")
    record_demonstration(get_task("door_open"), max_steps=10).save(db, run_id)
    with pytest.raises(DemonstrationError, match="scripted expert \\(sim\\).*recorded on the robot"):
        refine(get_task("door_open"), OfflineAnalyst(), db, small(demonstration="recorded"))
    assert not db.rounds(run_id)


def test_a_fit_refuses_a_demonstration_from_another_source_or_with_other_columns(tmp_path):
    """A robot's fitter takes only that robot's teleoperated demonstration, and no fitter takes
    observation columns in another order (programs read their inputs by position)."""
    import dataclasses

    from refine_core.backends import LocalFitter, check_demonstration
    from refine_core.rollout.demo import (
        SIMULATED_EXPERT,
        DemonstrationError,
        record_demonstration,
        recorded_demonstration,
    )

    task = get_task("door_open")
    expert = record_demonstration(task, max_steps=10)
    assert expert.source == SIMULATED_EXPERT and expert.columns == tuple(task.spec.observation_columns)
    arm = LocalFitter(task, source="teleop (arm_real)").fit(starter_program("door_open"), expert)
    assert arm.failed and "comes from scripted expert (sim)" in arm.error and "teleop (arm_real)" in arm.error

    columns = list(task.spec.observation_columns)
    teleop = recorded_demonstration(task, expert.table[columns].to_numpy(), expert.actions,
                                    source="teleop (arm_real)", columns=columns)
    assert check_demonstration(task, teleop, "teleop (arm_real)") is None
    swapped = dataclasses.replace(teleop, columns=(columns[1], columns[0], *columns[2:]))
    assert "another order" in check_demonstration(task, swapped)
    with pytest.raises(DemonstrationError, match="column 0"):
        recorded_demonstration(task, expert.table[columns].to_numpy(), expert.actions, source="teleop (x)",
                               columns=swapped.columns)


def test_a_demonstration_of_another_task_is_refused_by_the_fit(tmp_path):
    from refine_core.backends import LocalFitter
    from refine_core.rollout.demo import record_demonstration

    door_demo = record_demonstration(get_task("door_open"), max_steps=10)
    fit = LocalFitter(get_task("car_racing")).fit(starter_program("car_racing"), door_demo)
    assert fit.failed and "recorded for task 'door_open'" in fit.error


@pytest.mark.slow
def test_rl_after_refinement_is_a_committed_round_of_its_own(tmp_path):
    db = RunDatabase(tmp_path / "run.db")
    config = small(max_rounds=1, max_steps=30, rl_resets=4, rl={"group_size": 2, "window": 10})
    result = refine(get_task("door_open"), OfflineAnalyst(), db, config)
    rounds = db.rounds(result.run_id)
    assert [r["decision"] for r in rounds][-1] == "rl" and len(rounds) == 2
    assert rounds[1]["fit_report"]["from_round"] == 0 and rounds[1]["fit_report"]["rl"]["resets"] == 4
    assert all(c["steps_mean"] <= 30 for c in rounds[1]["fit_report"]["rl"]["curve"]), "the run's step cap holds"
    assert rounds[1]["program"] == rounds[0]["program"], "RL keeps the structure"
    assert db.round_weights(result.run_id, 1).keys() == db.round_weights(result.run_id, 0).keys()
    assert set(db.episodes(result.run_id, 1)["kind"]) == {"selection", "eval"}
    updates = db.rl_updates(result.run_id, 1)
    assert list(updates["update"]) == [1, 2], "every update is recorded"


class ReadsTables(Analyst):
    """A language-model stand-in whose diagnostics print what the analysis code received, and
    which records whether it was told of the demonstration table."""

    name, is_llm = "reads-tables", True

    def __init__(self):
        self.told = []

    def generate(self, spec, *, failed_program=None, error=None, context=None):
        return ProgramAnswer(program=starter_program(spec.name), reasoning="the starter")

    def diagnose(self, spec, program, schema, *, demo=False):
        from refine_core.analyst.base import DiagnosticsAnswer

        self.told.append(("diagnose", demo))
        code = ("print('df rows', len(df))\n"
                "print('demo', 'absent' if demo is None else f'{len(demo)} rows')\n")
        return DiagnosticsAnswer(code=code, reasoning="what the code receives")

    def revise(self, spec, program, results, *, conversation=None, demo=False):
        from refine_core.analyst.base import Decision

        self.told.append(("revise", demo))
        return Decision("stop", reasoning="DECISION: stop\nenough")


def test_the_analysis_code_reads_the_rollout_only_unless_the_run_gives_it_the_demonstration(tmp_path, monkeypatch):
    """The published method's analysis code takes the rollout table only: the loop passes the
    demonstration to the sandbox (and tells the analyst of it) only with `diagnostics_see_demo`,
    and the run records which it was."""
    import refine_core.loop as loop

    passed = []
    real = loop.run_diagnostics

    def spy(code, table, demo_table=None, **kwargs):
        passed.append(demo_table)
        return real(code, table, demo_table, **kwargs)

    monkeypatch.setattr(loop, "run_diagnostics", spy)
    task = get_task("door_open")
    runs = {}
    for name, see in (("default", None), ("off", False), ("on", True)):
        analyst, db = ReadsTables(), RunDatabase(tmp_path / f"{name}.db")
        result = refine(task, analyst, db, small(max_rounds=1, max_steps=12, diagnostics_see_demo=see))
        runs[name] = (analyst, db, result)
    for name in ("default", "off"):
        analyst, db, result = runs[name]
        assert "demo absent" in db.analyses(result.run_id, 0)[0]["stdout"]
        assert analyst.told == [("diagnose", False), ("revise", False)]
        assert db.run(result.run_id)["config"]["diagnostics_see_demo"] is False
    analyst, db, result = runs["on"]
    assert "demo 500 rows" in db.analyses(result.run_id, 0)[0]["stdout"]
    assert analyst.told == [("diagnose", True), ("revise", True)]
    assert db.run(result.run_id)["config"]["diagnostics_see_demo"] is True
    assert [d is None for d in passed] == [True, True, False], "the sandbox got the demonstration only when asked"
    # the offline analyst's checks compare with the demonstration: it has it on unless told otherwise
    assert loop.resolve_defaults(RefineConfig(), task.spec, OfflineAnalyst()).diagnostics_see_demo is True
    assert loop.resolve_defaults(RefineConfig(diagnostics_see_demo=False), task.spec,
                                 OfflineAnalyst()).diagnostics_see_demo is False


def test_episodes_execute_the_mode_the_tasks_published_results_were_verified_in_unless_told(tmp_path):
    """The car's published figures were verified with the action mean, the door's with sampled
    actions (seeds 0-9, draws seeded by the seed): a run takes its task's mode by default and
    records it; `action_mode` overrides it."""
    door = get_task("door_open").spec
    assert (door.eval_mode, door.eval_seeds, door.demo_seed) == ("sample", tuple(range(10)), 500)
    car = get_task("car_racing").spec
    assert (car.eval_mode, car.eval_seeds, car.demo_seed) == ("mean", tuple(range(1000, 1010)), 0)
    for task, given, want in (("door_open", None, "sample"), ("door_open", "mean", "mean")):
        db = RunDatabase(tmp_path / f"{task}-{given}.db")
        result = refine(get_task(task), ReadsTables(), db, small(max_rounds=1, max_steps=12, action_mode=given))
        assert db.run(result.run_id)["config"]["action_mode"] == want
        steps = db.load_steps(result.run_id, round=0, kind="diagnostic")
        differs = (steps["act_dx"] - steps["mean_dx"].clip(-1, 1)).abs().max() > 0
        assert differs == (want == "sample"), "sampled episodes execute draws, mean episodes the mean"
