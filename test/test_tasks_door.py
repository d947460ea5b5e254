"""The door-open task against the real Meta-World / MuJoCo simulator."""

import os

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.error import InvalidAction
from gymnasium.utils.env_checker import check_env

import refine_core.tasks  # noqa: F401  (registers the ids)
from refine_core.tasks import get_task
from refine_core.tasks.door_open import (
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
