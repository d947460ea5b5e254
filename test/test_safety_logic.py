"""The safety rules without DDS: a driven clock, exact expectations."""

import math

import numpy as np
import pytest

from refine_ros.safety import (
    InvalidCommand,
    InvalidSafetyConfig,
    SafetyConfig,
    SafetyFilter,
    parse_command,
)

ARM = dict(
    lower=(-1.0, -1.0, -1.0, 0.0),
    upper=(1.0, 1.0, 1.0, 1.0),
    zero=(0.0, 0.0, 0.0, 1.0),
    max_rate=(10.0, 10.0, 10.0, 0.0),
    hold_axes=(3,),
    watchdog_timeout=0.1,
    watchdog_period=0.01,
    teleop_hold=0.5,
    workspace_observation_indices=(0, 1, 2),
    workspace_lower=(-0.5, 0.4, 0.05),
    workspace_upper=(0.5, 1.0, 0.5),
    workspace_action_axes=(0, 1, 2),
)
INSIDE = [0.0, 0.6, 0.2] + [0.0] * 36


def cmd(*values, episode=0, step=0):
    return 2, [float(episode), float(step), *values]


def armed(**overrides) -> SafetyFilter:
    """A filter with a fresh observation, a confirmed episode and a previous command at t=0."""
    f = SafetyFilter(SafetyConfig(**{**ARM, **overrides}))
    f.on_observation(INSIDE, 0.0)
    assert f.confirm_episode()[0]
    return f


def test_parse_rejects_layout_length_and_non_finite():
    with pytest.raises(InvalidCommand):
        parse_command(0, [0, 0, 1, 1, 1, 1], 4)
    with pytest.raises(InvalidCommand):
        parse_command(2, [0, 0, 1, 1], 4)
    with pytest.raises(InvalidCommand):
        parse_command(2, [0, 0, 1, math.nan, 1, 1], 4)
    with pytest.raises(InvalidCommand):
        parse_command(2, [math.inf, 0, 1, 1, 1, 1], 4)
    assert parse_command(2, [3, 7, 0.1, 0.2, 0.3, 0.4], 4)[:2] == (3, 7)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_command_becomes_zero_and_is_counted(bad):
    f = armed()
    d = f.on_policy(*cmd(0.5, bad, 0.0, 0.0), now=0.001)
    assert d.reason == "rejected" and d.values == (0.0, 0.0, 0.0, 1.0)
    assert f.counters.rejected == 1


def test_clamp_per_axis():
    f = armed(max_rate=(0.0, 0.0, 0.0, 0.0))
    d = f.on_policy(*cmd(5.0, -5.0, 0.3, 2.0), now=0.001)
    assert d.values == (1.0, -1.0, 0.3, 1.0)
    assert f.counters.clamped == 1


def test_rate_limit_ramps_up_at_max_rate_and_stops_at_once():
    f = armed()
    assert f.on_policy(*cmd(0.0, 0.0, 0.0, 1.0), now=0.0).values[0] == 0.0
    d = f.on_policy(*cmd(1.0, 0.0, 0.0, 1.0), now=0.02)  # 10/s * 0.02 s = 0.2
    assert d.values[0] == pytest.approx(0.2)
    d = f.on_policy(*cmd(1.0, 0.0, 0.0, 1.0), now=0.04)
    assert d.values[0] == pytest.approx(0.4)
    assert f.counters.rate_limited == 2
    f.on_estop(True, now=0.05)
    assert f.last_sent[0] == 0.0  # the stop is not ramped


def test_workspace_only_allows_motion_back_toward_the_box():
    f = armed(max_rate=(0.0, 0.0, 0.0, 0.0))
    outside = [0.7, 0.6, 0.02] + [0.0] * 36  # x above, z below the box
    f.on_observation(outside, 0.001)
    d = f.on_policy(*cmd(0.5, 0.5, -0.5, 1.0), now=0.002)
    assert d.values == (0.0, 0.5, 0.0, 1.0)
    d = f.on_policy(*cmd(-0.5, 0.5, 0.5, 1.0), now=0.003)
    assert d.values == (-0.5, 0.5, 0.5, 1.0)
    assert f.counters.workspace_limited == 1


def test_car_speed_cap_is_a_workspace_bound_on_gas():
    f = SafetyFilter(SafetyConfig(
        lower=(-1.0, 0.0, 0.0), upper=(1.0, 1.0, 1.0), zero=(0.0, 0.0, 1.0), max_rate=(0.0, 0.0, 0.0),
        watchdog_timeout=0.2, workspace_observation_indices=(48,), workspace_lower=(-1.0,),
        workspace_upper=(0.3,), workspace_action_axes=(1,), require_confirmation=False,
    ))  # fmt: skip
    obs = np.zeros(55)
    obs[48] = 0.5
    f.on_observation(obs, 0.0)
    assert f.on_policy(*cmd(0.2, 1.0, 0.0), now=0.01).values == (0.2, 0.0, 0.0)
    obs[48] = 0.1
    f.on_observation(obs, 0.02)
    assert f.on_policy(*cmd(0.2, 1.0, 0.0), now=0.03).values == (0.2, 1.0, 0.0)


def test_watchdog_stops_before_the_budget_and_holds_the_gripper():
    f = armed(max_rate=(0.0, 0.0, 0.0, 0.0))
    f.on_policy(*cmd(0.5, 0.0, 0.0, 0.3), now=0.0)
    assert f.tick(0.05) is None
    t = 0.0
    while (d := f.tick(t)) is None:
        t += 0.01
    # stale after timeout - period - margin (margin = 30 % of the timeout here): the stop comes
    # within one tick of that, leaving the margin for scheduling and transport
    timeout, period = ARM["watchdog_timeout"], ARM["watchdog_period"]
    stale = timeout - period - max(period, 0.3 * timeout)
    assert stale - 1e-9 <= t <= stale + period + 1e-9 and t < timeout - 0.3 * timeout + 1e-9
    assert d.reason == "stale" and d.values == (0.0, 0.0, 0.0, 0.3)
    assert f.counters.watchdog_trips == 1


def test_stale_observation_stops_policy_commands():
    f = armed()
    d = f.on_policy(*cmd(0.5, 0.0, 0.0, 1.0), now=0.5)
    assert d.reason == "stale" and d.stopped


def test_observation_with_non_finite_workspace_coordinates_is_no_heartbeat():
    f = armed()
    assert not f.on_observation([math.nan] + INSIDE[1:], 0.05)
    assert f.last_observation == 0.0


def test_estop_latches_until_released_and_rearmed_then_needs_confirmation():
    f = armed()
    assert f.on_estop(True, 0.01).reason == "estop"
    assert f.on_estop(False, 0.02) is None
    assert f.on_policy(*cmd(0.5, 0, 0, 1), now=0.03).reason == "estop"
    f.on_estop(True, 0.04)
    ok, msg = f.rearm()
    assert not ok and "asserted" in msg
    f.on_estop(False, 0.05)
    assert f.rearm()[0]
    f.on_observation(INSIDE, 0.06)
    assert f.on_policy(*cmd(0.5, 0, 0, 1), now=0.06).reason == "unconfirmed"
    f.confirm_episode()
    assert f.on_policy(*cmd(0.5, 0, 0, 1), now=0.07).reason == "policy"


def test_confirmation_covers_one_episode():
    f = armed(max_rate=(0.0,) * 4)
    assert f.on_policy(*cmd(0.1, 0, 0, 1, episode=3), now=0.01).reason == "policy"
    assert f.on_policy(*cmd(0.1, 0, 0, 1, episode=3, step=1), now=0.02).reason == "policy"
    assert f.on_policy(*cmd(0.1, 0, 0, 1, episode=4), now=0.03).reason == "unconfirmed"
    f.confirm_episode()
    assert f.on_policy(*cmd(0.1, 0, 0, 1, episode=4), now=0.04).reason == "policy"


def test_teleop_preempts_policy_for_teleop_hold():
    f = armed(max_rate=(0.0,) * 4)
    f.on_policy(*cmd(0.5, 0, 0, 1), now=0.0)
    d = f.on_teleop(*cmd(-0.3, 0, 0, 1), now=0.01)
    assert d.reason == "teleop" and d.values[0] == -0.3
    for t in (0.02, 0.3, 0.5):
        f.on_observation(INSIDE, t)
        f.on_teleop(*cmd(-0.3, 0, 0, 1), now=t)
        assert f.on_policy(*cmd(0.5, 0, 0, 1), now=t + 0.001) is None
    f.on_observation(INSIDE, 1.05)
    assert f.on_policy(*cmd(0.5, 0, 0, 1), now=1.05).reason == "policy"
    assert f.counters.preempted == 3


def test_teleop_goes_stale_like_any_command():
    f = armed()
    f.on_teleop(*cmd(-0.3, 0, 0, 1), now=0.0)
    assert f.tick(0.2).reason == "stale"


def test_no_confirmation_means_zero():
    f = SafetyFilter(SafetyConfig(**ARM))
    f.on_observation(INSIDE, 0.0)
    assert f.on_policy(*cmd(0.5, 0, 0, 1), now=0.001).reason == "unconfirmed"
    assert f.tick(0.002).reason == "unconfirmed"


@pytest.mark.parametrize(
    "change",
    [
        dict(upper=(1.0, 1.0, 1.0)),
        dict(lower=(2.0, -1.0, -1.0, 0.0)),
        dict(zero=(0.0, 0.0, 0.0, 2.0)),
        dict(watchdog_period=0.03),
        dict(hold_axes=(7,)),
        dict(workspace_lower=(0.0,)),
        dict(lower=(math.nan, -1.0, -1.0, 0.0)),
    ],
)
def test_inconsistent_configs_are_refused(change):
    with pytest.raises(InvalidSafetyConfig):
        SafetyConfig(**{**ARM, **change})


def test_random_garbage_never_leaves_the_bounds():
    rng = np.random.default_rng(0)
    f = armed()
    lo, hi = np.array(ARM["lower"]), np.array(ARM["upper"])
    t = 0.0
    for _ in range(3000):
        t += 0.005
        f.on_observation(INSIDE, t)
        n = int(rng.integers(0, 9))
        data = list(rng.normal(0, 10 ** rng.uniform(-1, 30), n))
        if n and rng.random() < 0.3:
            data[int(rng.integers(n))] = rng.choice([math.nan, math.inf, -math.inf])
        offset = int(rng.choice([2, 2, 2, 0, 1, 5]))
        d = f.on_policy(offset, data, t) if rng.random() < 0.8 else f.on_teleop(offset, data, t)
        if d is not None:
            v = np.array(d.values)
            assert np.all(np.isfinite(v)) and np.all(v >= lo) and np.all(v <= hi)
    assert f.counters.rejected > 0 and f.counters.passed > 0


def test_reconfigure_keeps_the_latch_and_refuses_a_different_action_size():
    f = armed()
    f.on_estop(True, 0.01)
    f.reconfigure(SafetyConfig(**{**ARM, "teleop_hold": 0.1}))
    assert f.estop_latched and f.config.teleop_hold == 0.1
    with pytest.raises(InvalidSafetyConfig):
        f.reconfigure(SafetyConfig(lower=(-1.0,), upper=(1.0,), zero=(0.0,), max_rate=(0.0,)))
