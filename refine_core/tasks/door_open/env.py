"""Meta-World ``door-open-v3`` as a fully observed, seed-configured Gymnasium env.

Why a wrapper: Meta-World hides the goal by default (partially observable), picks door
positions from the global NumPy RNG unless a benchmark task is set, and uses a gripper
effort where +1 closes. The method needs the target in the observation, one door
configuration per seed (so demonstration, selection and evaluation seeds mean something),
and a gripper command in [0, 1] where 1 opens. The full contract is the docstring of
`DoorOpenEnv`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import cache
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.error import InvalidAction

EPISODE_STEPS = 500
ARM_JOINTS = tuple(f"right_j{i}" for i in range(7))
CLAW_JOINTS = ("r_close", "l_close")
HANDLE = slice(4, 7)
TARGET = slice(36, 39)


@cache
def _compiled_scene(path: str):
    """The scene's model, compiled once per process: compiling the XML is 0.1 s, most of what
    building an env costs, and an experiment builds one env per episode job (78 in a smoke run)."""
    import mujoco

    return mujoco.MjModel.from_xml_path(path)


@cache
def _door_env_class():
    """Meta-World's door env with its model copied from the per-process compiled one (a copy is
    the same model, so episodes are bit for bit those of a freshly compiled one; each env owns
    its copy, which Meta-World edits per seed)."""
    from metaworld.envs.sawyer_door_v3 import SawyerDoorEnvV3

    class CompiledOnceDoor(SawyerDoorEnvV3):
        def _initialize_simulation(self):
            import mujoco

            model = copy.deepcopy(_compiled_scene(self.fullpath))
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self.height)
            return model, mujoco.MjData(model)

    return CompiledOnceDoor


def gripper_effort(command: float) -> float:
    """Our gripper command (1 open .. 0 closed) -> Meta-World effort (-1 open .. +1 closed)."""
    return 1.0 - 2.0 * float(command)


def gripper_command(effort: float) -> float:
    """Inverse of `gripper_effort`, clipped to [0, 1]."""
    return float(np.clip((1.0 - float(effort)) / 2.0, 0.0, 1.0))


def handle_target_distance(obs: np.ndarray) -> float:
    o = np.asarray(obs, dtype=np.float64)
    return float(np.linalg.norm(o[HANDLE] - o[TARGET]))


def min_handle_target_distance(observations: Sequence[np.ndarray]) -> float:
    """The task metric: the closest the handle came to the target during the episode."""
    if len(observations) == 0:
        return float("nan")
    o = np.asarray(observations, dtype=np.float64).reshape(len(observations), -1)
    return float(np.min(np.linalg.norm(o[:, HANDLE] - o[:, TARGET], axis=1)))


class DoorOpenEnv(gym.Env):
    """Meta-World's Sawyer door-open-v3 with the target visible and the door set by the seed.

    ## Description
    A Sawyer arm must pull a door open by its handle; the door hinges on a vertical axis and
    stands somewhere on the table in front of the robot.

    ## Action Space
    `Box([-1, -1, -1, 0], [1, 1, 1, 1], float32)`: hand motion dx, dy, dz (the hand's set
    point moves by action / 100 m per step) and a gripper command g, 1 open and 0 closed,
    sent to Meta-World as effort 1 - 2 g. Out-of-range actions are clipped; non-finite or
    wrongly shaped ones raise `InvalidAction`.

    ## Observation Space
    `Box((39,), float64)`, Meta-World's layout in metres, world frame (robot base at the
    origin, x to the robot's right, y towards the door, z up): hand xyz (0-2, 4.5 cm above
    the finger tips); gripper opening (3: finger distance / 0.1 m clipped to [0, 1], about
    0.3 closed on nothing); handle xyz (4-6); handle quaternion (7-10) in SciPy's
    scalar-last order (qx, qy, qz, qw), turning about z by the hinge angle; zeros (11-17);
    the same 18 values one step earlier (18-35, a copy of 0-17 at reset); target xyz
    (36-38).

    ## Rewards
    Meta-World's shaped door-open reward (reach, grasp, pull), unchanged.

    ## Starting State
    ``reset(seed=s)`` draws the door position from ``numpy.random.default_rng(s)`` inside
    Meta-World's own door range; the target follows the door (door + (-0.3, -0.45, 0)); the
    arm starts at Meta-World's home pose with the gripper open.

    ## Episode End
    Never terminates; truncates after 500 steps (a further step raises `RuntimeError`).
    ``info`` carries Meta-World's fields (``success``: handle x within 0.08 m of target x)
    plus ``handle_target_distance``.

    ## Arguments
    `render_mode` ("rgb_array", "depth_array", "human"), `camera_name`, `width`, `height` as
    in Meta-World.

    ## Helpers
    On ``env.unwrapped``, for experts and viewers: ``gripper_position()``,
    ``handle_position()``, ``target_position()``, ``door_angle()`` (hinge angle, rad,
    negative while opening), ``door_quaternion()`` (door body, MuJoCo order w, x, y, z),
    ``door_configuration()`` (the seeded door position), ``arm_joint_names()`` /
    ``arm_joint_positions()`` (Sawyer right_j0..right_j6, rad), ``finger_positions()``,
    ``claw_joint_positions()``.

    ## Version History
    - v0: Meta-World door-open-v3, goal visible, seeded door, gripper 1 = open.
    """

    metadata = {"render_modes": ["rgb_array", "depth_array", "human"], "render_fps": 80}

    def __init__(
        self,
        render_mode: str | None = None,
        camera_name: str | None = None,
        width: int = 480,
        height: int = 480,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} not in {self.metadata['render_modes']}")
        raw = _door_env_class()(
            render_mode=render_mode, camera_name=camera_name, width=width, height=height
        )
        raw._partially_observable = False
        raw.__dict__.pop("sawyer_observation_space", None)  # cached for the hidden-goal layout
        raw._set_task_called = True
        raw._freeze_rand_vec = True
        raw._last_rand_vec = np.array(raw.init_config["obj_init_pos"], dtype=np.float64)
        self.raw = raw
        self.render_mode = render_mode
        space = raw.sawyer_observation_space
        self.observation_space = spaces.Box(space.low, space.high, dtype=np.float64)
        self.action_space = spaces.Box(
            np.array([-1, -1, -1, 0], dtype=np.float32),
            np.array([1, 1, 1, 1], dtype=np.float32),
            dtype=np.float32,
        )
        self._low = self.action_space.low.astype(np.float64)
        self._high = self.action_space.high.astype(np.float64)
        self._raw_action = np.zeros(4, dtype=np.float64)
        self._steps = 0
        self._needs_reset = True
        self._arm_qpos = np.array([raw.model.joint(j).qposadr.item() for j in ARM_JOINTS])

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        rs = self.raw._random_reset_space
        rng = np.random.default_rng(seed) if seed is not None else self.np_random
        self.raw._last_rand_vec = rng.uniform(rs.low, rs.high).astype(np.float64)
        obs, info = self.raw.reset()
        self._steps = 0
        self._needs_reset = False
        return obs, dict(info)

    def step(self, action: Any):
        if self._needs_reset:
            raise RuntimeError("call reset() before step() (the episode has ended)")
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (4,) or not np.all(np.isfinite(a)):
            raise InvalidAction(
                f"action must be 4 finite numbers (dx, dy, dz, gripper), got {action!r}"
            )
        raw_a = self._raw_action
        np.clip(a, self._low, self._high, out=raw_a)
        raw_a[3] = 1.0 - 2.0 * raw_a[3]
        obs, reward, _, _, info = self.raw.step(raw_a)
        self._steps += 1
        truncated = self._steps >= EPISODE_STEPS
        self._needs_reset = truncated
        info["handle_target_distance"] = handle_target_distance(obs)
        return obs, float(reward), False, truncated, info

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode='rgb_array'")
            return None
        return self.raw.render()

    def close(self) -> None:
        self.raw.close()

    # -- helpers for visualisation and experts ----------------------------------------------
    def gripper_position(self) -> np.ndarray:
        return np.array(self.raw.get_endeff_pos(), dtype=np.float64)  # obs[0:3]

    def handle_position(self) -> np.ndarray:
        return self.raw.data.geom("handle").xpos.copy()

    def target_position(self) -> np.ndarray:
        return np.array(self.raw._target_pos, dtype=np.float64)

    def door_angle(self) -> float:
        return float(self.raw.data.joint("doorjoint").qpos.item())

    def door_quaternion(self) -> np.ndarray:
        return self.raw.data.body("door").xquat.copy()

    def door_configuration(self) -> np.ndarray:
        return np.array(self.raw._last_rand_vec, dtype=np.float64)

    def arm_joint_names(self) -> tuple[str, ...]:
        return ARM_JOINTS

    def arm_joint_positions(self) -> np.ndarray:
        return self.raw.data.qpos[self._arm_qpos].copy()

    def claw_joint_positions(self) -> np.ndarray:
        """The two claw slide joints (r_close, l_close), m; 0 is fully open."""
        d = self.raw.data
        return np.array([d.joint(name).qpos.item() for name in CLAW_JOINTS])

    def finger_positions(self) -> np.ndarray:
        d = self.raw.data
        return np.stack([d.body("rightclaw").xpos, d.body("leftclaw").xpos]).copy()

