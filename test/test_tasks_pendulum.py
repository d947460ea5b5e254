"""The pendulum task against Gymnasium's real Pendulum-v1 physics: observation scale and sign
pinned by scripted motions, reward and episode end, the expert, the starter program, and the
scene against the URDF RViz draws."""

from __future__ import annotations

import math
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.classic_control.pendulum import PendulumEnv
from gymnasium.error import InvalidAction
from gymnasium.utils.env_checker import check_env
from urdf_kinematics import urdf_forward_kinematics

from refine_core.policy.contract import build_policy
from refine_core.policy.programs import starter_program
from refine_core.tasks import get_task
from refine_core.tasks.pendulum.env import PendulumSemantic, wrap_angle
from refine_core.tasks.pendulum.expert import energy
from refine_core.tasks.view import TaskView

ROOT = Path(__file__).resolve().parents[1]
DT = 0.05


@pytest.fixture
def env():
    e = PendulumSemantic()
    yield e
    e.close()


def _place(env, angle: float, velocity: float = 0.0) -> np.ndarray:
    """Put the pendulum at a chosen state (stock angle convention) and read it back."""
    env.reset(seed=0)
    env.state = np.array([angle, velocity], dtype=np.float64)
    return env.semantic_observation()


def test_check_env_passes_with_and_without_rendering():
    check_env(PendulumSemantic(), skip_render_check=True)
    e = PendulumSemantic(render_mode="rgb_array")
    check_env(e)
    e.reset(seed=1)
    frame = e.render()
    assert frame.shape == (500, 500, 3) and frame.std() > 0
    e.close()


def test_registered_id_truncates_at_200_steps():
    e = gym.make("refine/Pendulum-v0")
    assert e.spec.max_episode_steps == 200
    e.reset(seed=3)
    for t in range(200):
        _, _, term, trunc, _ = e.step(np.zeros(1, dtype=np.float32))
        assert not term and trunc == (t == 199)
    e.close()


def test_angle_is_zero_upright_pi_hanging_and_positive_counter_clockwise(env):
    """A positive torque on the hanging pendulum turns it counter-clockwise: the angle leaves
    +-pi on the negative side (pi + a little, wrapped), and the velocity rises by exactly
    3 rad/s^2 per N m for one 0.05 s step (gravity is zero straight down)."""
    assert _place(env, 0.0)[0] == 0.0
    hanging = _place(env, math.pi)
    assert abs(hanging[0]) == pytest.approx(math.pi, abs=1e-6)
    obs, *_ = env.step(np.array([2.0], dtype=np.float32))
    assert obs[1] == pytest.approx(3.0 * 2.0 * DT, abs=1e-6)
    assert obs[0] == pytest.approx(-math.pi + obs[1] * DT, abs=1e-5)
    obs, *_ = env.step(np.array([2.0], dtype=np.float32))
    assert -math.pi < obs[0] < -math.pi + 0.1  # still going counter-clockwise past the bottom


def test_angular_velocity_is_rad_per_s_and_gravity_tips_a_lean_further(env):
    """Released at rest 0.1 rad counter-clockwise of upright, gravity adds 15 sin(0.1) rad/s^2:
    the velocity (rad/s) is positive and the angle advances by velocity * 0.05 s per step."""
    previous = _place(env, 0.1)
    for _ in range(5):
        obs, *_ = env.step(np.zeros(1, dtype=np.float32))
        expected = previous[1] + 15.0 * math.sin(previous[0]) * DT
        assert obs[1] == pytest.approx(expected, rel=1e-5)
        assert obs[0] - previous[0] == pytest.approx(obs[1] * DT, rel=1e-5)
        previous = obs
    assert previous[0] > 0.1 and previous[1] > 0


def test_angle_stays_wrapped_through_full_turns(env):
    _place(env, math.pi, 1.0)
    angles = []
    for _ in range(200):  # pump with full torque along the motion: it spins over the top
        obs, *_ = env.step(np.array([2.0 * np.sign(env.state[1] or 1.0)], dtype=np.float32))
        angles.append(obs[0])
    angles = np.array(angles)
    assert np.all((angles >= -math.pi) & (angles < math.pi))
    assert np.sum(np.abs(np.diff(angles)) > math.pi) >= 2, "it went over the top at least twice"
    assert env.observation_space.contains(obs)


def test_reward_is_the_stock_cost_of_the_state_before_the_step(env):
    stock = PendulumEnv()
    obs, _ = env.reset(seed=11)
    stock.reset(seed=11)
    rng = np.random.default_rng(0)
    for _ in range(50):
        u = rng.uniform(-2, 2, 1).astype(np.float32)
        expected = -(obs[0] ** 2 + 0.1 * obs[1] ** 2 + 0.001 * float(u[0]) ** 2)
        obs, reward, _, _, info = env.step(u)
        _, stock_reward, *_ = stock.step(u)
        assert reward == pytest.approx(expected, rel=1e-4, abs=1e-5)
        assert reward == pytest.approx(stock_reward, rel=1e-7)
        assert info["success"] == float(abs(obs[0]) < 0.2)
    _place(env, math.pi)  # the task text: hanging still costs about 9.9 per step
    assert env.step(np.zeros(1, dtype=np.float32))[1] == pytest.approx(-math.pi**2, abs=1e-6)


def test_energy_changes_at_three_torque_velocity(env):
    """The task text's energy measure: 0 upright at rest, -30 hanging, and a torque u adds
    3 u w per second to it (compared with the same step unpowered, so the integrator's own
    drift cancels): pushing along the motion pumps energy in, against it takes it out."""
    assert energy(0.0, 0.0) == 0.0 and energy(math.pi, 0.0) == pytest.approx(-30.0)
    for angle, velocity in ((2.0, 1.5), (-2.5, -3.0), (0.4, 2.0)):
        gains = {}
        for u in (0.0, 1.0, -1.0):
            obs = _place(env, angle, velocity)
            after, *_ = env.step(np.array([u], dtype=np.float32))
            gains[u] = energy(*after) - energy(*obs)
        assert gains[1.0] - gains[0.0] == pytest.approx(3.0 * velocity * DT, rel=0.2)
        assert gains[-1.0] - gains[0.0] == pytest.approx(-3.0 * velocity * DT, rel=0.2)


def test_bad_actions_raise_typed_errors(env):
    env.reset(seed=0)
    with pytest.raises(InvalidAction):
        env.step(np.array([np.nan]))
    with pytest.raises(InvalidAction):
        env.step(np.zeros(2))
    with pytest.raises(RuntimeError):
        PendulumSemantic().step(np.zeros(1))
    with pytest.raises(ValueError, match="render_mode"):
        PendulumSemantic(render_mode="video")


def test_same_seed_same_episode_and_seeds_differ():
    def run(seed):
        e = PendulumSemantic()
        obs, _ = e.reset(seed=seed)
        out = [obs]
        for k in range(30):
            out.append(e.step(np.array([math.sin(k / 5)], dtype=np.float32))[0])
        return np.array(out)

    np.testing.assert_array_equal(run(5), run(5))
    assert not np.allclose(run(5)[0], run(6)[0])


def _episode(task, env, policy, seed):
    obs, _ = env.reset(seed=seed)
    observations, rewards, infos = [obs], [], []
    done = False
    while not done:
        obs, r, term, trunc, info = env.step(policy(obs))
        observations.append(obs)
        rewards.append(r)
        infos.append(info)
        done = term or trunc
    return task.episode_summary(observations, rewards, infos)


def test_expert_swings_up_and_balances_on_every_eval_seed():
    task = get_task("pendulum")
    env = task.make_env()
    expert = task.expert(env)
    summaries = [_episode(task, env, expert, seed) for seed in task.spec.eval_seeds]
    env.close()
    returns = [s["return"] for s in summaries]
    assert all(s["success"] == 1.0 for s in summaries), returns
    assert np.mean(returns) > -250 and min(s["upright_fraction"] for s in summaries) > 0.5
    # doing nothing from the same starts is far worse
    env = task.make_env()
    idle = [_episode(task, env, lambda o: np.zeros(1, np.float32), s)["return"] for s in task.spec.eval_seeds[:3]]
    env.close()
    assert max(idle) < np.mean(returns) - 300


def test_spec_and_summary():
    task = get_task("pendulum")
    spec = task.spec
    assert spec.observation_columns == ("angle", "angular_velocity")
    assert spec.action_names == ("torque",) and spec.metric.higher_is_better
    assert spec.episode_steps == 200 and spec.control_period_s == DT
    assert "counter-clockwise" in spec.describe()
    obs = [np.array([3.0, 0.0])] + [np.array([0.05, 0.0])] * 25
    s = task.episode_summary(obs, [-1.0] * 25, [{}] * 25)
    assert s["success"] == 1.0 and s["return"] == -25.0 and s["upright_fraction"] == 1.0
    obs[-1] = np.array([0.5, 0.0])
    assert task.episode_summary(obs, [-1.0] * 25, [{}] * 25)["success"] == 0.0
    with pytest.raises(ValueError):
        task.split_observation(np.zeros(3))


def test_starter_program_follows_the_contract_and_balances_near_upright():
    """The task's PD starter builds under the contract, and from a small lean it balances
    (it cannot swing up: that is what refinement is for)."""
    import torch

    task = get_task("pendulum")
    policy = build_policy(starter_program("pendulum"), task.spec)
    env = PendulumSemantic()

    def act(obs):
        with torch.no_grad():
            mean, _tril, info = policy(torch.as_tensor(obs, dtype=torch.float32)[None])
        assert set(info) == {"weight_k_angle", "weight_k_velocity", "latent_restoring",
                             "latent_damping", "latent_torque_command"}
        return mean[0].numpy()

    obs = _place(env, 0.3)
    for _ in range(100):
        obs, *_ = env.step(act(obs))
    assert abs(obs[0]) < 0.01 and abs(obs[1]) < 0.05
    low = act(np.array([3.0, 0.0], np.float32))
    assert -2.0 <= low[0] <= 2.0  # clipped to the motor's range


def test_scene_matches_the_urdf_rviz_draws(env):
    """The bob marker sits where urdf/pendulum.urdf puts the bob for the published joint
    angle, for angles all round the circle."""
    task = get_task("pendulum")
    for angle in (0.0, 0.7, -1.9, 3.0):
        _place(env, angle, 0.5)
        scene = TaskView(task).scene(env)
        assert scene.joints.names == ("pendulum_joint",)
        assert scene.joints.positions == pytest.approx((wrap_angle(angle),))
        poses = urdf_forward_kinematics(ROOT / "urdf" / "pendulum.urdf",
                                        dict(zip(scene.joints.names, scene.joints.positions, strict=True)))
        bob = next(s for s in scene.shapes if s.ns == "bob")
        assert bob.pose.position == pytest.approx(tuple(poses["bob"][:3, 3]), abs=1e-9)
        assert scene.trail.position == bob.pose.position
        # the rod cylinder's axis (its local z) points from the pivot to the bob
        from scipy.spatial.transform import Rotation

        rod = next(s for s in scene.shapes if s.ns == "rod")
        axis = Rotation.from_quat(rod.pose.orientation).apply([0.0, 0.0, 1.0])
        pivot = np.array(next(s for s in scene.shapes if s.ns == "pivot").pose.position)
        assert axis == pytest.approx((np.array(bob.pose.position) - pivot) / 1.0, abs=1e-9)
    # from a logged row alone: the same picture without the torque arrow
    row = TaskView(task).scene_from_observation({"angle": 0.7, "angular_velocity": 0.5})
    assert {s.ns for s in row.shapes} == {"pivot", "rod", "bob"}
    assert TaskView(task).scene_from_observation({"angle": float("nan"), "angular_velocity": 0.0}) is None
