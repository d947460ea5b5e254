"""The semantic car-racing env against the real Box2D simulator and the stock CarRacing."""

import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.box2d import car_racing as stock
from gymnasium.error import InvalidAction
from gymnasium.utils.env_checker import check_env

import refine_core.tasks  # noqa: F401  (registers the ids)
from refine_core.tasks import UnknownTaskError, get_task, task_names
from refine_core.tasks.car_racing import CarRacingSemantic, curb_flags, wrap_angle


@pytest.fixture
def env():
    e = CarRacingSemantic()
    yield e
    e.close()


def _move_car(env, offset=(0.0, 0.0), rotate=0.0):
    """Rigidly move the whole car (hull and wheels) about the hull centre."""
    hull = env.car.hull
    centre = np.array(hull.position)
    c, s = math.cos(rotate), math.sin(rotate)
    for body in [hull, *env.car.wheels]:
        rel = np.array(body.position) - centre
        new = (
            centre + np.array(offset) + np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1]])
        )
        body.transform = ((float(new[0]), float(new[1])), body.angle + rotate)


def test_check_env_passes(env):
    check_env(env, skip_render_check=True)


def test_registered_id_has_the_episode_limit():
    e = gym.make("refine/CarRacingSemantic-v0")
    assert e.spec.max_episode_steps == 1000
    obs, _ = e.reset(seed=3)
    assert obs["tiles"].shape == (12, 4) and obs["tiles"].dtype == np.float32
    assert obs["indicators"].shape == (7,) and obs["indicators"].dtype == np.float32
    assert e.observation_space.contains(obs)
    e.close()


def test_car_left_of_centre_gives_positive_x(env):
    env.reset(seed=5)
    g = env.track_geometry()
    i = env.track_index
    half = stock.TRACK_WIDTH
    _move_car(env, offset=tuple(0.5 * half * g.left[i]))
    left = env.semantic_observation()["tiles"]
    assert left[0, 0] == pytest.approx(0.1, abs=0.02)
    _move_car(env, offset=tuple(-1.5 * half * g.left[i]))  # now 1.0 half-width to the right
    right = env.semantic_observation()["tiles"]
    assert right[0, 0] == pytest.approx(-0.2, abs=0.03)
    assert right[0, 0] < -0.19  # at the edge of the road in these units


def test_tiles_are_ahead_nearest_first(env):
    obs, _ = env.reset(seed=5)
    y = obs["tiles"][:, 1]
    assert y[0] <= 1e-6  # the car has not passed tile 0's centre
    assert np.all(np.diff(y) < 0)  # each further tile is further ahead
    tile_units = env.track_geometry().tile_length * env.units_per_world
    assert np.diff(y).mean() == pytest.approx(-tile_units, rel=0.1)


def test_theta_positive_when_road_turns_left_of_car(env):
    env.reset(seed=5)
    before = env.semantic_observation()["tiles"][0, 2]
    _move_car(env, rotate=-0.4)  # car now points to the right of the road
    after = env.semantic_observation()["tiles"][0, 2]
    assert after == pytest.approx(before + 0.4, abs=1e-4)
    # and on the track itself: a left bend ahead shows as increasing theta
    g = env.track_geometry()
    turn = wrap_angle(np.roll(g.heading, -6) - g.heading)
    i = int(np.argmax(turn))  # sharpest left bend over 6 tiles
    assert turn[i] > 0.2
    start = (i - 2) % len(g)
    tiles = g.tile_features(g.centres[start], float(g.heading[start]), start)
    assert tiles[0, 2] == pytest.approx(0.0, abs=1e-6)
    assert tiles[8, 2] > 0.2


def test_curb_flags_match_stock_track_and_mark_corners(env):
    env.reset(seed=11)
    g = env.track_geometry()
    n_curb = int(g.border.sum())
    # the stock env draws one extra red-white polygon per curb tile
    assert n_curb == len(env.road_poly) - len(env.track)
    assert n_curb > 0
    turn = np.abs(wrap_angle(g.heading - np.roll(g.heading, 1)))
    assert turn[g.border > 0].mean() > 2 * turn[g.border == 0].mean()
    np.testing.assert_array_equal(curb_flags(env.track), g.border > 0)


def test_curbs_appear_in_observation_before_a_corner(env):
    env.reset(seed=11)
    g = env.track_geometry()
    first = int(np.flatnonzero(g.border)[0])
    start = (first - 5) % len(g)
    tiles = g.tile_features(g.centres[start], float(g.heading[start]), start)
    assert tiles[5, 3] == 1.0 and tiles[0, 3] in (0.0, 1.0)


def test_indicators(env):
    env.reset(seed=2)
    for _ in range(60):
        obs, *_ = env.step(np.array([0.0, 1.0, 0.0], dtype=np.float32))
    st = env.car_state()
    ind = obs["indicators"]
    assert ind[0] == pytest.approx(st["speed"] / 100, rel=1e-5) and ind[0] > 0.2
    assert ind[1] == pytest.approx(float(wrap_angle(st["angle"])) / math.pi, abs=1e-5)
    assert ind[2] == pytest.approx(st["angular_velocity"], abs=1e-5)
    # ABS readings on the speed scale: omega * wheel radius (0.54) / 100, not raw rad/s
    np.testing.assert_allclose(ind[3:], np.asarray(st["wheel_omegas"]) * 0.54 / 100, rtol=1e-5)
    assert ind[5] > 0 and ind[6] > 0  # rear wheels roll forwards


def test_same_reward_as_stock_env(env):
    ref = stock.CarRacing()
    rng = np.random.default_rng(0)
    actions = np.column_stack([rng.uniform(-0.3, 0.3, 120), np.full(120, 0.6), np.zeros(120)])
    env.reset(seed=7)
    ref.reset(seed=7)
    ours, theirs = [], []
    for a in actions.astype(np.float32):
        ours.append(env.step(a)[1])
        theirs.append(ref.step(a)[1])
    ref.close()
    np.testing.assert_allclose(ours, theirs, atol=1e-9)
    assert sum(r > 0 for r in ours) > 5


def test_same_seed_is_deterministic_and_seeds_differ():
    def run(seed):
        e = CarRacingSemantic()
        obs, _ = e.reset(seed=seed)
        out = [obs["tiles"].copy()]
        rewards = []
        for k in range(80):
            o, r, *_ = e.step(np.array([0.3 * math.sin(k / 9), 0.7, 0.0], dtype=np.float32))
            out.append(np.concatenate([o["tiles"].ravel(), o["indicators"]]))
            rewards.append(r)
        n = len(e.track)
        e.close()
        return out, rewards, n

    a, ra, na = run(42)
    b, rb, nb = run(42)
    c, _, nc = run(43)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert ra == rb
    assert (na, a[0].tolist()) != (nc, c[0].tolist())


def test_no_pixels_rendered_in_step_or_reset(env, monkeypatch):
    def forbidden(mode):
        raise AssertionError(f"rendered {mode} during step/reset")

    monkeypatch.setattr(env, "_render", forbidden)
    env.reset(seed=1)
    for _ in range(20):
        env.step(env.action_space.sample())
    assert env.state is None


def test_rgb_render_on_request():
    e = CarRacingSemantic(render_mode="rgb_array")
    e.reset(seed=1)
    e.step(np.array([0, 0.5, 0], dtype=np.float32))
    frame = e.render()
    assert frame.shape == (400, 600, 3) and frame.std() > 0
    e.close()


def test_bad_actions_raise_typed_errors(env):
    env.reset(seed=1)
    with pytest.raises(InvalidAction):
        env.step(np.array([np.nan, 0, 0]))
    with pytest.raises(InvalidAction):
        env.step(np.zeros(2))
    with pytest.raises(RuntimeError):
        CarRacingSemantic().step(np.zeros(3))


def test_helpers_for_visualisation(env):
    env.reset(seed=4)
    n = len(env.track)
    assert env.track_centreline().shape == (n, 2)
    polys = env.tile_polygons()
    assert polys.shape == (n, 4, 2)
    width = np.linalg.norm(polys[:, 1] - polys[:, 0], axis=1)
    np.testing.assert_allclose(width, 2 * stock.TRACK_WIDTH, rtol=1e-6)
    assert env.border_flags().shape == (n,)
    st = env.car_state()
    assert len(st["wheel_omegas"]) == 4 and len(st["wheel_positions"]) == 4


def test_task_spec_and_registry():
    assert set(task_names()) == {"car_racing", "door_open"}
    task = get_task("car_racing")
    spec = task.spec
    assert spec.policy_class == "RacecarPolicy"
    cols = spec.observation_columns
    assert cols[:4] == ("tile0_x", "tile0_y", "tile0_theta", "tile0_border")
    assert cols[47] == "tile11_border"
    assert cols[48:] == (
        "speed",
        "heading",
        "angular_velocity",
        "wheel_fl",
        "wheel_fr",
        "wheel_rl",
        "wheel_rr",
    )
    assert spec.action_names == ("steer", "gas", "brake")
    assert spec.metric.name == "return" and spec.metric.higher_is_better
    assert spec.episode_steps == 1000 and spec.demo_seed not in spec.eval_seeds
    assert "LEFT" in spec.describe()
    with pytest.raises(UnknownTaskError, match="car_racing"):
        get_task("cartpole")
    with pytest.raises(ValueError):
        task.split_observation({"tiles": np.zeros((3, 4))})


def test_expert_reaches_850_on_eval_seeds():
    task = get_task("car_racing")
    env = task.make_env()
    expert = task.expert(env)
    returns = []
    for seed in task.spec.eval_seeds[:3]:
        obs, _ = env.reset(seed=seed)
        observations, rewards, infos = [obs], [], []
        done = False
        while not done:
            obs, r, term, trunc, info = env.step(expert(obs))
            observations.append(obs)
            rewards.append(r)
            infos.append(info)
            done = term or trunc
        summary = task.episode_summary(observations, rewards, infos)
        assert summary["metric"] == summary["return"]
        returns.append(summary["return"])
        row = task.observation_row(obs)
        assert set(row) == set(task.spec.observation_columns)
    env.close()
    assert np.mean(returns) >= 850, returns


def test_registered_env_truncates_at_1000_steps():
    e = gym.make("refine/CarRacingSemantic-v0")
    e.reset(seed=9)
    idle = np.zeros(3, dtype=np.float32)  # standing still never finishes a lap
    for _ in range(1000):
        _, _, term, trunc, info = e.step(idle)
        assert not term
    assert trunc and info["track_tiles"] > 100
    e.close()


def test_unknown_render_mode_is_rejected():
    with pytest.raises(ValueError, match="render_mode"):
        CarRacingSemantic(render_mode="video")
