"""The safety rules without DDS: a driven clock, exact expectations."""

import math

import numpy as np
import pytest

from refine_ros.safety import (
    BRIDGE_ACK,
    Decision,
    InvalidCommand,
    InvalidSafetyConfig,
    SafetyConfig,
    SafetyFilter,
    farthest_corner,
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
    workspace_lower=(-0.3, 0.3, 0.05),  # metres in the arm's base frame, inside its 0.85 m reach
    workspace_upper=(0.3, 0.65, 0.4),
    workspace_action_axes=(0, 1, 2),
    workspace_reach=0.85,
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
        dict(workspace_reach=0.0),
        dict(estop_timeout=-1.0),
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


# ---- stops are stops (issue 16) -----------------------------------------------------------------
def test_motion_resumes_after_a_watchdog_stop_only_after_a_fresh_confirmation():
    """Issue 16: "After a watchdog stop, motion resumes by itself when the sensor returns (the
    episode confirmation survives the stale period)". Now the stale stop revokes it."""
    f = armed(max_rate=(0.0,) * 4)
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=3), now=0.01).reason == "policy"
    t = 0.02
    while (d := f.tick(t)) is None:  # the sensor goes silent; the policy keeps talking
        f.on_policy(*cmd(0.5, 0, 0, 1, episode=3, step=1), now=t)
        t += 0.01
    assert d.reason == "stale" and f.confirmed_episode is None
    f.on_observation(INSIDE, t + 0.01)  # the sensor is back, same episode
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=3, step=2), now=t + 0.01).reason == "unconfirmed"
    assert f.tick(t + 0.02).reason == "unconfirmed"
    assert f.confirm_episode()[0]
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=3, step=3), now=t + 0.03).reason == "policy"
    assert f.counters.revoked == 1


@pytest.mark.parametrize("fault", ["estop", "nan", "policy_silent"])
def test_every_fault_revokes_the_running_episodes_confirmation(fault):
    f = armed(max_rate=(0.0,) * 4)
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=2), now=0.01).reason == "policy"
    if fault == "estop":
        f.on_estop(True, 0.02)
        f.on_estop(False, 0.03)
        assert f.rearm(0.03)[0]
    elif fault == "nan":
        assert f.on_policy(*cmd(0.5, math.nan, 0, 1, episode=2, step=1), now=0.02).reason == "rejected"
    else:
        f.on_observation(INSIDE, 0.05)
        assert f.tick(0.08).reason == "stale"  # the policy fell silent mid-episode
    f.on_observation(INSIDE, 0.07)
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=2, step=2), now=0.07).reason == "unconfirmed"


def test_a_confirmation_given_between_episodes_or_during_a_stop_counts():
    """The normal flow stays possible: the operator confirms while the robot waits (the
    policy silent, no episode running) or while it is stopped, and the next episode runs."""
    f = SafetyFilter(SafetyConfig(**{**ARM, "max_rate": (0.0,) * 4}))
    assert f.tick(0.0).reason == "stale"  # no sensor yet
    assert f.confirm_episode()[0]  # confirmed during that stop
    f.on_observation(INSIDE, 0.01)
    assert f.tick(0.02).reason == "stale" and f.confirm_pending, "waiting for the policy revokes nothing"
    assert f.on_policy(*cmd(0.2, 0, 0, 1, episode=1), now=0.03).reason == "policy"


def test_a_pending_confirmation_does_not_survive_a_fault_that_starts_after_it():
    f = SafetyFilter(SafetyConfig(**ARM))
    f.on_observation(INSIDE, 0.0)
    f.tick(0.01)
    assert f.confirm_episode()[0]
    assert f.tick(0.2).reason == "stale"  # the sensor died after the confirmation
    f.on_observation(INSIDE, 0.21)
    assert f.on_policy(*cmd(0.2, 0, 0, 1, episode=1), now=0.21).reason == "unconfirmed"


def test_an_estop_heartbeat_that_goes_silent_or_loses_its_publisher_latches():
    """Issue 16: "The e-stop is a volatile topic with no heartbeat". With `estop_timeout` the
    e-stop must keep talking: never heard -> no motion; silent -> latched; gone -> latched."""
    f = armed(estop_timeout=0.2, max_rate=(0.0,) * 4)
    f.on_observation(INSIDE, 0.01)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.01).reason == "estop", "never heard: no motion"
    f.on_estop(False, 0.02)
    assert f.confirm_episode()[0]
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.03).reason == "policy"
    f.on_observation(INSIDE, 0.3)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.3).reason == "estop", "silent for 0.28 s > 0.2 s"
    assert f.estop_latched and "heartbeat" in f.estop_cause
    assert not f.rearm(0.3)[0], "no re-arm while the heartbeat is missing"
    f.on_estop(False, 0.31)
    assert f.rearm(0.31)[0]
    assert f.on_estop_publishers(1, 0.32) is None
    assert f.on_estop_publishers(0, 0.33).reason == "estop" and f.estop_latched
    assert f.counters.estops == 2


def test_without_a_heartbeat_a_silent_estop_changes_nothing():
    f = armed(max_rate=(0.0,) * 4)
    assert f.on_estop_publishers(0, 0.01) is None
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.02).reason == "policy"


def test_the_autonomy_deadman_gates_policy_commands_not_teleop():
    f = armed(deadman_timeout=0.3, max_rate=(0.0,) * 4)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.01).reason == "deadman"
    f.on_deadman(True, 0.02)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.03).reason == "policy"
    assert f.on_deadman(False, 0.04).reason == "deadman", "a release stops at once"
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.05).reason == "deadman"
    assert f.on_teleop(*cmd(-0.2, 0, 0, 1), now=0.06).reason == "teleop"
    f.on_deadman(True, 0.6)
    f.on_observation(INSIDE, 0.6)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=0.61).reason == "policy", "pressing again resumes"
    f.on_observation(INSIDE, 1.0)
    assert f.on_policy(*cmd(0.2, 0, 0, 1), now=1.0).reason == "deadman", "a Joy stream gone silent"


def test_the_workspace_box_must_lie_within_the_arms_reach():
    """Issue 16: "The arm's workspace box is in Meta-World coordinates (far corner 1.12 m from
    the base, beyond a UR5e's or Franka's reach)". The box is now checked against the reach."""
    metaworld_box = dict(workspace_lower=(-0.5, 0.3, 0.05), workspace_upper=(0.5, 1.0, 0.5))
    with pytest.raises(InvalidSafetyConfig, match="beyond workspace_reach"):
        SafetyConfig(**{**ARM, **metaworld_box, "workspace_reach": 0.85})
    with pytest.raises(InvalidSafetyConfig, match="workspace_reach"):
        SafetyConfig(**{**ARM, "workspace_reach": 0.0})
    assert SafetyConfig(**ARM).workspace_reach == 0.85
    assert farthest_corner((-0.3, 0.3, 0.05), (0.3, 0.6, 0.4)) == pytest.approx(math.sqrt(0.09 + 0.36 + 0.16))


def test_every_stop_reason_is_a_stop():
    for reason in ("stale", "estop", "rejected", "unconfirmed", "deadman", "shutdown", "startup"):
        assert Decision((0.0,), 0, 0, reason).stopped
    assert not Decision((0.0,), 0, 0, "policy").stopped and not Decision((0.0,), 0, 0, "teleop").stopped


def test_a_bridges_stop_revokes_even_a_confirmation_given_during_an_earlier_one():
    """The bridge waits for the stop labelled BRIDGE_ACK and for nothing else: it must carry the
    revocation every time, also when the filter was already halted for the same cause (a second
    freeze of the safety node, the operator having confirmed in between)."""
    f = armed(max_rate=(0.0,) * 4)
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=2), now=0.01).reason == "policy"
    first = f.bridge_stopped(0.02)
    assert first.reason == BRIDGE_ACK and first.stopped and f.confirmed_episode is None
    assert f.confirm_episode()[0]  # the operator confirms during the stop ...
    second = f.bridge_stopped(0.03)  # ... and the bridge stops the robot again before it moved
    assert second.reason == BRIDGE_ACK and not f.confirm_pending
    f.on_observation(INSIDE, 0.04)
    assert f.on_policy(*cmd(0.5, 0, 0, 1, episode=2, step=1), now=0.04).reason == "unconfirmed"
    assert f.counters.revoked == 2
