"""`refine up door_sim` end to end over real DDS on loopback: sim -> learner -> logger ->
analysis -> new program -> refit -> next round, run by refine_core's own `refine()`. Also the
profile planning of `refine up` and the action-latency benchmark."""

from __future__ import annotations

import json
import sqlite3

import pytest

import refine_core.loop
from refine_core.rollout.schema import RolloutSchema
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task
from refine_ros.bringup import ProfileError
from refine_ros.bringup.up import EXIT_STOPPED, UpOptions, parse_set, plan_profile, run_profile

MAX_STEPS = 30
TINY = ["analysis_node.selection_episodes=1", "analysis_node.eval_episodes=1", "sim_node.publish_markers=false"]


# ------------------------------------------------------------------------- planning (no DDS)
def test_options_reach_the_node_parameters(tmp_path):
    profile = plan_profile("door_sim", UpOptions(run_dir=tmp_path, analyst="replay", transcript=tmp_path / "t.jsonl",
                                                 max_rounds=4, diagnostic_episodes=1, max_steps=MAX_STEPS, sets=TINY))
    learner, analysis = profile.node("learner_node"), profile.node("analysis_node")
    assert analysis.parameters["max_steps"] == MAX_STEPS and analysis.parameters["diagnostic_episodes"] == 1
    assert analysis.parameters["selection_episodes"] == 1 and learner.parameters["run_dir"] == str(tmp_path)
    assert analysis.parameters["max_rounds"] == 4 and analysis.parameters["analyst"] == "replay"
    assert "max_rounds" not in learner.parameters and "diagnostic_episodes" not in learner.parameters, \
        "the method's settings have one home: the analysis node that runs refine()"
    assert analysis.parameters["transcript"] == str(tmp_path / "t.jsonl")
    assert profile.node("rollout_logger").parameters["run_dir"] == str(tmp_path)
    assert profile.node("sim_node").parameters["publish_markers"] is False
    assert profile.rviz is False


def test_real_profiles_stay_dry_unless_live(tmp_path):
    assert plan_profile("arm_real", UpOptions(run_dir=tmp_path)).dry_run is True
    assert plan_profile("arm_real", UpOptions(run_dir=tmp_path, live=True)).dry_run is False


@pytest.mark.parametrize("text", ["noequals", "nodot=3", ".param=1", "node.=1", "sim_node.seed=[1,"])
def test_bad_sets_are_profile_errors(text):
    with pytest.raises(ProfileError):
        parse_set(text)


def test_a_whole_number_set_on_a_double_parameter_is_written_as_a_double(tmp_path):
    """`--set demo_recorder.reset_time=10` (docs/ROBOT_CHECKLIST.md): YAML reads an int, and a node started from a
    params file (`--processes`, ros2 launch) refuses an int for a double parameter."""
    recorder = plan_profile("arm_real_record_demo", UpOptions(run_dir=tmp_path, sets=["demo_recorder.reset_time=3",
                                                                                       "demo_recorder.takes=2"]))
    params = recorder.node("demo_recorder").parameters
    assert params["reset_time"] == 3.0 and isinstance(params["reset_time"], float)
    assert params["takes"] == 2 and isinstance(params["takes"], int), "an int parameter stays an int"


def test_set_on_an_unknown_node_is_a_profile_error(tmp_path):
    with pytest.raises(ProfileError, match="no node 'ghost'"):
        plan_profile("door_sim", UpOptions(run_dir=tmp_path, sets=["ghost.x=1"]))
    with pytest.raises(ProfileError, match="unknown profile"):
        plan_profile("moon_base", UpOptions(run_dir=tmp_path))


# ------------------------------------------------------------------------- the round trip
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """Two rounds through the graph, with refine_core's inner loop watched: the analysis node
    must reach it through `refine_core.loop.refine`, the only implementation of the method."""
    run_dir = tmp_path_factory.mktemp("up") / "run"
    options = UpOptions(run_dir=run_dir, analyst="offline", max_rounds=2, diagnostic_episodes=1, max_steps=MAX_STEPS,
                        sets=TINY, timeout_s=400)
    inner_loop_rounds = []
    original = refine_core.loop.diagnose_and_revise

    def watched(run, program, diagnostics, rollouts):
        inner_loop_rounds.append(len(rollouts.diagnostic))
        return original(run, program, diagnostics, rollouts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(refine_core.loop, "diagnose_and_revise", watched)
        code = run_profile("door_sim", options)
    return run_dir, code, inner_loop_rounds


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(500)
def test_two_rounds_over_dds_fill_the_database(finished_run):
    run_dir, code, _ = finished_run
    assert code == EXIT_STOPPED
    spec = get_task("door_open").spec
    with RunDatabase(run_dir, create=False) as db:
        run = db.latest_run()
        rounds = db.rounds(run["id"])
        assert [(r["round"], r["status"]) for r in rounds] == [(0, "committed"), (1, "committed")]
        assert all(r["has_weights"] for r in rounds), "the learner's fitted weights are committed"
        assert rounds[0]["decision"] == "program"
        assert rounds[1]["program"] != rounds[0]["program"], "round 1 refits the revised program"
        if rounds[0].get("next_program"):
            assert rounds[1]["program"] == rounds[0]["next_program"]
        assert run["status"] == "finished"
        for r in rounds:
            steps = db.load_steps(run["id"], r["round"], kind="diagnostic")
            assert list(steps["step"]) == list(range(MAX_STEPS))
            info = r["info_schema"]
            schema = RolloutSchema.for_task(spec, (*info["weights"], *info["latents"])).columns
            assert set(steps.columns) == set(schema), f"round {r['round']}: the logged table is the schema"
            for column in ("act_dx", "mean_gripper", "next_handle_x", info["latents"][0]):
                assert steps[column].notna().all(), column
            episodes = db.episodes(run["id"], r["round"])
            assert sorted(episodes["kind"]) == ["diagnostic", "eval", "selection"]
            assert (episodes["complete"] == 1).all() and (episodes["steps"] == MAX_STEPS).all()
            selection = episodes[episodes["kind"] == "selection"]["metric"].iloc[0]
            assert r["metrics"]["selection"]["metric_mean"] == pytest.approx(selection, rel=1e-6), \
                "the learner's summary and the logger's rows describe the same episode"
            assert db.analyses(run["id"], r["round"]), f"round {r['round']} has no analyses"
        kinds = [e["kind"] for e in db.events(run["id"])]
        assert kinds.count("round_committed") == 2


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_finished_run_is_not_run_again(finished_run):
    run_dir, _code, _ = finished_run
    before = sqlite3.connect(run_dir / "run.db").execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    code = run_profile("door_sim", UpOptions(run_dir=run_dir, max_rounds=2, diagnostic_episodes=1, max_steps=MAX_STEPS,
                                             sets=TINY, timeout_s=120))
    assert code == EXIT_STOPPED
    with RunDatabase(run_dir, create=False) as db:
        assert len(db.rounds(db.latest_run()["id"])) == 2
    after = sqlite3.connect(run_dir / "run.db").execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    assert after == before


@pytest.mark.ros
@pytest.mark.timeout(180)
def test_action_latency_benchmark_answers_every_observation():
    from refine_ros.bench.latency import bench_latency

    result = bench_latency(rate_hz=50.0, seconds=2.0)
    print(json.dumps(result))
    assert result["finished"]
    assert result["actions"] >= 0.95 * result["observations"]
    assert 0 < result["ros_action_latency_ms_p50"] <= result["ros_action_latency_ms_p99"]
    # the 10 ms target is the benchmark's verdict; this shared CI machine only bounds it loosely
    assert result["ros_action_latency_ms_p99"] < 100.0


@pytest.mark.ros
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_run_killed_before_a_commit_resumes_without_duplicate_rows(finished_run, tmp_path):
    """As after a SIGKILL between the logger's commits and the analysis node's round commit:
    round 1's steps are on disk but its round row is not. The rerun redoes round 1 from round
    0's committed next program, and the logger replaces the stale episode rows."""
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run[0], run_dir)
    with RunDatabase(run_dir) as db:
        run_id = db.latest_run()["id"]
        program = db.round(run_id, 1)["program"]
        with db.transaction():
            db.conn.execute("DELETE FROM rounds WHERE run_id = ? AND round = 1", (run_id,))
            db.conn.execute("DELETE FROM analyses WHERE run_id = ? AND round = 1", (run_id,))
        db.update_run(run_id, status="running")
    code = run_profile("door_sim", UpOptions(run_dir=run_dir, max_rounds=2, diagnostic_episodes=1, max_steps=MAX_STEPS,
                                             sets=TINY, timeout_s=300))
    assert code == EXIT_STOPPED
    with RunDatabase(run_dir, create=False) as db:
        rounds = db.rounds(run_id)
        assert [(r["round"], r["status"]) for r in rounds] == [(0, "committed"), (1, "committed")]
        assert rounds[1]["program"] == program
        steps = db.load_steps(run_id, 1, kind="diagnostic")
        assert list(steps["step"]) == list(range(MAX_STEPS)), "diagnostic steps duplicated or lost"
        assert len(db.load_steps(run_id, 1)) == MAX_STEPS, "only the diagnostic steps are stored"
        episodes = db.episodes(run_id, 1)
        assert len(episodes) == 3 and (episodes["steps"] == MAX_STEPS).all()
        assert len(db.analyses(run_id, 1)) >= 1


# ------------------------------------------------------------------------- one implementation
@pytest.mark.ros
@pytest.mark.slow
def test_the_node_graph_runs_refine_cores_own_loop(finished_run):
    """Every round of the graph went through refine_core.loop's inner loop, with the table the
    logger committed (MAX_STEPS diagnostic rows); there is no second copy of the method."""
    run_dir, code, inner_loop_rounds = finished_run
    assert code == EXIT_STOPPED
    assert inner_loop_rounds == [MAX_STEPS, MAX_STEPS]
    with RunDatabase(run_dir, create=False) as db:
        run_id = db.latest_run()["id"]
        episodes = db.episodes(run_id)
        assert not db.events(run_id, kind="logger_incomplete"), "the analysis node found every episode it asked for"
    rounds_only = sorted((int(r), k, int(e)) for r, k, e in episodes[["round", "kind", "episode"]].dropna().itertuples(
        index=False))
    assert rounds_only == [(r, k, 0) for r in (0, 1) for k in ("diagnostic", "eval", "selection")]


def test_the_analysis_node_has_no_round_logic_of_its_own():
    """The node wires refine() to the graph; the method's steps appear only in refine_core."""
    import ast
    from pathlib import Path

    import refine_ros.nodes.analysis_node as node

    tree = ast.parse(Path(node.__file__).read_text())
    called = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
              for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "refine" in called
    assert not called & {"generate", "diagnose", "revise", "run_diagnostics", "commit_round"}
