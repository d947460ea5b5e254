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
from refine_core.tasks.car_racing.env import CarRacingSemantic, curb_flags, wrap_angle


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
    assert set(task_names()) == {"car_racing", "door_open", "pendulum"}
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
    assert spec.description_variant == "published" and "left of the centre" in spec.describe()
    assert "LEFT" in get_task("car_racing", "detailed").spec.describe()
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
        assert infos[-1]["success"] == summary["success"] == float(infos[-1].get("lap_finished", False))
        top = max(float(o["indicators"][0]) for o in observations)
        assert 0.8 < top < 1.2, "the task text says the expert reaches about 1"
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


# -- scale and sign of every observation coordinate, pinned by scripted manoeuvres ----------------
# Seed 8 starts on a straight of about 40 tiles, long enough for each manoeuvre below.
STRAIGHT_SEED = 8
LEFT, RIGHT = -1.0, 1.0  # steer command signs


def _drive(env, plan, steps, seed=STRAIGHT_SEED):
    """Reset, then apply `plan(t) -> (steer, gas, brake)` for `steps` steps; returns per step
    the observation, the hull pose and which wheels touch a road tile."""
    env.reset(seed=seed)
    log = []
    for t in range(steps):
        obs, *_ = env.step(np.asarray(plan(t), dtype=np.float32))
        hull = env.car.hull
        log.append({
            "obs": obs,
            "pos": np.array(hull.position, dtype=float),
            "angle": float(hull.angle),
            "on_road": [len(w.tiles) > 0 for w in env.car.wheels],
            "track_index": env.track_index,
        })
    return log


def _accelerate_then(t, then=(0.0, 0.0, 0.0), ramp=30, gas=0.3):
    """Gentle gas for `ramp` steps (no wheel spin), then `then`."""
    return (0.0, gas, 0.0) if t < ramp else then


def _coast(t):
    return _accelerate_then(t)


@pytest.mark.parametrize("side", [LEFT, RIGHT], ids=["left", "right"])
def test_tile_x_sign_and_scale_at_the_grass_edge(env, side):
    """Drift off the road to one side: x takes the side's sign, and the wheels leave the road
    where |x| passes the half-width 0.2 (the wheels sit 0.033 units either side of the centre)."""
    def plan(t):
        if 30 <= t < 36:
            return (0.4 * side, 0.0, 0.0)
        if 36 <= t < 42:
            return (-0.4 * side, 0.0, 0.0)
        return _coast(t)

    log = _drive(env, plan, 160)
    x = np.array([s["obs"]["tiles"][0, 0] for s in log])
    on = np.array([s["on_road"] for s in log])
    expected_sign = 1.0 if side == LEFT else -1.0
    assert expected_sign * x[-1] > 0.5, "the car drifted to its side of the road"
    assert np.all(on[np.abs(x) < 0.15].all(axis=1)), "every wheel is on the road well inside 0.2"
    assert not on[np.abs(x) > 0.30].any(), "no wheel is on the road well beyond 0.2"
    assert (np.abs(x) > 0.30).sum() > 20 and (np.abs(x) < 0.15).sum() > 20


def test_tile_y_grows_at_the_speed_and_tiles_are_0105_apart(env):
    """Coasting along the straight, a fixed tile's y rises by speed * 100 world units/s * 0.03
    units per world unit / 50 steps per s each step; further tiles have more negative y."""
    log = _drive(env, _coast, 60)
    ratios = []
    for before, after in zip(log[40:-1], log[41:], strict=True):
        k = before["track_index"] + 3  # a tile well ahead, still visible one step later
        y0 = before["obs"]["tiles"][k - before["track_index"], 1]
        y1 = after["obs"]["tiles"][k - after["track_index"], 1]
        ratios.append((y1 - y0) / (after["obs"]["indicators"][0] * 100.0 * 0.03 / 50.0))
    assert np.mean(ratios) == pytest.approx(1.0, abs=0.02) and min(ratios) > 0.95
    spacing = np.diff(log[-1]["obs"]["tiles"][:, 1])
    assert np.all(spacing < 0) and spacing.mean() == pytest.approx(-0.105, abs=0.005)
    assert all(s["obs"]["tiles"][0, 1] <= 1e-6 for s in log)  # tile 0 is never behind the car


@pytest.mark.parametrize("side", [LEFT, RIGHT], ids=["left", "right"])
def test_tile_theta_is_road_heading_minus_car_heading_in_radians(env, side):
    """Turning the car left on a straight makes the road turn right relative to the car: theta
    falls by exactly the car's heading change, in radians."""
    log = _drive(env, lambda t: (side * 0.5, 0.0, 0.0) if 30 <= t < 40 else _coast(t), 40)
    before, after = log[29], log[-1]
    turned = after["angle"] - before["angle"]
    assert np.sign(turned) == -side  # a left steer (negative) turns counter-clockwise
    assert abs(turned) > 0.2
    # tiles 4..11 are on the straight in both observations; compare the same tile indices
    shift = after["track_index"] - before["track_index"]
    theta0 = before["obs"]["tiles"][shift + 4 : 12, 2]
    theta1 = after["obs"]["tiles"][4 : 12 - shift, 2]
    np.testing.assert_allclose(theta1 - theta0, -turned, atol=2e-3)


def _stock_curb_flags(env) -> np.ndarray:
    """The curb flag of each tile as the stock env draws it: a red or white polygon (a plain
    tuple colour) follows the tile's grey road polygon."""
    flags: list[bool] = []
    for _poly, colour in env.road_poly:
        if isinstance(colour, tuple):
            flags[-1] = True
        else:
            flags.append(False)
    return np.array(flags)


def test_tile_border_marks_exactly_the_tiles_drawn_with_a_curb(env):
    """Driving the expert through bends, every border value is 0 or 1 and equals the stock
    env's red-white curb for that tile."""
    from refine_core.tasks.car_racing.expert import CarExpert

    obs, _ = env.reset(seed=11)
    drawn = _stock_curb_flags(env)
    assert len(drawn) == len(env.track)
    expert = CarExpert(env)
    seen = 0.0
    for _ in range(400):
        obs, *_ = env.step(expert(obs))
        idx = (env.track_index + np.arange(12)) % len(drawn)
        border = obs["tiles"][:, 3]
        assert set(np.unique(border)) <= {0.0, 1.0}
        np.testing.assert_array_equal(border, drawn[idx].astype(np.float32))
        seen += border.sum()
    assert seen > 50, "the drive passed curbs"


def test_speed_is_distance_per_second_over_100(env):
    """Accelerate, coast, brake: the speed reading is the hull's displacement per second in
    world units divided by 100, never negative."""
    def plan(t):
        return (0.0, 0.3, 0.0) if t < 40 else (0.0, 0.0, 0.0) if t < 60 else (0.0, 0.0, 0.5)

    log = _drive(env, plan, 90)
    speeds = np.array([s["obs"]["indicators"][0] for s in log])
    moved = np.array([np.linalg.norm(b["pos"] - a["pos"]) for a, b in zip(log, log[1:], strict=False)])
    np.testing.assert_allclose(moved[5:] * 50.0 / 100.0, speeds[6:], rtol=0.02, atol=2e-3)
    assert speeds.min() >= 0.0
    assert speeds[39] > speeds[10] > 0.05 and speeds[89] < 0.5 * speeds[59]


@pytest.mark.parametrize("side", [LEFT, RIGHT], ids=["left", "right"])
def test_heading_is_the_direction_of_travel_over_pi(env, side):
    """Heading * pi is the direction the car moves in, 0 facing world +y and growing
    counter-clockwise: a left turn raises it, a right turn lowers it."""
    log = _drive(env, lambda t: (side * 0.5, 0.0, 0.0) if 30 <= t < 45 else _coast(t), 60)
    heading = np.array([s["obs"]["indicators"][1] for s in log])
    assert np.all(np.abs(heading) <= 1.0)
    for a, b in zip(log[50:-1], log[51:], strict=True):  # straight again: motion = heading
        d = b["pos"] - a["pos"]
        travel = float(wrap_angle(math.atan2(d[1], d[0]) - math.pi / 2.0))
        assert b["obs"]["indicators"][1] * math.pi == pytest.approx(travel, abs=0.02)
    change = float(wrap_angle((heading[-1] - heading[29]) * math.pi))
    assert np.sign(change) == -side and abs(change) > 0.3


@pytest.mark.parametrize("side", [LEFT, RIGHT], ids=["left", "right"])
def test_angular_velocity_is_the_heading_rate_in_rad_per_s(env, side):
    """Angular velocity is in rad/s (Box2D's unit; METHOD.md gives none), positive turning
    left: it matches the heading's change per step times 50 steps per second."""
    log = _drive(env, lambda t: (side * 0.5, 0.0, 0.0) if 30 <= t < 45 else _coast(t), 45)
    omega = np.array([s["obs"]["indicators"][2] for s in log])
    angle = np.array([s["angle"] for s in log])
    rate = np.diff(angle) * 50.0
    turning = slice(34, 44)
    assert np.all(np.sign(omega[turning]) == -side) and np.abs(omega[turning]).min() > 0.5
    np.testing.assert_allclose(omega[1:][turning], rate[turning], rtol=0.02)
    # the magnitude the task text quotes: about 3.5 rad/s steering 0.6 at speed 0.3
    sharp = _drive(env, lambda t: (side * 0.6, 0.0, 0.0) if t >= 40 else _coast(t), 70)
    assert sharp[40]["obs"]["indicators"][0] == pytest.approx(0.3, abs=0.05)
    peak = max(abs(s["obs"]["indicators"][2]) for s in sharp[40:])
    assert 3.0 < peak < 4.0


WHEELS = {"wheel_fl": (3, "front", "left"), "wheel_fr": (4, "front", "right"),
          "wheel_rl": (5, "rear", "left"), "wheel_rr": (6, "rear", "right")}


@pytest.mark.parametrize("name", list(WHEELS))
def test_wheel_reading_scale_sign_and_position(env, name):
    """Each ABS reading is wheel surface speed / 100: it reads the speed while rolling straight
    (within 0.8-1.2 of it), is positive rolling forwards, is larger on the outer (right) side
    in a left turn, exceeds the speed on a driven rear wheel that spins under full gas, and
    stays far below the speed while a full brake locks the wheels (Box2D zeroes their spin each
    step; tyre friction turns them a little within the step)."""
    index, axle, side = WHEELS[name]
    mate = {3: 4, 4: 3, 5: 6, 6: 5}[index]  # the wheel on the same axle, other side

    straight = _drive(env, _coast, 60)
    ind = np.array([s["obs"]["indicators"] for s in straight[40:]])
    ratio = ind[:, index] / ind[:, 0]
    assert ind[:, index].min() > 0 and np.all((ratio > 0.8) & (ratio < 1.2)), ratio

    turn = _drive(env, lambda t: (LEFT * 0.6, 0.0, 0.0) if t >= 30 else _coast(t), 50)
    outer_minus_inner = [s["obs"]["indicators"][index] - s["obs"]["indicators"][mate] for s in turn[35:]]
    if side == "right":
        assert min(outer_minus_inner) > 0, "the right wheel is on the outside of a left turn"
    else:
        assert max(outer_minus_inner) < 0, "the left wheel is on the inside of a left turn"

    spin = _drive(env, lambda t: (0.0, 1.0, 0.0), 20)[-1]["obs"]["indicators"]
    if axle == "rear":
        assert spin[index] > 1.5 * spin[0], "the driven rear wheels spin under full gas"
    else:
        assert spin[index] < 1.2 * spin[0], "the front wheels are not driven"

    locked = _drive(env, lambda t: _accelerate_then(t, (0.0, 0.0, 1.0)), 32)[-1]["obs"]["indicators"]
    assert locked[0] > 0.1 and 0.0 <= locked[index] < 0.15 * locked[0]


def test_description_units_are_what_the_simulator_measures(env):
    """The task text promises a 0.4-wide track, tiles about 0.105 long and a car about 0.15
    long (about 1.4 tiles) in observation units, and about 300 tiles per track."""
    from gymnasium.envs.box2d import car_dynamics

    from refine_core.tasks.car_racing.task import DETAILED_DESCRIPTION, PUBLISHED_DESCRIPTION

    env.reset(seed=4)
    units = env.units_per_world
    polys = env.tile_polygons()
    width = np.linalg.norm(polys[:, 1] - polys[:, 0], axis=1) * units
    assert width.mean() == pytest.approx(0.4, rel=1e-6)
    tile = env.track_geometry().tile_length * units
    assert tile == pytest.approx(0.105, abs=0.002)
    ys = [v[1] for f in env.car.hull.fixtures for v in f.shape.vertices]
    length = (max(ys) - min(ys)) * units
    assert length == pytest.approx(0.15, abs=0.005) and length / tile == pytest.approx(1.4, abs=0.05)
    assert car_dynamics.WHEEL_R * car_dynamics.SIZE == pytest.approx(0.54)
    counts = []
    for seed in range(10):
        env.reset(seed=seed)
        counts.append(len(env.track))
    assert 250 <= np.mean(counts) <= 350
    for fact in ("0.4 wide", "about 0.105 long", "about 0.15 long", "about 1.4 tiles", "about 300"):
        assert fact in " ".join(DETAILED_DESCRIPTION.split()), fact
    # the published description's one corrected fact: the car is about 1.4 tiles long, not 3
    for fact in ("0.4 units wide", "|x| = 0.2 is the edge", "about 1.4 tiles long"):
        assert fact in " ".join(PUBLISHED_DESCRIPTION.split()), fact
