"""The car-racing `Task`: spec text for program authors, env factory, expert and summaries.
Nothing here imports Box2D until an env is made, so the spec is cheap to read (the sandboxed
fit reads it).

Three descriptions (see `refine_core.tasks.spec`):
- "published" (the default) carries the information the published prompt gave the model, in
  our own words: the inputs with their fields and normalisations, the actions and their
  ranges, the objective and reward, and the published notes (the track is a loop about 0.4
  wide, |x| = 0.2 is its edge and beyond it is grass, tiles come nearest first). It names no
  simulator or library (the published prompt named none, and a robot owner could name none),
  and says nothing about wheel slip, spinning out, the expert's top speed, the unit of the
  angular velocity or how the wheels read in a bend.
  One published fact is wrong for this environment and is corrected here: the published note
  calls the car "about 3 tiles long"; in our units the car body is about 0.15 long and a tile
  about 0.105, so the car is about 1.4 tiles long, and that is what the text says.
- "detailed" adds the true facts we measured about this environment (units, frames, slip,
  the expert's speed); results produced with it say so.
- "legacy_published": the published variant as first worded, which also named the physics
  ("Gymnasium CarRacing physics"); kept so the runs recorded with it replay with the words they
  were sent, never a default.
- "robot_owner": what the owner of `rc_car_real` (a small car with one motor behind a speed
  controller, Ackermann steering, odometry, and a camera read by a road detector) writes about
  the task on that car: where each input comes from (the detector's road segments, the
  odometry, the motor's ERPM on all four wheel readings), the units the bridge gives them in,
  the commands in m/s and rad, how the owner judges success and how long a live episode lasts.
  No simulator or library name, no reward and no metric line: a robot measures none. The real
  profiles choose it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from refine_core.tasks.base import Expert, Task
from refine_core.tasks.car_racing import ENTRY
from refine_core.tasks.spec import (
    LEGACY_VARIANT,
    ROBOT_OWNER_VARIANT,
    ActionSpec,
    InputSpec,
    MetricSpec,
    TaskSpec,
)

ENV_ID = ENTRY.env_id
EPISODE_STEPS = ENTRY.max_episode_steps

_TILE_COLUMNS = tuple(f"tile{i}_{f}" for i in range(12) for f in ("x", "y", "theta", "border"))
_INDICATOR_COLUMNS = (
    "speed",
    "heading",
    "angular_velocity",
    "wheel_fl",
    "wheel_fr",
    "wheel_rl",
    "wheel_rr",
)

PUBLISHED_DESCRIPTION = """\
Drive a car around a closed race track and finish the lap as fast as possible without leaving
the track. Every track tile the car visits for the first time earns reward; every step costs a
small penalty.
The track is a loop about 0.4 units wide in the units of the tile coordinates: |x| = 0.2 is
the edge of the track, and beyond it is grass. The car is about 1.4 tiles long.
"""

LEGACY_PUBLISHED_DESCRIPTION = """\
Drive a car around a closed race track (Gymnasium CarRacing physics) and finish the lap as
fast as possible without leaving the track. Every track tile the car visits for the first
time earns reward; every step costs a small penalty.
The track is a loop about 0.4 units wide in the units of the tile coordinates: |x| = 0.2 is
the edge of the track, and beyond it is grass. The car is about 1.4 tiles long.
"""

DETAILED_DESCRIPTION = """\
Drive a rear-wheel-drive race car (Gymnasium CarRacing's Box2D physics) around a randomly
generated closed track as fast as possible. The track is split into about 300 short tiles;
each tile touched for the first time earns 1000 / (number of tiles) reward, and every step
costs 0.1, so a full lap returns about 1000 - 0.1 * steps and skipped tiles earn nothing.
The episode ends when the lap is complete, when the car leaves the playfield (-100) or
after 1000 steps (50 steps per second).
Units: positions are in track units in which the track is 0.4 wide (half-width 0.2) and
one tile is about 0.105 long; the car body is about 0.15 long, i.e. about 1.4 tiles.
- tiles (12, 4): the 12 tiles ahead of the car in driving order, nearest first. Per tile,
  in that tile's own frame: x = signed lateral position of the car relative to the tile
  centre, positive when the car is LEFT of the centre (|x| > 0.2 means the car is on the
  grass, where it is slow and earns nothing); y = signed longitudinal position of the car
  relative to the tile centre along the driving direction (negative while the tile centre is
  still ahead, so further tiles have more negative y); theta = heading of the tile relative
  to the car's heading, in radians in [-pi, pi], positive when the road turns LEFT relative
  to where the car points; border = 1 if the tile is a sharp corner (the track's red-white
  curb flag), else 0.
- indicators (7,): speed normalised from [0, 100] to [0, 1] (not clipped; the scripted
  expert reaches about 1 on long straights); absolute heading normalised from [-pi, pi] to
  [-1, 1] (0 when the car faces the world's +y axis, growing counter-clockwise, so a left
  turn raises it); angular velocity in rad/s (the simulator's native unit, positive when
  turning left; about 3.5 when steering 0.6 at speed 0.3); then the four wheels' ABS-sensor
  readings (front-left, front-right, rear-left, rear-right): wheel surface speed on the same
  scale as speed, so a wheel rolling without slipping reads about the normalised speed, the
  outer wheels of a bend read more than the inner ones, and a driven rear wheel that spins
  under too much gas reads clearly more than the speed.
Actions: steer in [-1, 1] (negative steers left, positive right), gas in [0, 1] (drives the
rear wheels), brake in [0, 1] (0.9 or more locks the wheels). The steering turns at a finite
rate; full gas in a bend makes the rear wheels slip and the car spin out.
"""

ROBOT_OWNER_DESCRIPTION = """\
My small RC car has to drive laps of a closed track laid out on the floor: a road 0.3 m wide
with grass on either side, kerbs marking the sharp bends. The car is about 0.10 m long (7 cm
wheelbase); one motor drives the rear wheels through a speed controller that holds the speed I
command, and the front wheels steer. The goal is to complete the lap (the whole track, back
over the start line) as fast as possible without leaving the road. Every episode starts with
the car at rest on the start line, facing along the road.
Commands and readings run at 50 per second; an episode lasts 70 s (3500 steps), and I count it
a success when the car completes the lap within it. The road detector needs to see the road:
when the camera loses it, the readings stop, the car is stopped and after 5 s the episode ends.
"""

_OWNER_INPUTS = {
    "tiles": "From the car's forward-looking camera: a road detector finds the road's centre line and gives the "
             "12 road segments ahead of the car, nearest first, about 0.08 m apart. Units: the road is 0.4 wide "
             "in these units (1 unit = 0.75 m), so |x| = 0.2 is its edge. Per segment (x, y, theta, border): x = "
             "lateral position of the car relative to the segment's centre line, positive when the car is left of "
             "it; y = position of the car along the road relative to the segment's centre, negative while the "
             "segment lies ahead; theta = heading of the segment relative to the car's, rad, positive when the "
             "road turns left; border = 1 where the segment is a sharp bend marked with kerbs, else 0.",
    "indicators": "(speed, heading, angular_velocity, wheel_fl, wheel_fr, wheel_rl, wheel_rr): speed from the "
                  "odometry, m/s x 0.444 (the car's 1 m/s limit reads 0.444); heading: the car's yaw from its "
                  "odometry relative to its heading on the start line, divided by pi (in [-1, 1], "
                  "counter-clockwise positive); angular velocity: the yaw rate from the odometry, rad/s, "
                  "counter-clockwise positive; then four wheel readings, all four the same: the motor's speed "
                  "from its electrical RPM, on the speed's scale (it drives both rear wheels: when they spin it "
                  "reads more than the speed).",
}
_OWNER_ACTIONS = {
    "steer": "steering angle as a fraction of 0.34 rad; negative steers left",
    "gas": "speed: the motor's controller holds max(gas - brake, 0) x 1 m/s",
    "brake": "subtracts from gas in that speed; the car never reverses",
}

# What each variant says about the inputs and actions (the description above carries the rest).
_PUBLISHED_INPUTS = {
    "tiles": "The 12 track tiles ahead of the car, nearest first. Per tile (x, y, theta, border): x = "
             "lateral position of the car relative to the tile's centre, positive when the car is left of "
             "the centre; y = longitudinal position of the car relative to the tile's centre; theta = heading "
             "of the tile relative to the car, positive when the road turns left; border = 1 if the tile is a "
             "sharp corner, else 0.",
    "indicators": "(speed, heading, angular_velocity, wheel_fl, wheel_fr, wheel_rl, wheel_rr): speed "
                  "normalised from [0, 100] to [0, 1]; absolute heading normalised from [-pi, pi] to [-1, 1]; "
                  "angular velocity; then the four ABS sensors, the approximate wheel omega of the front-left, "
                  "front-right, rear-left and rear-right wheels.",
}
_DETAILED_INPUTS = {
    "tiles": "12 tiles ahead, nearest first; per tile (x, y, theta, border).",
    "indicators": "(speed, heading, angular_velocity, wheel_fl, wheel_fr, wheel_rl, wheel_rr); see above.",
}
_PUBLISHED_ACTIONS = {"steer": "steering; negative steers left, positive right", "gas": "throttle",
                      "brake": "brake"}
_DETAILED_ACTIONS = {"steer": "steering target; negative steers left, positive right",
                     "gas": "throttle on the rear wheels", "brake": "brake on all wheels; >= 0.9 locks them"}
_VARIANTS = {
    "published": (PUBLISHED_DESCRIPTION, _PUBLISHED_INPUTS, _PUBLISHED_ACTIONS,
                  "the return: the sum of the rewards over the episode"),
    "detailed": (DETAILED_DESCRIPTION, _DETAILED_INPUTS, _DETAILED_ACTIONS,
                 "the return: the sum of the rewards over the episode"),
    ROBOT_OWNER_VARIANT: (ROBOT_OWNER_DESCRIPTION, _OWNER_INPUTS, _OWNER_ACTIONS, ""),
    LEGACY_VARIANT: (LEGACY_PUBLISHED_DESCRIPTION, _PUBLISHED_INPUTS, _PUBLISHED_ACTIONS,
                     "the return: the sum of the rewards over the episode"),
}
DESCRIPTIONS: tuple[str, ...] = tuple(_VARIANTS)
"""The description variants, the default (published) first."""


def make_spec(description: str = "published") -> TaskSpec:
    text, inputs, actions, metric = _VARIANTS[description]
    return TaskSpec(
        name="car_racing",
        env_id=ENV_ID,
        description=text,
        policy_class="RacecarPolicy",
        inputs=(
            InputSpec("tiles", (12, 4), _TILE_COLUMNS, inputs["tiles"]),
            InputSpec("indicators", (7,), _INDICATOR_COLUMNS, inputs["indicators"]),
        ),
        actions=(
            ActionSpec("steer", -1.0, 1.0, actions["steer"]),
            ActionSpec("gas", 0.0, 1.0, actions["gas"]),
            ActionSpec("brake", 0.0, 1.0, actions["brake"]),
        ),
        metric=MetricSpec("return", True, metric),
        episode_steps=EPISODE_STEPS,
        control_period_s=0.02,  # CarRacing runs at 50 frames per second
        deployed_mode="mean",  # a robot runs the mean action (RL selects in this mode)
        description_variant=description,
        eval_mode="mean",  # the authors verified the car with the mean action on seeds 1000-1009
    )


class CarRacingTask(Task):
    description_variants = DESCRIPTIONS

    def __init__(self, description: str = DESCRIPTIONS[0]) -> None:
        self.spec = make_spec(description)

    def make_env(self, render_mode: str | None = None) -> gym.Env:
        return gym.make(ENV_ID, render_mode=render_mode)

    def expert(self, env: gym.Env) -> Expert:
        from refine_core.tasks.car_racing.expert import CarExpert

        return CarExpert(env)

    def split_observation(self, obs: Any) -> dict[str, np.ndarray]:
        if not isinstance(obs, dict) or "tiles" not in obs or "indicators" not in obs:
            raise ValueError("car_racing observation must be a dict with 'tiles' and 'indicators'")
        tiles = np.asarray(obs["tiles"], dtype=np.float32)
        ind = np.asarray(obs["indicators"], dtype=np.float32)
        if tiles.shape != (12, 4) or ind.shape != (7,):
            raise ValueError(
                f"car_racing observation shapes {tiles.shape}, {ind.shape}; want (12, 4), (7,)"
            )
        return {"tiles": tiles, "indicators": ind}

    def episode_summary(
        self, observations: Sequence[Any], rewards: Sequence[float], infos: Sequence[dict]
    ) -> dict[str, float]:
        ret = float(np.sum(np.asarray(rewards, dtype=np.float64)))
        last = infos[-1] if infos else {}
        visited = float(last.get("tiles_visited", 0))
        total = float(last.get("track_tiles", 0)) or float("nan")
        lap = any(bool(i.get("lap_finished", False)) for i in infos)
        return {
            "return": ret,
            "metric": ret,
            "success": 1.0 if lap else 0.0,
            "steps": float(len(rewards)),
            "tile_fraction": visited / total,
        }
