"""RL maths with hand-worked numbers, the instruments, and a check that a few updates raise the
return of a small real Gymnasium problem."""

import math

import pytest
import torch
from drift_task import DriftPolicy, DriftTask, mean_action_return

from refine_core.learn.rl import (
    PUBLISHED,
    RLConfig,
    clipped_surrogate,
    config_from_dict,
    entropy_coef_at,
    normalised_advantages,
    parameter_changes,
    ratio_statistics,
    reward_to_go,
    train_rl,
    window_starts,
    windowed_log_ratio,
)


def test_reward_to_go_discounts_and_stops_at_episode_end():
    rewards = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    alive = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    rtg = reward_to_go(rewards, alive, gamma=0.5)
    # row 0: 1 + .5*2 + .25*3 = 2.75, 2 + .5*3 = 3.5, 3
    # row 1: the third reward is after the end: 1 + .5*2 = 2, 2, 0
    assert torch.allclose(rtg, torch.tensor([[2.75, 3.5, 3.0], [2.0, 2.0, 0.0]]))


def test_advantages_are_normalised_over_live_trajectories_only():
    returns = torch.tensor([[1.0, 5.0], [3.0, 0.0], [5.0, 7.0]])
    alive = torch.tensor([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    adv = normalised_advantages(returns, alive)
    # t=0: mean 3, population std sqrt(8/3)
    std0 = math.sqrt(8 / 3)
    assert adv[:, 0].tolist() == pytest.approx([-2 / std0, 0.0, 2 / std0], rel=1e-5)
    # t=1: live are rows 0 and 2 (5, 7): mean 6, std 1; the dead row gets 0
    assert adv[:, 1].tolist() == pytest.approx([-1.0, 0.0, 1.0], rel=1e-5)


def test_single_live_trajectory_gets_zero_advantage():
    adv = normalised_advantages(torch.tensor([[4.0], [9.0]]), torch.tensor([[1.0], [0.0]]))
    assert adv.abs().sum() == 0


# ------------------------------------------------------------------ the forward window
def test_forward_window_multiplies_the_next_L_steps():
    new = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5]])
    old = torch.zeros(1, 5)
    alive = torch.ones(1, 5)
    out = windowed_log_ratio(new, old, alive, window=2)
    # t=0: .1+.2, t=1: .2+.3, t=2: .3+.4, t=3: .4+.5; t=4 would need step 5 (not a start)
    assert out[0, :4].tolist() == pytest.approx([0.3, 0.5, 0.7, 0.9])
    assert window_starts(alive, 2).tolist() == [[1.0, 1.0, 1.0, 1.0, 0.0]]
    # L=3: starts t=0,1,2 with .6, .9, 1.2
    assert windowed_log_ratio(new, old, alive, window=3)[0, :3].tolist() == pytest.approx([0.6, 0.9, 1.2])
    assert window_starts(alive, 3).tolist() == [[1.0, 1.0, 1.0, 0.0, 0.0]]


def test_windows_only_where_they_fit_and_a_short_trajectory_has_none():
    # row 0 runs 5 steps, row 1 ends after 3, row 2 after 2 (shorter than L=3)
    alive = torch.tensor([[1.0, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    assert window_starts(alive, 3).tolist() == [[1, 1, 1, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]
    # log-ratios after the end (here 9.0) never enter a window
    new = torch.tensor([[0.0, 0, 0, 0, 0], [0.1, 0.2, 0.3, 9.0, 9.0], [0, 0, 0, 0, 0]])
    out = windowed_log_ratio(new, torch.zeros(3, 5), alive, window=3)
    assert out[1, 0].item() == pytest.approx(0.6)
    assert out[1, 1].item() == pytest.approx(0.5)  # not a start: only live steps are summed


def test_backward_window_option_reproduces_the_earlier_version():
    new = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    alive = torch.ones(1, 4)
    out = windowed_log_ratio(new, torch.zeros(1, 4), alive, 2, direction="backward")
    assert out[0].tolist() == pytest.approx([0.1, 0.3, 0.5, 0.7])
    assert window_starts(alive, 2, "backward").tolist() == [[1.0, 1.0, 1.0, 1.0]]


def test_geometric_mean_option_divides_by_the_window_length():
    new = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    out = windowed_log_ratio(new, torch.zeros(1, 4), torch.ones(1, 4), 2, mean=True)
    assert out[0, :3].tolist() == pytest.approx([0.15, 0.25, 0.35])


def test_first_epoch_gradient_credits_each_start_with_its_forward_window():
    """At ratio 1 the surrogate's gradient is mean_t A_t * sum_{u=t}^{t+L-1} d logp_u / d theta.
    With logp_u = theta * c_u, c = (1, 2, 3, 4), A = (1, -1, 2, 0.5), L = 2, the starts are
    t = 0, 1, 2: (1*(1+2) - 1*(2+3) + 2*(3+4)) / 3 = 4, so d loss / d theta = -4.
    The backward window (every step a start) would give (1*1 - (1+2) + 2*(2+3) + .5*(3+4)) / 4."""
    c = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    adv = torch.tensor([[1.0, -1.0, 2.0, 0.5]])
    alive = torch.ones(1, 4)
    for direction, expected in (("forward", -4.0), ("backward", -(1 - 3 + 10 + 3.5) / 4)):
        theta = torch.zeros((), requires_grad=True)
        log_ratio = windowed_log_ratio(theta * c, torch.zeros(1, 4), alive, 2, direction)
        clipped_surrogate(log_ratio, adv, window_starts(alive, 2, direction), eps=0.2).backward()
        assert theta.grad.item() == pytest.approx(expected), direction


def test_clipped_surrogate_takes_the_pessimistic_side_over_window_starts_only():
    log_ratio = torch.log(torch.tensor([[1.5, 1.5, 0.5, 3.0]]))
    adv = torch.tensor([[1.0, -1.0, 1.0, 100.0]])
    starts = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last step is not a start: ignored
    # per step: min(1.5, 1.2) = 1.2; min(-1.5, -1.2) = -1.5; min(0.5, 0.8) = 0.5
    loss = clipped_surrogate(log_ratio, adv, starts, eps=0.2)
    assert loss.item() == pytest.approx(-(1.2 - 1.5 + 0.5) / 3)


def test_entropy_bonus_decays_linearly_to_zero():
    assert [entropy_coef_at(u, 5, 0.01) for u in range(5)] == pytest.approx([0.01, 0.0075, 0.005, 0.0025, 0.0])


def test_ratio_statistics_by_hand():
    # windowed ratios 0.5, 1.0, 1.1, 2.0 at the four starts: two outside [0.8, 1.2]
    log_ratio = torch.log(torch.tensor([[0.5, 1.0, 1.1, 2.0, 7.0]]))
    starts = torch.tensor([[1.0, 1, 1, 1, 0]])
    # per-step log ratios log 2 and 0 on live steps: KL ~ ((2 - 1 - log 2) + 0) / 2
    step = torch.tensor([[math.log(2.0), 0.0, 5.0]])
    alive = torch.tensor([[1.0, 1.0, 0.0]])
    stats = ratio_statistics(log_ratio, step, starts, alive, eps=0.2)
    assert stats["clip_frac"] == pytest.approx(0.5)
    assert stats["ratio_q50"] == pytest.approx(1.05)  # median of 0.5, 1, 1.1, 2
    assert stats["approx_kl"] == pytest.approx((1 - math.log(2.0)) / 2)


def test_parameter_changes_record_every_parameter():
    net = torch.nn.Linear(5, 4)  # weight: 20 elements (too many to list), bias: 4
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    with torch.no_grad():
        net.bias += torch.tensor([0.0, 3.0, 0.0, -4.0])
    out = parameter_changes(before, net)
    assert out["weight"] == {"delta_norm": 0.0, "delta_max": 0.0}
    assert out["bias"]["delta_norm"] == pytest.approx(5.0) and out["bias"]["delta_max"] == pytest.approx(4.0)
    assert out["bias"]["value"] == pytest.approx(net.bias.tolist())


def test_the_published_preset_is_the_published_method_and_departures_are_named():
    config = RLConfig.preset("published")
    assert {k: getattr(config, k) for k in PUBLISHED} == {
        "group_size": 20, "gamma": 0.98, "window": 150, "clip_eps": 0.2, "entropy_coef": 0.01,
        "lr": 0.007, "epochs": 3}
    assert config.max_grad_norm is None and config.param_lr == {} and config.window_direction == "forward"
    assert config.departures() == []
    named = RLConfig.preset("published", lr=3e-4, max_grad_norm=1.0, param_lr={"log_std": 0.0},
                            window_mean=True).departures()
    assert len(named) == 4 and "lr 0.0003 (published 0.007)" in named
    assert config_from_dict({**RLConfig(lr=0.01).__dict__, "unknown": 1}).lr == 0.01


# --------------------------------------------------------------- a small problem end to end
def test_a_few_updates_raise_the_return_and_every_update_is_recorded():
    task, policy = DriftTask(), DriftPolicy()
    before = mean_action_return(task, policy, range(10))
    seen = []
    config = RLConfig.preset("published", group_size=8, reset_budget=80, lr=0.05, window=5, select_every=5)
    report = train_rl(task, policy, config, progress=False, on_update=seen.append)
    after = mean_action_return(task, policy, range(10))
    assert report.resets == 80 and report.updates == 10
    assert policy.gain.item() < 0, "RL should learn to push toward zero"
    assert after > before + 5
    assert seen == report.curve and [r["update"] for r in seen] == list(range(1, 11))
    for key in ("return_mean", "entropy", "entropy_coef", "approx_kl", "clip_frac", "ratio_q05", "ratio_q50",
                "ratio_q95", "grad_norm", "window_starts"):
        assert all(math.isfinite(r[key]) for r in seen), key
    assert set(seen[0]["params"]) == {"gain", "log_std"}
    assert seen[0]["params"]["gain"]["delta_max"] > 0
    # selection before the first update, after updates 5 and 10; 3 seeds each, counted apart
    assert [s["update"] for s in report.selection] == [0, 5, 10] and report.selection_resets == 3 * 10  # ten selection tracks each
    assert [math.isnan(r["selection_metric"]) for r in seen] == [True] * 4 + [False] + [True] * 4 + [False]
    assert report.checkpoint_update == 10 and report.describe_checkpoint() == "final: update 10/10"


def test_best_checkpoint_keeps_the_best_selection_weights():
    # A policy that already pushes the right way, trained with a step so large that updates
    # overshoot: the best checkpoint must hold the weights of the best selection score.
    task, policy = DriftTask(), DriftPolicy(gain=-0.8)
    config = RLConfig.preset("published", group_size=4, reset_budget=40, lr=0.5, window=5, select_every=2,
                             checkpoint="best")
    report = train_rl(task, policy, config, progress=False)
    scores = {s["update"]: s["metric"] for s in report.selection}
    assert report.best_selection_metric == max(scores.values())
    assert report.checkpoint_update == report.best_update
    assert scores[report.best_update] == pytest.approx(mean_action_return(task, policy, task.spec.selection_seeds))
    # and the final weights were different: otherwise the test proves nothing
    assert report.curve[-1]["params"]["gain"]["value"] != pytest.approx([policy.gain.item()])


def test_selection_on_evaluation_seeds_is_refused():
    with pytest.raises(ValueError, match="evaluation seeds"):
        train_rl(DriftTask(), DriftPolicy(), RLConfig(group_size=2, reset_budget=2, select_every=1,
                                                      selection_seeds=(1000,)), progress=False)


def test_the_published_rule_keeps_the_final_weights_and_selection_never_changes_them():
    """Under the published preset: final weights and exactly the reset budget; the best
    checkpoint is a named departure. Selection evaluations run on their own seeds, so training
    with them gives bit-identical final weights: one run can report both rules honestly."""
    published = RLConfig.preset("published")
    assert (published.checkpoint, published.select_every, published.departures()) == ("final", 0, [])
    best = RLConfig.preset("published", select_every=5, checkpoint="best", selection_mode="mean")
    assert best.departures() == ["best checkpoint by the mean action on 10 selection seeds every 5 updates "
                                 "(extra resets)"]
    plain, watched = DriftPolicy(gain=-0.8), DriftPolicy(gain=-0.8)
    config = dict(group_size=4, reset_budget=40, lr=0.5, window=5)
    quiet = train_rl(DriftTask(), plain, RLConfig.preset("published", **config), progress=False)
    kept = []
    seen = train_rl(DriftTask(), watched, RLConfig.preset("published", **config, select_every=2), progress=False,
                    on_best=kept.append)
    assert quiet.selection_resets == 0 and quiet.resets == 40 and not quiet.selection
    assert seen.selection_resets == 6 * 10 and seen.resets == 40
    assert plain.gain.item() == watched.gain.item() and plain.log_std.tolist() == watched.log_std.tolist()
    assert [r["return_mean"] for r in quiet.curve] == [r["return_mean"] for r in seen.curve]
    # on_best got the best weights as they were found (the last call holds the best)
    best_gain = kept[-1]["gain"].item()
    assert seen.best_update is not None and len(kept) >= 1
    scores = {s["update"]: s["metric"] for s in seen.selection}
    assert seen.best_selection_metric == max(scores.values())
    probe = DriftPolicy(gain=best_gain)
    probe.log_std.data.copy_(kept[-1]["log_std"])
    assert mean_action_return(DriftTask(), probe, DriftTask().spec.selection_seeds) == pytest.approx(
        seen.best_selection_metric)
