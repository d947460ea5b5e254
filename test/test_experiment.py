"""`refine experiment --smoke`: every condition of the published table, tiny budgets."""

import json

import pandas as pd
import pytest
from experiment_smoke import smoke

from refine_core.cli import main
from refine_core.experiment.conditions import Program, conditions

PROGRAMS = [Program("mlp", "mlp", "MLP", ""), Program("starter", "zero_shot", "zero-shot", ""),
            Program("refined", "refined", "refined", "")]
CONDITIONS = [c.name for c in conditions(PROGRAMS, 1, 2)]


@pytest.mark.slow  # a whole refinement run: out of make test-fast
def test_smoke_runs_every_condition_and_writes_the_outputs(tmp_path):
    folder = smoke(tmp_path, "car_racing", "--workers", "2")
    for name in ("table.md", "episodes.csv", "pvalues.md", "summary.json", "experiment.db",
                 "refined_program.py", "refinement_rounds.png", "rl_curves.png"):
        assert (folder / name).exists(), name
    episodes = pd.read_csv(folder / "episodes.csv")
    assert sorted(episodes["condition"].unique()) == sorted(CONDITIONS)
    assert (episodes.groupby("condition").size() == 2).all()
    table = (folder / "table.md").read_text()
    assert "refined structure [offline catalogue] + RL" in table and "scaled x0.002" in table
    assert "| analyst calls | resets (published count) | extra resets |" in table
    assert "| mean action (primary): return (mean ± std) | success | sampled | success | RL weights |" in table
    assert "final: update 2/2" in table and "window 10 (published 150)" in table
    assert "[RL: ours]" in table and "[RL: published settings]" in table and "accepted: " in table
    assert "RL rows [published settings]: group_size 2 (published 20); window 10 (published 150)" in table
    assert "RL rows [ours]: " in table and "trust region: per-step KL" in table
    assert "Deployed mode (what a robot runs" in table and "| vs own IL, deployed mode |" in table
    assert "best on the selection seeds" not in table, "the published rule only, unless asked"
    assert "no departures" not in table.lower() and "one person's episode" in table
    assert "**departs**: demonstration: one episode of our scripted expert" in table and "seed 0 " in table
    assert "**departs**: evaluation: primary column the action mean on seeds 1000-1001" in table, "2 seeds, not 10"
    assert "offline catalogue (not an LLM)" in table and "task description" in table.lower()
    pvalues = (folder / "pvalues.md").read_text()
    assert "## mean action (primary)" in pvalues and "refined_rl_low | refined_il" in pvalues
    updates = pd.read_csv(folder / "rl_updates.csv")
    assert set(updates["condition"]) == {c for c in CONDITIONS if "_rl_" in c}
    assert {"return_mean", "clip_frac", "approx_kl", "entropy", "ratio_q50", "params"} <= set(updates.columns)
    assert (folder / "rl_updates_refined_rl_high.png").exists()
    from refine_core.store.experiment import read_table

    stored = read_table(folder / "experiment.db", "episodes")
    assert len(stored) == len(episodes) and set(stored["condition"]) == set(CONDITIONS)
    assert len(read_table(folder / "experiment.db", "conditions")) == len(CONDITIONS)


def test_rl_rows_under_each_preset_spell_out_their_settings():
    from refine_core.cli import build_parser
    from refine_core.experiment.runner import ExperimentOptions, ExperimentSetupError, rl_config
    from refine_core.learn.rl import PUBLISHED, RLConfig

    def parse_rl_settings(items: list[str]) -> dict:
        argv = ["experiment", "--task", "car_racing", *(a for item in items for a in ("--rl-set", item))]
        return ExperimentOptions.from_args(build_parser().parse_args(argv)).rl

    mlp_program, refined = PROGRAMS[0], PROGRAMS[2]
    settings = parse_rl_settings(["std_scale=0.25", 'param_lr={"log_std": 0}', "checkpoint=final"])
    assert settings == {"std_scale": 0.25, "param_lr": {"log_std": 0}, "checkpoint": "final"}
    with pytest.raises(ValueError, match="not a RLConfig field"):
        parse_rl_settings(["learning_rate=0.1"])
    opts = ExperimentOptions(task="car_racing", rl={"std_scale": 0.5})
    ours = rl_config(mlp_program, 400, opts)
    assert ours["lr"] == RLConfig().lr and ours["std_scale"] == 0.5 and ours["reset_budget"] == 400
    assert ours["checkpoint"] == "accepted" and ours["target_kl"] == RLConfig().target_kl and ours["select_every"] > 0
    published = rl_config(mlp_program, 400, opts, "published")
    assert {k: published[k] for k in PUBLISHED} == PUBLISHED, "--rl-set changes our rows only"
    assert (published["checkpoint"], published["select_every"], published["target_kl"]) == ("final", 0, None)
    assert RLConfig(**published).preset_name() == "published" and RLConfig(**ours).preset_name() == "custom"
    opts.mlp_rl_lr = 3e-4
    assert rl_config(mlp_program, 400, opts)["lr"] == 3e-4
    assert rl_config(mlp_program, 400, opts, "published")["lr"] == 0.007
    assert rl_config(refined, 400, opts)["lr"] == RLConfig().lr
    assert rl_config(refined, 0, opts) is None
    with pytest.raises(ExperimentSetupError, match="std_scale"):
        rl_config(refined, 400, ExperimentOptions(task="car_racing", rl={"std_scale": 0}))
    with pytest.raises(ExperimentSetupError, match="--best-checkpoint"):
        rl_config(refined, 400, ExperimentOptions(task="car_racing", rl={"checkpoint": "best"}))
    best = rl_config(refined, 400, ExperimentOptions(task="car_racing", best_checkpoint=True), "published")
    assert best["checkpoint"] == "final" and best["select_every"] == 5


def test_conditions_under_each_preset_and_best_twins_of_the_published_rows_only_when_asked():
    names = [c.name for c in conditions(PROGRAMS[1:2], 400, 2000, best=True)]
    assert names == ["starter_il", "starter_rl_low", "starter_rl_high", "starter_rl_low_published",
                     "starter_rl_low_published_best", "starter_rl_high_published", "starter_rl_high_published_best"]
    rows = {c.name: c for c in conditions(PROGRAMS[2:], 400, 2000, best=True)}
    twin = rows["refined_rl_low_published_best"]
    assert twin.checkpoint == "best" and twin.published_key is None and "best checkpoint" in twin.label
    assert rows["refined_rl_low_published"].published_key == ("refined", "rl_low")
    assert "[RL: published settings]" in rows["refined_rl_low_published"].label
    ours = rows["refined_rl_low"]
    assert ours.published_key is None and "[RL: ours]" in ours.label and ours.checkpoint == "accepted"
    assert ours.il_condition == "refined_il" and rows["refined_il"].published_key == ("refined", "il")


def test_an_rl_row_is_compared_with_its_own_il_row_seed_by_seed():
    from refine_core.experiment.outputs import paired_against_il, verdict

    il, rl = conditions(PROGRAMS[2:], 400, 2000)[:2]
    seeds = range(1000, 1005)
    base = [900.0, 910.0, 905.0, 100.0, 920.0]
    worse = [880.0, 895.0, 890.0, 90.0, 900.0]  # worse on every track
    episodes = pd.DataFrame([{"condition": il.name, "seed": s, "mean_action_metric": v} for s, v in zip(seeds, base, strict=True)]
                            + [{"condition": rl.name, "seed": s, "mean_action_metric": v} for s, v in zip(seeds, worse, strict=True)])
    out = paired_against_il(episodes, rl, "mean_action_metric", True)
    assert out["vs_il_delta"] == pytest.approx(-16.0) and out["vs_il_p_worse"] < 0.01 and out["vs_il_p_better"] > 0.99
    assert verdict(out).startswith("worse (-16")
    # lower is better (the door): the same numbers say RL is better
    assert verdict(paired_against_il(episodes, rl, "mean_action_metric", False)).startswith("better")
    same = episodes.assign(mean_action_metric=base * 2)
    assert verdict(paired_against_il(same, rl, "mean_action_metric", True)).startswith("no difference")
    assert paired_against_il(episodes, il, "mean_action_metric", True) == {}


def test_the_door_table_puts_sampled_actions_first_and_lists_every_departure():
    """The door's published figures were verified with sampled actions on seeds 0-9: its table's
    primary column is the sampled one, and each refinement's description, demonstration access,
    demonstration seed, start and model is an item of the protocol, marked where it departs."""
    from types import SimpleNamespace

    from refine_core.experiment import outputs
    from refine_core.experiment.runner import Refinement
    from refine_core.tasks.registry import get_task

    spec = get_task("door_open").spec
    row = {"condition": "llm_refined_il", "label": "refined + IL", "analyst": "LLM m", "analyst_calls": 4,
           "published_resets": 2, "extra_resets": 6, "mean_action_metric_mean": 0.2, "mean_action_metric_std": 0.1,
           "mean_action_success_rate": 0.5, "metric_mean": 0.1, "metric_std": 0.05, "success_rate": 0.9,
           "rl_checkpoint": "-", "rl_departures": "", "published_key": "refined/il"}
    earlier = {"description": "published", "analyst": {"language_model": True, "models": ["m"]},
               "start": {"kind": "program", "label": "file a.py"}, "settings": {"selection_episodes": 3},
               "summary_version": 1, "demonstration": {"seed": 0}}
    now = {**earlier, "description": "published", "diagnostics_see_demo": False, "start": {"kind": "zero-shot"},
           "demonstration": {"seed": 500}, "summary_version": 2}
    opts = SimpleNamespace(seeds=10, scale=1.0, il={}, smoke=False, best_checkpoint=False, low_resets=400,
                           high_resets=2000)
    table = outputs.table_markdown(pd.DataFrame([row]), spec, opts, [Refinement("llm_refined", "old", earlier, []),
                                                                      Refinement("llm_refined", "new", now, [])])
    assert "| sampled (primary): min_handle_target_distance (mean ± std) | success | mean action | success |" in table
    assert "| refined + IL | LLM m | 4 | 2 | 6 | 0.100 ± 0.050 | 90% | 0.200 ± 0.100 | 50% | - | 0.110 |" in table
    assert ("as published: evaluation: primary column sampled actions on seeds 0-9 (environment seed i, action draws "
            "seeded by i)") in table and "as the authors verified the published figures" in table
    old, new = "the LLM run old", "the LLM run new"
    assert f"**departs**: {old}: demonstration in the diagnostics: **on**" in table, "a version-1 summary's code read it"
    assert f"as published: {new}: demonstration in the diagnostics: off" in table
    assert f"**departs**: {old} was refined against the demonstration on seed 0" in table
    assert f"**departs**: {old} started from a given program (file a.py)" in table
    assert f"as published: {new} started from the analyst's zero-shot program" in table
    assert f"**departs**: {new}: model m (the published runs used GPT-5-mini)" in table
    assert "**departs**: demonstration: one episode of our scripted expert" in table and "seed 500" in table
    departures = outputs.protocol_departures(pd.DataFrame([row]), spec, opts, [Refinement("k", "new", now, [])])
    assert not any("evaluation" in d or "diagnostics: off" in d for d in departures)
    opts.seeds = 5
    assert any(d.startswith("evaluation") for d in outputs.protocol_departures(pd.DataFrame([row]), spec, opts, []))


def test_from_run_refuses_what_is_not_an_llm_run(tmp_path, capsys):
    assert main(["experiment", "--task", "car_racing", "--smoke", "--no-offline-rows"]) == 2
    assert "give --from-run" in capsys.readouterr().err
    (tmp_path / "summary.json").write_text("{}")
    assert main(["experiment", "--task", "car_racing", "--smoke", "--out", str(tmp_path / "o"),
                 "--from-run", str(tmp_path)]) == 2
    assert "not a run summary" in capsys.readouterr().err


def test_a_run_from_a_given_program_has_a_start_row_standing_for_no_published_figure():
    from refine_core.experiment.runner import run_programs

    def round_(n, sha, decision, calls):
        return {"round": n, "status": "committed", "program_sha256": sha, "decision": decision,
                "tests_requested": 0, "calls_by_role": calls}

    summary = {"first_round": 0, "best_round": 1, "start": {"kind": "program", "label": "file mine.py (abc)"},
               "analyst": {"language_model": True, "models": ["m"]},
               "rounds": [round_(0, "a", "program", {"diagnose": 1, "revise": 1}),
                          round_(1, "b", "stop", {"diagnose": 1, "revise": 1})],
               "programs": {"a": "PROGRAM A", "b": "PROGRAM B"},
               "totals": {"calls": 4, "resets": {"diagnostic": 2, "selection": 6, "eval": 20}}}
    start, refined = run_programs(summary, "llm", "LLM run x", "LLM m")
    assert (start.key, start.role, start.source, start.calls, start.analyst) == (
        "llm_zero_shot", "start", "PROGRAM A", 0, "given program")
    assert "start program (file mine.py (abc))" in start.label
    assert (refined.role, refined.source, refined.calls, refined.resets) == (
        "refined", "PROGRAM B", 4, {"diagnostic": 2, "selection": 6})
    from refine_core.tasks.car_racing.published import RESULTS as PUBLISHED_CAR

    assert all(PUBLISHED_CAR.get(c.published_key) is None for c in conditions([start], 400, 2000))


def test_an_earlier_row_is_reused_only_with_the_same_program_settings_and_il_row(tmp_path):
    from refine_core.experiment import reuse
    from refine_core.experiment.runner import ExperimentOptions, rl_config

    refined = PROGRAMS[2]
    config = rl_config(refined, 400, ExperimentOptions(task="car_racing"), "published")
    il = pd.DataFrame({"seed": [1000, 1001], "metric": [900.0, 880.0], "mean_action_metric": [910.0, 905.0],
                       "return": [900.0, 880.0], "mean_action_return": [910.0, 905.0]})
    rl = il.assign(metric=[800.0, 700.0])
    folder = tmp_path / "earlier"
    folder.mkdir()
    pd.concat([il.assign(condition="refined_il"), rl.assign(condition="refined_rl_low")]).to_csv(
        folder / "episodes.csv", index=False)
    older = {k: v for k, v in config.items() if k not in ("target_kl", "kl_backtracks", "selection_mode",
                                                           "accept_alpha")}  # a record from before the trust region
    (folder / "summary.json").write_text(json.dumps({"rl": {"refined_rl_low": {
        "checkpoint": "final", "updates": 20, "resets": 400, "config": {**older, "select_every": 5}}}}))
    pd.DataFrame([{"condition": "refined_rl_low", "update": 1, "return_mean": 1.0, "params": "{}"}]).to_csv(
        folder / "rl_updates.csv", index=False)
    (folder / "program_refined.py").write_text("SOURCE")
    earlier = reuse.load(folder)
    assert reuse.find(earlier, "refined", "SOURCE", il, config) == "refined_rl_low", "selection fields do not matter"
    assert reuse.find(earlier, "refined", "OTHER SOURCE", il, config) is None
    assert reuse.find(earlier, "refined", "SOURCE", il.assign(metric=[900.0, 880.5]), config) is None, \
        "an IL row that does not reproduce pins nothing"
    assert reuse.find(earlier, "refined", "SOURCE", il, {**config, "lr": 0.001}) is None
    ours = rl_config(refined, 400, ExperimentOptions(task="car_racing"))
    assert reuse.find(earlier, "refined", "SOURCE", il, ours) is None, "our rows are never reused"
    job = reuse.reused_job(earlier, "refined_rl_low", {"il": 1})
    assert job["rl"]["curve"][0]["return_mean"] == 1.0 and job["reused_from"].endswith("refined_rl_low")
    assert [r["metric"] for r in reuse.reused_episodes(earlier, "refined_rl_low")] == [800.0, 700.0]


def test_one_pool_keeps_its_workers_for_every_map_and_the_order_of_the_jobs():
    """An experiment maps jobs four times; a spawned worker imports torch and the simulators,
    so its pool keeps the same workers for all of them (a pool per map spawned new ones)."""
    import os

    from refine_core.experiment.pool import JobPool

    with JobPool(workers=2) as pool:
        maps = [pool.map(_pid_and, [(i,) for i in range(6)], progress=False) for _ in range(3)]
    assert all([value for _pid, value in done] == list(range(6)) for done in maps), "submission order"
    workers = {pid for done in maps for pid, _value in done}
    assert len(workers) <= 2 and os.getpid() not in workers, workers


def _pid_and(value: int) -> tuple[int, int]:
    import os

    return os.getpid(), value
