"""The door-opening `Task`: spec text for program authors, env factory, expert and summaries.
Meta-World is imported only when an env or the expert is made.

Three descriptions (see `refine_core.tasks.spec`):
- "published" (the default) carries the information the published prompt gave the model, in
  our own words: the feature layout (features 4-6 are "the door's" x, y, z coordinates, not
  named as the handle), the actions without ranges (the published prompt gave none), the
  objective and the reward in one sentence (reaching and grasping the handle, pulling the door
  towards the target, a success bonus, a time penalty), and the published notes (the door turns
  about a vertical axis, the handle is horizontal, the gripper points down). It names no
  simulator, robot model or library, and gives no success rule, frames, offsets, target
  geometry or metric line (a metric line would tie features 4-6 to the target, which the
  published text does not). Under it the analyst sees features 4-6 (and 22-24) as
  `door_x`... columns; the run database keeps their stored names `handle_x`....
- "detailed" adds the true facts we measured (the success rule, where the target lies, the
  frame, the hand offset, the gripper reading, which way the door turns); results produced
  with it say so.
- "legacy_published": the published variant as first worded (it named the simulator and the
  arm, gave action ranges, a reward sentence without the grasp, bonus and time terms, and a
  metric line); kept so the runs recorded with it replay with the words they were sent, never
  a default.
- "robot_owner": what the owner of `arm_real` (an arm behind a Cartesian servo, a parallel
  gripper, a fiducial tag on the handle tracked by a fixed camera) writes about the task on
  that arm: where each feature comes from (the tool from TF, the handle from the tag, which the
  gripper can hide near the handle, the target the owner set), the base frame and its units,
  the commands in m/s, the door as the owner sees it, how the owner judges success, and how
  long a live episode lasts. No simulator, robot-model or library name, no reward and no
  metric line: a robot measures none. The real profiles choose it.

The task's protocol, whatever the variant: the demonstration is the scripted expert's episode
on seed 500, outside every seed group the runs and tables use (evaluation 0-9, selection
100-109, diagnostic 200-201); evaluation executes sampled actions on seeds 0-9 (environment
seed i, action draws seeded by i), as the authors verified their door results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.base import Expert, Task
from refine_core.tasks.door_open import ENTRY
from refine_core.tasks.door_open.env import EPISODE_STEPS, min_handle_target_distance
from refine_core.tasks.spec import (
    LEGACY_VARIANT,
    ROBOT_OWNER_VARIANT,
    ActionSpec,
    InputSpec,
    MetricSpec,
    TaskSpec,
)

ENV_ID = ENTRY.env_id
DEMO_SEED = 500
"""The scripted expert's demonstration: a door outside every seed group runs and tables use."""
EVAL_SEEDS = tuple(range(10))
"""The authors verified the door on seeds 0-9, sampled actions (environment and draws seeded by i)."""

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

PUBLISHED_DESCRIPTION = """\
A robot arm has to open a door: move the gripper to the door's handle and pull the door open to
the desired angle. The reward grows as the gripper reaches and grasps the handle and as the door
is pulled towards the target, with a bonus for success and a small penalty for the time taken.
Notes: the door revolves around a vertical axis; the handle is horizontal; the gripper points
down.
Observation `features` (39,): gripper x, y, z position (0-2); gripper open/close state (3);
x, y, z coordinates of the door (4-6); quaternion of the door's orientation (7-10); unused
(11-17); the same 18 values at the previous step (18-35); x, y, z position of the target the
door should be opened to (36-38).
"""

LEGACY_PUBLISHED_DESCRIPTION = """\
A Sawyer robot arm (Meta-World door-open, MuJoCo simulation) has to open a door: move the
gripper to the door's handle and pull the door open to the desired angle. The reward grows as
the gripper gets closer to the handle and as the door opens towards the target.
Notes: the door revolves around a vertical axis; the handle is horizontal; the gripper points
down.
Observation `features` (39,): gripper x, y, z position (0-2); gripper open/close state (3);
x, y, z coordinates of the door (4-6); quaternion of the door's orientation (7-10); unused
(11-17); the same 18 values at the previous step (18-35); x, y, z position of the target the
door should be opened to (36-38).
"""

DETAILED_DESCRIPTION = """\
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

ROBOT_OWNER_DESCRIPTION = """\
My robot arm has to open a door by its handle. The arm moves its tool (pointing down, its
orientation held) at the velocity I command, and its parallel gripper opens and closes. The
door turns about a vertical hinge on its edge to the arm's left, about 0.4 m from the handle,
and opens towards the arm: the handle, a horizontal bar on the door's face, swings along that
circle towards the arm and to the left. Every episode starts with the door closed and the arm
at its home pose with the gripper open. I count the door as open once the handle has come
within 8 cm of the target point along y.
Commands and readings run at 50 per second; an episode lasts 20 s (1000 steps).
Frames and units: metres in the arm's base frame, x forward from the arm towards the door, y to
the arm's left, z up.
Observation `features` (39,): tool x, y, z (0-2), from the arm's joint encoders; gripper
opening (3), from its finger joint: 1 fully open, 0 closed (in between when it closes on
something); handle x, y, z (4-6) and orientation quaternion x, y, z, w (7-10), from a fiducial
tag on the handle that a fixed camera tracks: near the handle the gripper can hide the tag,
and the last sighting is then repeated, for up to 1.75 s; hidden longer, the readings stop,
the arm is stopped and after 5 s the episode ends; always zero (11-17); the same 18 values
one step earlier (18-35; at the first step the current ones); the target (36-38): where I want
the handle to be when the door is open, the same in every episode.
"""

# Under the published description features 4-6 are "the door's" coordinates: the analyst's
# column names must say so too (stored names are unchanged, see refine_core.tasks.spec).
_PUBLISHED_COLUMNS = tuple((f"{prefix}handle_{axis}", f"{prefix}door_{axis}")
                           for prefix in ("", "prev_") for axis in "xyz")
_VARIANTS = {
    "published": {
        "description": PUBLISHED_DESCRIPTION,
        "features": "The door-open observation; its feature layout is given above.",
        "actions": ("gripper motion along x, relative to its current position",
                    "gripper motion along y, relative to its current position",
                    "gripper motion along z, relative to its current position",
                    "gripper command: 1 open, 0 close"),
        "metric": "",
        "columns": _PUBLISHED_COLUMNS,
        "ranges": False,
    },
    "detailed": {
        "description": DETAILED_DESCRIPTION,
        "features": "Meta-World door-open observation with the target visible (see columns).",
        "actions": ("gripper motion along x (about 1 cm per step at 1)", "gripper motion along y",
                    "gripper motion along z", "gripper command: 1 open, 0 closed"),
        "metric": "the smallest distance (m), over the episode, between the handle (4-6) and the target (36-38)",
        "columns": (),
        "ranges": True,
    },
    ROBOT_OWNER_VARIANT: {
        "description": ROBOT_OWNER_DESCRIPTION,
        "features": "The door observation on my arm; its feature layout is given above.",
        "actions": ("tool velocity along x, as a fraction of 0.1 m/s (the arm's speed limit per axis)",
                    "tool velocity along y, as a fraction of 0.1 m/s",
                    "tool velocity along z, as a fraction of 0.1 m/s",
                    "gripper: 1 open, 0 closed; the gripper moves to that opening (a new goal only when the "
                    "command changes by more than 5 %)"),
        "metric": "",
        "columns": (),
        "ranges": True,
    },
    LEGACY_VARIANT: {
        "description": LEGACY_PUBLISHED_DESCRIPTION,
        "features": "The door-open observation; its feature layout is given above.",
        "actions": ("gripper motion along x, relative to its current position",
                    "gripper motion along y, relative to its current position",
                    "gripper motion along z, relative to its current position",
                    "gripper command: 1 open, 0 close"),
        "metric": "the smallest distance, over the episode, between the door's coordinates (4-6) and the "
                  "target (36-38)",
        "columns": _PUBLISHED_COLUMNS,
        "ranges": True,
    },
}
DESCRIPTIONS: tuple[str, ...] = tuple(_VARIANTS)
"""The description variants, the default (published) first."""


RL_SETTINGS = {"lr": 3e-3, "target_kl": 0.05, "std_scale": 4.0}
"""RL's default here, measured (docs/RL.md; results/door_open/2026-12-05-ours/sweep and
results/door_open/2026-12-05-door-default): the scripted demonstration is nearly noise-free,
so IL fits an action noise of 0.007-0.08 and the shared
default (step 3e-4, KL 0.005 per update) left a program that never opened the door where it was
(0.471); with 4x the noise to explore and a larger step inside a wider trust region, the same
program brought the handle to 0.023 m of its target on 10 of 10 evaluation seeds after 400
resets (from 0.471), while the MLP and the refined program kept their IL weights (the acceptance
rule)."""


def make_spec(description: str = "published") -> TaskSpec:
    text = _VARIANTS[description]
    dx, dy, dz, gripper = text["actions"]
    return TaskSpec(
        name="door_open",
        env_id=ENV_ID,
        description=text["description"],
        policy_class="OpenDoorPolicy",
        inputs=(InputSpec("features", (39,), _COLUMNS, text["features"]),),
        actions=(
            ActionSpec("dx", -1.0, 1.0, dx),
            ActionSpec("dy", -1.0, 1.0, dy),
            ActionSpec("dz", -1.0, 1.0, dz),
            ActionSpec("gripper", 0.0, 1.0, gripper),
        ),
        metric=MetricSpec("min_handle_target_distance", False, text["metric"]),
        episode_steps=EPISODE_STEPS,
        control_period_s=0.0125,  # Meta-World steps 5 x 2.5 ms of MuJoCo per action
        deployed_mode="mean",  # a robot runs the mean action (RL selects in this mode)
        rl_settings=RL_SETTINGS,
        description_variant=description,
        analyst_columns=text["columns"],
        action_ranges_shown=text["ranges"],
        demo_seed=DEMO_SEED,
        eval_seeds=EVAL_SEEDS,
        eval_mode="sample",
    )


class DoorOpenTask(Task):
    description_variants = DESCRIPTIONS
    metric_from_observations = True  # the handle and the target are observed (a fiducial on a robot)

    def __init__(self, description: str = DESCRIPTIONS[0]) -> None:
        self.spec = make_spec(description)

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        return gym.make(ENV_ID, render_mode=render_mode)

    def expert(self, env: gym.Env) -> Expert:
        from refine_core.tasks.door_open.expert import DoorExpert

        return DoorExpert(env)

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
