"""The door-opening `Task`: spec text for program authors, env factory, expert, summaries,
scene and diagnostic features. Meta-World is imported only when an env or the expert is made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.base import Expert, Task
from refine_core.tasks.door_open import ENTRY
from refine_core.tasks.door_open.env import EPISODE_STEPS, min_handle_target_distance
from refine_core.tasks.scene import Scene
from refine_core.tasks.spec import ActionSpec, InputSpec, MetricSpec, TaskSpec

ENV_ID = ENTRY.env_id

_FIRST = (
    "gripper_x",
    "gripper_y",
    "gripper_z",
    "gripper_open",
    "handle_x",
    "handle_y",
    "handle_z",
    # Meta-World fills 7-10 from SciPy's Rotation.as_quat(): scalar-last order
    "door_qx",
    "door_qy",
    "door_qz",
    "door_qw",
    *(f"unused_{i}" for i in range(11, 18)),
)
_COLUMNS = (*_FIRST, *(f"prev_{c}" for c in _FIRST), "target_x", "target_y", "target_z")

DESCRIPTION = """\
A Sawyer robot arm (Meta-World door-open-v3, MuJoCo) must pull a door open by its handle.
The door hinges on a vertical axis; its position on the table changes with the episode
seed. Success is when the handle's x coordinate is within 0.08 m of the target's x. The
target (the point the handle should reach when the door is open) lies about 0.5 m to the
left of the closed handle and 0.25 m closer to the robot, and is part of the observation.
Observation `features` (39,), metres in the world frame (origin at the robot's base, x to
the robot's right, y away from the robot towards the door, z up): hand xyz (0-2; the
gripper's hand, about 4.5 cm above the point between the finger tips); gripper opening (3):
the distance between the two fingers divided by 0.1 m and clipped to [0, 1], so 1 = fully
open and about 0.3 = closed on nothing; door handle xyz (4-6); handle orientation
quaternion (7-10, order qx, qy, qz, qw; it turns about the vertical axis as the door swings,
clockwise seen from above while opening); zeros (11-17); the same 18 values one step earlier
(18-35; at the first step they repeat the current values), so differences give velocities;
target xyz (36-38), fixed for the episode.
Actions: dx, dy, dz in [-1, 1] move the hand's set point by action / 100 m per step along
each axis, so a held command of 1 moves the hand about 1 cm per step after a few steps;
gripper in [0, 1], 1 = open, 0 = closed.
Episodes last 500 steps and do not end on success.
"""


def make_spec() -> TaskSpec:
    return TaskSpec(
        name="door_open",
        env_id=ENV_ID,
        description=DESCRIPTION,
        policy_class="OpenDoorPolicy",
        inputs=(
            InputSpec(
                "features",
                (39,),
                _COLUMNS,
                "Meta-World door-open observation with the target visible (see columns).",
            ),
        ),
        actions=(
            ActionSpec("dx", -1.0, 1.0, "gripper motion along x (about 1 cm per step at 1)"),
            ActionSpec("dy", -1.0, 1.0, "gripper motion along y"),
            ActionSpec("dz", -1.0, 1.0, "gripper motion along z"),
            ActionSpec("gripper", 0.0, 1.0, "gripper command: 1 open, 0 closed"),
        ),
        metric=MetricSpec(
            "min_handle_target_distance",
            False,
            "minimum over the episode of the distance (m) between handle (4-6) and target (36-38)",
        ),
        episode_steps=EPISODE_STEPS,
        control_period_s=0.0125,  # Meta-World steps 5 x 2.5 ms of MuJoCo per action
    )


class DoorOpenTask(Task):
    def __init__(self) -> None:
        self.spec = make_spec()

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        return gym.make(ENV_ID, render_mode=render_mode)

    def make_camera_env(self, width: int, height: int) -> gym.Env:
        # MuJoCo renders at the requested size; "corner" frames the arm and the door
        return gym.make(ENV_ID, render_mode="rgb_array", width=width, height=height,
                        camera_name="corner")

    def expert(self, env: gym.Env) -> Expert:
        from refine_core.tasks.door_open.expert import DoorExpert

        return DoorExpert(env)

    def scene(self, env: gym.Env) -> Scene:
        from refine_core.tasks.door_open.scene import door_scene

        return door_scene(env)

    def scene_from_observation(self, row: Mapping[str, float]) -> Scene | None:
        from refine_core.tasks.door_open.scene import observation_scene

        return observation_scene(row)

    def diagnostic_checks(self) -> tuple[list[str], list[str]]:
        from refine_core.tasks.door_open.diagnostics import checks

        return checks(self.spec)

    def diagnostic_features(self) -> dict[str, str]:
        cols = self.spec.input("features").columns
        gripper, handle, target = cols[0:3], cols[4:7], cols[36:39]

        def dist(a: Sequence[str], b: Sequence[str]) -> str:
            terms = " + ".join(f"(C({x!r}) - C({y!r})) ** 2" for x, y in zip(a, b, strict=True))
            return f"np.sqrt({terms})"

        return {
            "handle_gripper_distance": dist(gripper, handle),
            "handle_gripper_xy": dist(gripper[:2], handle[:2]),
            "gripper_above_handle": f"C({gripper[2]!r}) - C({handle[2]!r})",
            "handle_target_distance": dist(handle, target),
        }

    def split_observation(self, obs: Any) -> dict[str, np.ndarray]:
        f = np.asarray(obs, dtype=np.float32)
        if f.shape != (39,):
            raise ValueError(f"door_open observation has shape {f.shape}; want (39,)")
        return {"features": f}

    def episode_summary(
        self, observations: Sequence[Any], rewards: Sequence[float], infos: Sequence[dict]
    ) -> dict[str, float]:
        return {
            "return": float(np.sum(np.asarray(rewards, dtype=np.float64))),
            "metric": min_handle_target_distance(observations),
            "success": 1.0 if any(float(i.get("success", 0.0)) > 0 for i in infos) else 0.0,
            "steps": float(len(rewards)),
        }
