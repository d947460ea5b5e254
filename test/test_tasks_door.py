"""The door-open task against the real Meta-World / MuJoCo simulator."""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction
from gymnasium.utils.env_checker import check_env

import refine_core.tasks  # noqa: F401  (registers the ids)
from refine_core.tasks import get_task
from refine_core.tasks.door_open.env import (
    DoorOpenEnv,
    gripper_command,
    gripper_effort,
    min_handle_target_distance,
)


@pytest.fixture(scope="module")
def env():
    e = DoorOpenEnv()
    yield e
    e.close()


def test_check_env_passes():
    e = DoorOpenEnv()
    check_env(e, skip_render_check=True)
    e.close()


def test_seed_fixes_the_configuration(env):
    a, _ = env.reset(seed=7)
    conf_a = env.door_configuration()
    env.step(env.action_space.sample())
    b, _ = env.reset(seed=7)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(conf_a, env.door_configuration())
    handles = set()
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        handles.add(tuple(np.round(obs[4:7], 6)))
    assert len(handles) == 5


def test_target_is_visible(env):
    obs, _ = env.reset(seed=3)
    np.testing.assert_allclose(obs[36:39], env.target_position(), atol=1e-9)
    assert np.linalg.norm(obs[36:39]) > 0.3
    np.testing.assert_allclose(obs[4:7], env.handle_position(), atol=1e-9)
    # the target moves with the door configuration
    other, _ = env.reset(seed=4)
    assert not np.allclose(other[36:39], obs[36:39])


def test_gripper_mapping(env):
    assert gripper_effort(1.0) == -1.0 and gripper_effort(0.0) == 1.0
    assert gripper_command(gripper_effort(0.3)) == pytest.approx(0.3)
    env.reset(seed=1)
    for _ in range(15):
        obs, *_ = env.step(np.array([0, 0, 0, 0.0], dtype=np.float32))
    closed = obs[3]
    for _ in range(15):
        obs, *_ = env.step(np.array([0, 0, 0, 1.0], dtype=np.float32))
    opened = obs[3]
    assert opened > closed + 0.3


def test_truncates_at_500_and_refuses_more():
    e = gym.make("refine/DoorOpen-v0")
    e.reset(seed=0)
    zero = np.zeros(4, dtype=np.float32)
    for t in range(500):
        _, _, term, trunc, info = e.step(zero)
        assert not term
        assert trunc == (t == 499)
        assert "handle_target_distance" in info and "success" in info
    with pytest.raises(RuntimeError):
        e.step(zero)
    e.close()


def test_bad_action_is_a_typed_error(env):
    env.reset(seed=0)
    with pytest.raises(InvalidAction):
        env.step(np.array([0, 0, np.inf, 0]))
    with pytest.raises(InvalidAction):
        env.step(np.zeros(3))


def test_metric_and_summary():
    task = get_task("door_open")
    obs = [np.zeros(39) for _ in range(3)]
    obs[0][4:7] = [0.0, 0.0, 0.0]
    obs[0][36:39] = [0.3, 0.4, 0.0]  # 0.5 away
    obs[1][4:7] = [0.1, 0.0, 0.0]
    obs[1][36:39] = [0.1, 0.2, 0.0]  # 0.2 away
    obs[2][36:39] = [1.0, 0.0, 0.0]  # 1.0 away
    assert min_handle_target_distance(obs) == pytest.approx(0.2)
    s = task.episode_summary(obs, [1.0, 2.0], [{"success": 0.0}, {"success": 1.0}])
    assert s == {"return": 3.0, "metric": pytest.approx(0.2), "success": 1.0, "steps": 2.0}
    assert task.episode_summary(obs, [0.0], [{"success": 0.0}])["success"] == 0.0


def test_spec_columns():
    spec = get_task("door_open").spec
    cols = spec.observation_columns
    assert len(cols) == 39 and spec.policy_class == "OpenDoorPolicy"
    assert cols[:7] == (
        "gripper_x",
        "gripper_y",
        "gripper_z",
        "gripper_open",
        "handle_x",
        "handle_y",
        "handle_z",
    )
    assert cols[7:11] == ("door_qx", "door_qy", "door_qz", "door_qw")
    assert cols[18] == "prev_gripper_x" and cols[35] == "prev_unused_17"
    assert cols[36:] == ("target_x", "target_y", "target_z")
    assert spec.metric.name == "min_handle_target_distance" and not spec.metric.higher_is_better
    assert spec.action_names == ("dx", "dy", "dz", "gripper")
    assert spec.episode_steps == 500


def test_quaternion_columns_are_scalar_last(env):
    obs, _ = env.reset(seed=2)
    q = obs[7:11]
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-6)
    # the handle geom's MuJoCo orientation (w, x, y, z) equals the obs read as (x, y, z, w)
    import mujoco

    w = np.empty(4)
    mujoco.mju_mat2Quat(w, env.raw.data.geom("handle").xmat)
    if w[0] * q[3] < 0:
        w = -w
    np.testing.assert_allclose(q, [w[1], w[2], w[3], w[0]], atol=1e-6)


def test_helpers(env):
    env.reset(seed=5)
    assert env.arm_joint_names() == tuple(f"right_j{i}" for i in range(7))
    q = env.arm_joint_positions()
    assert q.shape == (7,) and np.all(np.isfinite(q))
    assert env.door_angle() == pytest.approx(0.0, abs=1e-3)
    assert env.door_quaternion().shape == (4,)
    assert env.finger_positions().shape == (2, 3)
    obs, *_ = env.step(np.zeros(4, dtype=np.float32))
    np.testing.assert_allclose(env.gripper_position(), obs[0:3], atol=1e-6)


def test_rgb_array_render_headless():
    if os.environ.get("MUJOCO_GL") != "osmesa":
        pytest.skip("this check is for the headless osmesa backend (MUJOCO_GL=osmesa)")
    e = DoorOpenEnv(render_mode="rgb_array", width=64, height=48)
    e.reset(seed=0)
    frame = e.render()
    assert frame.shape == (48, 64, 3) and frame.dtype == np.uint8 and frame.std() > 0
    e.close()


def test_expert_opens_the_door_on_most_eval_seeds():
    task = get_task("door_open")
    e = task.make_env()
    expert = task.expert(e)
    successes, metrics = [], []
    for seed in task.spec.eval_seeds[:3]:
        obs, _ = e.reset(seed=seed)
        observations, rewards, infos = [obs], [], []
        done = False
        while not done:
            obs, r, term, trunc, info = e.step(expert(obs))
            observations.append(obs)
            rewards.append(r)
            infos.append(info)
            done = term or trunc
        s = task.episode_summary(observations, rewards, infos)
        successes.append(s["success"])
        metrics.append(s["metric"])
    e.close()
    assert sum(successes) >= 2, successes
    assert min(metrics) < 0.1


def test_fresh_envs_with_the_same_seed_agree():
    def run(seed):
        e = DoorOpenEnv()
        task = get_task("door_open")
        expert = task.expert(e)
        obs, _ = e.reset(seed=seed)
        out = [obs]
        for _ in range(40):
            obs, *_ = e.step(expert(obs))
            out.append(obs)
        e.close()
        return np.array(out)

    a, b = run(123), run(123)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(run(124)[0], a[0])


# -- scale and sign of every observation coordinate, pinned by scripted motions ------------------
AXES = {"x": 0, "y": 1, "z": 2}


@pytest.mark.parametrize("direction", [1.0, -1.0], ids=["plus", "minus"])
@pytest.mark.parametrize("axis", list(AXES))
def test_hand_xyz_moves_1cm_per_step_along_the_commanded_axis(env, axis, direction):
    """A held command of +-1 on one axis moves the hand (obs 0-2, the hand body, 4.5 cm above
    the finger tips) about 1 cm per step along that world axis and barely along the others."""
    i = AXES[axis]
    obs, _ = env.reset(seed=1)
    path = [obs[0:3]]
    action = np.zeros(4, dtype=np.float32)
    action[i], action[3] = direction, 1.0
    for _ in range(15):
        obs, *_ = env.step(action)
        path.append(obs[0:3])
    step = np.diff(np.array(path), axis=0)[-4:].mean(axis=0)
    assert direction * step[i] == pytest.approx(0.0095, abs=0.0015)
    assert np.all(np.abs(np.delete(step, i)) < 0.002)
    np.testing.assert_allclose(obs[0:3], env.raw.data.body("hand").xpos, atol=1e-9)
    tip_gap = obs[0:3] - env.raw.tcp_center
    assert tip_gap[2] == pytest.approx(0.045, abs=0.003) and np.all(np.abs(tip_gap[:2]) < 0.003)


def test_world_frame_has_the_robot_at_the_origin_and_the_door_along_y(env):
    obs, _ = env.reset(seed=3)
    np.testing.assert_allclose(env.raw.data.body("right_arm_base_link").xpos, 0.0, atol=1e-9)
    assert obs[5] > obs[1] and env.door_configuration()[1] > 0.8  # the door is out along +y
    assert obs[6] > 0.1  # handle above the table top
    to_target = obs[36:39] - obs[4:7]  # target: about 0.5 m left and 0.25 m closer to the robot
    assert to_target == pytest.approx([-0.49, -0.24, 0.0], abs=0.02)


def test_gripper_opening_is_finger_distance_over_10cm(env):
    """Obs 3 is the claw distance / 0.1 m clipped to [0, 1]: 1 fully open, about 0.3 closed
    on nothing, in between for a half command; command 1 means open."""
    env.reset(seed=1)
    readings = {}
    for command in (1.0, 0.0, 0.5):
        for _ in range(40):
            obs, *_ = env.step(np.array([0, 0, 0, command], dtype=np.float32))
        readings[command] = obs[3]
        d = env.raw.data
        gap = np.linalg.norm(d.body("rightclaw").xpos - d.body("leftclaw").xpos)
        assert obs[3] == pytest.approx(min(gap / 0.1, 1.0), abs=1e-9)
    assert readings[1.0] == pytest.approx(1.0)
    assert readings[0.0] == pytest.approx(0.3, abs=0.05)
    assert readings[0.0] < readings[0.5] < readings[1.0]


def test_handle_xyz_and_quaternion_follow_the_door_as_it_opens(env):
    """While the expert opens the door, obs 4-6 is the handle geom's position, it moves toward
    the target, and the quaternion 7-10 (qx, qy, qz, qw) turns about the vertical axis by
    exactly the hinge angle (negative: clockwise seen from above)."""
    from scipy.spatial.transform import Rotation

    from refine_core.tasks.door_open.expert import DoorExpert

    obs, _ = env.reset(seed=2)
    start = Rotation.from_quat(obs[7:11])
    start_distance = np.linalg.norm(obs[4:7] - obs[36:39])
    expert = DoorExpert(env)
    for _ in range(100):
        obs, *_ = env.step(expert(obs))
        np.testing.assert_allclose(obs[4:7], env.handle_position(), atol=1e-9)
    hinge = env.door_angle()
    assert hinge < -0.5, "the expert swung the door open"
    turn = (Rotation.from_quat(obs[7:11]) * start.inv()).as_rotvec()
    np.testing.assert_allclose(turn, [0.0, 0.0, hinge], atol=1e-6)
    assert np.linalg.norm(obs[4:7] - obs[36:39]) < 0.5 * start_distance


def test_unused_slots_are_zero_and_18_to_35_repeat_the_previous_step(env):
    obs, _ = env.reset(seed=4)
    np.testing.assert_array_equal(obs[18:36], obs[0:18])  # nothing earlier at the first step
    rng = np.random.default_rng(0)
    for _ in range(20):
        previous = obs
        obs, *_ = env.step(rng.uniform([-1, -1, -1, 0], [1, 1, 1, 1]).astype(np.float32))
        np.testing.assert_array_equal(obs[18:36], previous[0:18])
        assert not np.any(obs[11:18]) and not np.any(obs[29:36])


def test_target_is_fixed_and_success_means_handle_x_within_8cm(env):
    from refine_core.tasks.door_open.expert import DoorExpert

    obs, _ = env.reset(seed=5)
    target = obs[36:39].copy()
    np.testing.assert_allclose(target, env.door_configuration() + [-0.3, -0.45, 0.0], atol=1e-9)
    expert = DoorExpert(env)
    outcomes = set()
    for _ in range(150):
        obs, _, _, _, info = env.step(expert(obs))
        np.testing.assert_array_equal(obs[36:39], target)
        within = abs(obs[4] - obs[36]) <= 0.08
        assert info["success"] == float(within)
        outcomes.add(within)
    assert outcomes == {True, False}
