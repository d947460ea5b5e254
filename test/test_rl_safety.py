"""Our RL preset's guarantees: the trust region holds every update's KL to the sampling policy
under its target (and the same training without it does not), a checkpoint is accepted only
when it beats the accepted one by more than the selection noise, selection runs in the task's
deployed mode, and the two presets are what their names say."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from drift_task import DriftPolicy, DriftTask, mean_action_return
from scipy import stats

from refine_core.learn.rl import (
    PRESETS,
    PUBLISHED,
    RLConfig,
    accepts,
    gaussian_kl,
    train_rl,
    within_trust_region,
)
from refine_core.tasks.spec import TaskSpec


# ------------------------------------------------------------------ the trust region
def test_gaussian_kl_matches_the_closed_form_over_live_states_only():
    # 1-D: KL(N(0, 1) || N(1, 2^2)) = log 2 + (1 + 1) / 8 - 1/2
    old_mean, new_mean = torch.zeros(1, 2, 1), torch.tensor([[[1.0], [50.0]]])
    old_tril, new_tril = torch.ones(1, 2, 1, 1), torch.full((1, 2, 1, 1), 2.0)
    alive = torch.tensor([[1.0, 0.0]])  # the second state is after the end: ignored
    assert gaussian_kl(old_mean, old_tril, new_mean, new_tril, alive).item() == pytest.approx(
        math.log(2) + 2 / 8 - 0.5)


def test_an_overshooting_step_is_halved_until_it_fits_or_undone():
    layer = torch.nn.Linear(1, 1, bias=False)
    start = {"weight": torch.zeros(1, 1)}
    with torch.no_grad():
        layer.weight.fill_(8.0)  # the step went from 0 to 8; "KL" = w^2

    def measure():
        return float(layer.weight.item() ** 2)

    kl, kept = within_trust_region(layer, start, measure, target=5.0, backtracks=10)
    assert (kept, layer.weight.item(), kl) == (0.25, 2.0, 4.0)  # 8 (64) -> 4 (16) -> 2 (4 <= 5)
    with torch.no_grad():
        layer.weight.fill_(8.0)
    kl, kept = within_trust_region(layer, start, measure, target=5.0, backtracks=1)
    assert (kept, layer.weight.item(), kl) == (0.0, 0.0, 0.0), "out of halvings: back to the start"
    with torch.no_grad():
        layer.weight.fill_(2.0)
    assert within_trust_region(layer, start, measure, target=5.0, backtracks=3) == (4.0, 1.0)
    with torch.no_grad():
        layer.weight.fill_(2.0)
    kl, kept = within_trust_region(layer, start, lambda: math.nan, target=5.0, backtracks=2)
    assert kept == 0.0 and layer.weight.item() == 0.0, "a non-finite policy is never kept"


def test_every_update_stays_inside_the_trust_region_and_without_it_the_step_overshoots():
    """Adam at 0.5 on the drift task moves the gain far in one step: the published rule lets
    it, our trust region must hold each update's exact KL under its target."""
    target = 0.01
    common = dict(group_size=8, reset_budget=48, lr=0.5, window=5, select_every=0, checkpoint="final")
    free = train_rl(DriftTask(), DriftPolicy(), RLConfig(**common, target_kl=None), progress=False)
    held = train_rl(DriftTask(), DriftPolicy(), RLConfig(**common, target_kl=target), progress=False)
    assert max(r["kl"] for r in free.curve) > 10 * target, "without the trust region this step is large"
    assert all(r["kl"] <= target * (1 + 1e-6) for r in held.curve)
    assert any(r["kl_stop"] for r in held.curve) and any(r["step_kept"] < 1 for r in held.curve)
    assert all(r["epochs_done"] <= 3 for r in held.curve)
    assert held.curve[-1]["params"]["gain"]["value"][0] < 0, "it still learns to push toward zero"


# ------------------------------------------------------------------ acceptance by a margin
def test_acceptance_is_a_paired_one_sided_t_test_by_hand():
    accepted = [900.0, 910.0, 920.0, 930.0]
    # differences 1, 2, 3, 2: mean 2, sd sqrt(2/3), t = 2 / (sqrt(2/3) / 2)
    candidate = [901.0, 912.0, 923.0, 932.0]
    t = 2 / (math.sqrt(2 / 3) / 2)
    ok, p = accepts(candidate, accepted, True, alpha=0.01)
    assert p == pytest.approx(stats.t.sf(t, 3)) == pytest.approx(0.00814, abs=1e-5) and ok is True
    assert accepts(candidate, accepted, True, alpha=0.005)[0] is False, "p 0.008 is not below 0.005"
    # the same numbers for a metric where lower is better: the candidate is worse
    assert accepts(candidate, accepted, False, alpha=0.5)[0] is False
    # one lost track outweighs small gains on the others (the trap of a best checkpoint)
    assert accepts([901.0, 911.0, 921.0, 100.0], accepted, True, alpha=0.05)[0] is False
    assert accepts(accepted, accepted, True, alpha=0.05) == (False, 1.0), "identical scores: nothing to accept"
    assert accepts([x + 0.5 for x in accepted], accepted, True, alpha=0.05) == (True, 0.0), "a constant gain"
    assert accepts([math.nan, 1, 2, 3], [0, 0, 0, 0], True, alpha=0.05) == (False, 1.0)


def test_the_accepted_checkpoint_is_the_starting_weights_unless_a_candidate_wins_by_the_margin():
    """A policy already at the optimum (gain -2 drives x to 0 in one step) trained with a wild
    step: candidates are worse or equal, so the run hands back the starting weights exactly,
    while the best-without-margin rule may pick a lucky one and the final weights are off."""
    task = DriftTask()
    common = dict(group_size=4, reset_budget=40, lr=0.5, window=5, select_every=2, target_kl=None)
    policy = DriftPolicy(gain=-2.0)
    start = {k: v.clone() for k, v in policy.state_dict().items()}
    report = train_rl(task, policy, RLConfig(**common, checkpoint="accepted"), progress=False)
    assert report.accepted_update == 0 and report.checkpoint_update == 0
    assert all(torch.equal(policy.state_dict()[k], start[k]) for k in start)
    assert [s["accepted"] for s in report.selection] == [True] + [False] * (len(report.selection) - 1)
    assert report.describe_checkpoint().startswith("accepted: the starting weights")
    assert report.curve[-1]["params"]["gain"]["value"][0] != pytest.approx(-2.0), "training did move"


def test_a_worse_candidate_sends_training_back_to_the_accepted_weights():
    task = DriftTask()
    common = dict(group_size=4, reset_budget=40, lr=0.5, window=5, select_every=1, target_kl=None)
    policy = DriftPolicy(gain=-2.0)
    restored_with = []

    def watch(record):
        if record.get("selection_restored"):
            restored_with.append(policy.gain.item())

    report = train_rl(task, policy, RLConfig(**common), progress=False, on_update=watch)
    assert restored_with and all(g == -2.0 for g in restored_with), "the next update starts from the accepted gain"
    assert "restart" in report.describe_checkpoint()
    assert any("restarts from the accepted weights" in d for d in report.departures)
    plain = train_rl(task, DriftPolicy(gain=-2.0), RLConfig(**common, restore_on_regression=False), progress=False)
    assert not any(s["restored"] for s in plain.selection)
    assert plain.checkpoint_update == 0, "with or without restarts, nothing beat the optimum"


def test_a_candidate_that_is_better_on_every_selection_seed_is_accepted_and_handed_back():
    task = DriftTask()
    policy = DriftPolicy(gain=0.0)  # does nothing: RL has room
    config = RLConfig(group_size=8, reset_budget=80, lr=0.05, window=5, select_every=5, target_kl=None,
                      checkpoint="accepted")
    report = train_rl(task, policy, config, progress=False)
    assert report.accepted_update is not None and report.accepted_update > 0
    chosen = next(s for s in report.selection if s["update"] == report.accepted_update)
    assert chosen["accepted"] and chosen["p_value"] < config.accept_alpha
    assert mean_action_return(task, policy, task.spec.selection_seeds) == pytest.approx(
        report.accepted_selection_metric)
    assert report.accepted_selection_metric > report.selection[0]["metric"]
    assert report.selection_resets == config.planned_selection_resets == 3 * 10


def test_candidate_evaluations_count_every_selection_after_an_update():
    assert RLConfig(reset_budget=2000, select_every=5).candidate_evaluations == 20
    assert RLConfig(reset_budget=400, select_every=5).candidate_evaluations == 4
    assert RLConfig(reset_budget=440, select_every=5).candidate_evaluations == 5  # and after the last update
    assert RLConfig.preset("published").candidate_evaluations == 0
    assert RLConfig(reset_budget=2000, select_every=5).planned_selection_resets == 21 * 10
    assert RLConfig(reset_budget=400, select_every=5).planned_selection_resets == 50
    assert RLConfig.preset("published").planned_selection_resets == 0


# ------------------------------------------------------------------ the deployed mode
def test_selection_runs_in_the_tasks_deployed_mode_unless_told():
    class SampledDrift(DriftTask):
        spec = dataclasses.replace(DriftTask.spec, deployed_mode="sample")

    config = dict(group_size=4, reset_budget=8, lr=0.05, window=5, select_every=1, target_kl=None)
    mean = train_rl(DriftTask(), DriftPolicy(gain=-0.5), RLConfig(**config), progress=False)
    sampled = train_rl(SampledDrift(), DriftPolicy(gain=-0.5), RLConfig(**config), progress=False)
    told = train_rl(SampledDrift(), DriftPolicy(gain=-0.5), RLConfig(**config, selection_mode="mean"), progress=False)
    assert (mean.selection_mode, sampled.selection_mode, told.selection_mode) == ("mean", "sample", "mean")
    assert mean.selection[0]["metric"] == pytest.approx(
        mean_action_return(DriftTask(), DriftPolicy(gain=-0.5), DriftTask.spec.selection_seeds))
    assert sampled.selection[0]["per_seed"] != mean.selection[0]["per_seed"], "sampled actions score differently"
    assert told.selection[0]["per_seed"] == mean.selection[0]["per_seed"]
    assert any("sampled actions on 10 selection seeds" in d for d in sampled.departures)
    with pytest.raises(ValueError, match="deployed mode"):
        dataclasses.replace(DriftTask.spec, deployed_mode="greedy")


def test_the_benchmark_tasks_deploy_the_mean_action():
    from refine_core.tasks.registry import get_task

    for name in ("car_racing", "door_open", "pendulum"):
        assert get_task(name).spec.deployed_mode == "mean", name
    assert TaskSpec.__dataclass_fields__["deployed_mode"].default == "mean"


# ------------------------------------------------------------------ presets and their labels
def test_presets_are_what_their_names_say_and_every_departure_is_named():
    published = RLConfig.preset("published")
    assert {k: getattr(published, k) for k in PUBLISHED} == PUBLISHED
    assert (published.target_kl, published.checkpoint, published.select_every, published.std_scale) == (
        None, "final", 0, 1.0)
    assert published.departures() == [] and published.preset_name() == "published"
    ours = RLConfig()
    assert ours == RLConfig.preset("ours") and ours.preset_name() == "ours" and PRESETS["ours"] == {}
    named = ours.departures()
    assert f"lr {ours.lr:g} (published 0.007)" in named
    assert any(d.startswith("trust region: per-step KL") and f"{ours.target_kl:g}" in d for d in named)
    assert any(d.startswith("accepted checkpoint") and "paired one-sided t-test" in d for d in named)
    assert RLConfig.preset("published", lr=1e-3).preset_name() == "custom"
    assert RLConfig.preset("ours", reset_budget=2000).preset_name() == "ours", "the budget is not a setting"
    with pytest.raises(ValueError, match="preset"):
        RLConfig.preset("fast")
    with pytest.raises(ValueError, match="select_every"):
        RLConfig(checkpoint="accepted", select_every=0)
    with pytest.raises(ValueError, match="target_kl"):
        RLConfig(target_kl=0.0)


def test_a_tasks_own_settings_shape_ours_only_and_are_named():
    """The door's measured settings (TaskSpec.rl_settings) are part of "ours" there; the
    published preset ignores them; a flag still overrides them; every result names them."""
    from refine_core.tasks.registry import get_task

    door = get_task("door_open").spec.rl_settings
    assert door, "the door carries its measured RL settings"
    ours = RLConfig.preset("ours", door)
    assert {k: getattr(ours, k) for k in door} == door
    assert ours.preset_name(door) == "ours" and ours.preset_name() == "custom"
    assert any(f"x{door['std_scale']:g}" in d for d in ours.departures()), "the wider noise is named"
    assert RLConfig.preset("published", door) == RLConfig.preset("published")
    assert RLConfig.preset("ours", door, lr=1e-4).lr == 1e-4, "a flag overrides the task"
    assert get_task("car_racing").spec.rl_settings == {}, "the car keeps the shared default it was measured with"


def test_refine_rl_takes_a_preset_and_flags_change_it(tmp_path, capsys):
    import json

    from refine_core.cli import main

    out = tmp_path / "rl.json"
    assert main(["rl", "--task", "pendulum", "--program", "starter", "--rl-preset", "published", "--reset-budget", "4",
                 "--group-size", "2", "--max-steps", "20", "--window", "10", "--eval-seeds", "0", "--out",
                 str(out)]) == 0
    config = json.loads(out.read_text())["rl"]["config"]
    assert (config["lr"], config["target_kl"], config["checkpoint"]) == (0.007, None, "final")
    assert main(["rl", "--task", "pendulum", "--program", "starter", "--reset-budget", "4", "--group-size", "2",
                 "--max-steps", "20", "--window", "10", "--eval-seeds", "0", "--select-every", "1",
                 "--selection-episodes", "2", "--target-kl", "0.5", "--out", str(out)]) == 0
    record = json.loads(out.read_text())["rl"]
    assert (record["config"]["target_kl"], record["checkpoint"], record["selection_mode"]) == (0.5, "accepted", "mean")
    assert [s["update"] for s in record["selection"]] == [0, 1, 2]
    assert np.isfinite([r["kl"] for r in record["curve"]]).all()
    with pytest.raises(SystemExit) as refused:
        main(["rl", "--task", "pendulum", "--program", "starter", "--rl-preset", "fast"])
    assert refused.value.code == 2 and "invalid choice: 'fast'" in capsys.readouterr().err


# ------------------------------------------------------------------ the seams a robot's RL uses
def _one_at_a_time(task):
    """A sampler that runs the k episodes one after another through `draw`, as a robot does."""
    from refine_core.learn.rl import Trajectory, draw, group_from_trajectories
    from refine_core.policy.distribution import clip_actions, to_batch

    def sample(policy, env_seed, k, generator, max_steps, std_scale):
        out = []
        for _ in range(k):
            env = task.make_env()
            obs, _ = env.reset(seed=env_seed)
            steps = []
            for _t in range(max_steps):
                batch = to_batch(task.spec, task.split_observation(obs), batched=False)
                action, logp, mean, tril = draw(policy, task.spec, batch, generator, std_scale)
                obs, reward, term, trunc, _ = env.step(clip_actions(action, task.spec).numpy()[0])
                steps.append((batch, action[0], logp[0], mean[0], tril[0], reward))
                if term or trunc:
                    break
            out.append(Trajectory(inputs={"state": torch.cat([s[0]["state"] for s in steps])},
                                  actions=torch.stack([s[1] for s in steps]), logp=torch.stack([s[2] for s in steps]),
                                  mean=torch.stack([s[3] for s in steps]), tril=torch.stack([s[4] for s in steps]),
                                  rewards=torch.tensor([s[5] for s in steps], dtype=torch.float32)))
        return group_from_trajectories(out)
    return sample


def test_trajectories_of_different_lengths_pad_with_their_last_step_and_stay_out_of_the_sums():
    from refine_core.learn.rl import Trajectory, group_from_trajectories

    def traj(n, base):
        return Trajectory(inputs={"state": torch.arange(n, dtype=torch.float32)[:, None] + base},
                          actions=torch.full((n, 1), base), logp=torch.full((n,), -1.0), mean=torch.zeros(n, 1),
                          tril=torch.ones(n, 1, 1), rewards=torch.ones(n))

    group = group_from_trajectories([traj(3, 10.0), traj(1, 20.0)])
    assert group.alive.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert group.inputs["state"][1, :, 0].tolist() == [20.0, 20.0, 20.0], "the last state repeated"
    assert group.rewards.tolist() == [[1, 1, 1], [1, 0, 0]] and group.returns.tolist() == [3.0, 1.0]
    with pytest.raises(ValueError, match="two trajectories"):
        group_from_trajectories([traj(3, 0.0)])


def test_rl_learns_from_episodes_driven_one_at_a_time():
    task = DriftTask()
    policy = DriftPolicy()
    before = mean_action_return(task, policy, range(10))
    config = RLConfig(group_size=8, reset_budget=80, lr=0.05, window=5, select_every=5, target_kl=None)
    report = train_rl(task, policy, config, progress=False, sampler=_one_at_a_time(task))
    assert report.updates == 10 and report.resets == 80
    assert mean_action_return(task, policy, range(10)) > before + 5 and report.accepted_update > 0


def test_a_stop_ends_the_run_between_updates_with_the_kept_weights():
    class StopAfter:
        def __init__(self, n):
            self.n, self.calls = n, 0

        def is_set(self):
            self.calls += 1
            return self.calls > self.n

    task, policy = DriftTask(), DriftPolicy(gain=-2.0)
    start = policy.gain.item()
    config = RLConfig(group_size=4, reset_budget=40, lr=0.5, window=5, select_every=1, target_kl=None)
    report = train_rl(task, policy, config, progress=False, stop=StopAfter(5))
    assert report.stopped and report.updates < config.total_updates and report.resets == 4 * report.updates
    assert policy.gain.item() == start, "the optimum's weights were never beaten: they are what it holds"
