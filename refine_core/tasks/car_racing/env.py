"""Car racing with Gymnasium's Box2D CarRacing physics and a semantic observation.

Why: a structured policy reasons about lateral offsets and upcoming bends, not pixels, and
rendering a 96x96 frame every step is most of the stock env's cost. This env keeps the stock
physics, track generator and reward, and replaces the observation with the schema of
METHOD.md; pixels are drawn only when a caller asks through `render()` (or render_mode
"human", which draws every step as the stock env does). The full contract is the docstring of
`CarRacingSemantic`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.envs.box2d import car_dynamics as _cd
from gymnasium.envs.box2d import car_racing as _cr
from gymnasium.error import InvalidAction
from gymnasium.utils import EzPickle

from refine_core.tasks.car_racing.units import SPEED_SCALE

N_TILES = 12
TILE_FEATURES = 4
N_INDICATORS = 7
HALF_WIDTH_UNITS = 0.2
UNITS_PER_WORLD = HALF_WIDTH_UNITS / _cr.TRACK_WIDTH
WHEEL_RADIUS = _cd.WHEEL_R * _cd.SIZE  # world units (0.54)
_POS_BOUND = 40.0  # beyond any point of the playfield in track units
_SEARCH_BACK, _SEARCH_AHEAD = 4, 20
_LOST_DISTANCE = 4.0 * _cr.TRACK_WIDTH


def wheel_reading(omega: float) -> float:
    """A wheel's ABS-sensor reading on the speed scale: its surface speed over 100, so a wheel
    that rolls without slipping reads the normalised speed (raw rad/s is 185 times larger)."""
    return float(omega) * WHEEL_RADIUS / SPEED_SCALE


def wrap_angle(a: np.ndarray | float) -> np.ndarray | float:
    """Wrap to [-pi, pi)."""
    return (np.asarray(a) + np.pi) % (2.0 * np.pi) - np.pi


def curb_flags(track: list[tuple[float, float, float, float]]) -> np.ndarray:
    """Recompute the red-white curb rule CarRacing applies in `_create_track` (it keeps the
    result local): a tile is a curb tile when the heading keeps changing fast in one direction
    over the last BORDER_MIN_COUNT points, and the flag is spread back over that run."""
    n = len(track)
    k = _cr.BORDER_MIN_COUNT
    beta = np.array([t[1] for t in track], dtype=np.float64)
    diff = beta - np.roll(beta, 1)  # diff[i] = beta[i] - beta[i-1], wrapping like track[i-1]
    border = np.zeros(n, dtype=bool)
    for i in range(n):
        d = diff[[(i - j) % n for j in range(k)]]
        border[i] = bool(
            np.all(np.abs(d) > _cr.TRACK_TURN_RATE * 0.2) and abs(np.sign(d).sum()) == k
        )
    spread = border.copy()
    for i in np.flatnonzero(border):
        for j in range(k):
            spread[(i - j) % n] = True
    return spread


@dataclass(frozen=True)
class TrackGeometry:
    """Per-tile geometry in world units; tile i spans track points i-1 -> i."""

    points: np.ndarray  # (N, 2) centreline points
    centres: np.ndarray  # (N, 2)
    heading: np.ndarray  # (N,) in the car-angle convention (0 = facing +y)
    forward: np.ndarray  # (N, 2) unit driving direction
    left: np.ndarray  # (N, 2) unit normal to the left of the driving direction
    border: np.ndarray  # (N,) float 0/1
    polygons: np.ndarray  # (N, 4, 2)
    tile_length: float  # mean centreline spacing

    @classmethod
    def from_track(cls, track: list[tuple[float, float, float, float]]) -> TrackGeometry:
        pts = np.array([(t[2], t[3]) for t in track], dtype=np.float64)
        prev = np.roll(pts, 1, axis=0)
        seg = pts - prev
        fwd = seg / np.linalg.norm(seg, axis=1, keepdims=True)
        left = np.stack([-fwd[:, 1], fwd[:, 0]], axis=1)
        heading = np.arctan2(fwd[:, 1], fwd[:, 0]) - np.pi / 2.0
        beta = np.array([t[1] for t in track], dtype=np.float64)
        w = _cr.TRACK_WIDTH
        n1 = np.stack([np.cos(beta), np.sin(beta)], axis=1)
        n2 = np.roll(n1, 1, axis=0)
        polys = np.stack([pts - w * n1, pts + w * n1, prev + w * n2, prev - w * n2], axis=1)
        return cls(
            points=pts,
            centres=(pts + prev) / 2.0,
            heading=heading,
            forward=fwd,
            left=left,
            border=curb_flags(track).astype(np.float64),
            polygons=polys,
            tile_length=float(np.mean(np.linalg.norm(seg, axis=1))),
        )

    def __len__(self) -> int:
        return len(self.points)

    def locate(self, position: np.ndarray, hint: int | None) -> int:
        """Index of the tile nearest to `position`, searched near `hint` first so a track that
        passes close to itself does not make the index jump to the other branch."""
        n = len(self)
        if hint is not None:
            window = (hint + np.arange(-_SEARCH_BACK, _SEARCH_AHEAD + 1)) % n
            d = np.linalg.norm(self.centres[window] - position, axis=1)
            j = int(np.argmin(d))
            if d[j] < _LOST_DISTANCE:
                return int(window[j])
        return int(np.argmin(np.linalg.norm(self.centres - position, axis=1)))

    def first_ahead(self, position: np.ndarray, nearest: int) -> int:
        """Step past the nearest tile when the car is already beyond its centre."""
        along = float((position - self.centres[nearest]) @ self.forward[nearest])
        return (nearest + 1) % len(self) if along > 0.0 else nearest

    def tile_features(self, position: np.ndarray, angle: float, first: int) -> np.ndarray:
        """The (12, 4) tile block for a car at `position` with hull angle `angle`."""
        idx = (first + np.arange(N_TILES)) % len(self)
        d = position[None, :] - self.centres[idx]
        out = np.empty((N_TILES, TILE_FEATURES), dtype=np.float64)
        out[:, 0] = np.einsum("ij,ij->i", d, self.left[idx]) * UNITS_PER_WORLD
        out[:, 1] = np.einsum("ij,ij->i", d, self.forward[idx]) * UNITS_PER_WORLD
        out[:, 2] = wrap_angle(self.heading[idx] - angle)
        out[:, 3] = self.border[idx]
        np.clip(out[:, :2], -_POS_BOUND, _POS_BOUND, out=out[:, :2])
        return out


def observation_space() -> spaces.Dict:
    tiles_low = np.tile(np.array([-_POS_BOUND, -_POS_BOUND, -np.pi, 0.0], np.float32), (N_TILES, 1))
    tiles_high = np.tile(np.array([_POS_BOUND, _POS_BOUND, np.pi, 1.0], np.float32), (N_TILES, 1))
    inf = np.inf
    ind_low = np.array([0.0, -1.0, -inf, -inf, -inf, -inf, -inf], np.float32)
    ind_high = np.array([inf, 1.0, inf, inf, inf, inf, inf], np.float32)
    return spaces.Dict(
        {
            "tiles": spaces.Box(tiles_low, tiles_high, dtype=np.float32),
            "indicators": spaces.Box(ind_low, ind_high, dtype=np.float32),
        }
    )


class CarRacingSemantic(_cr.CarRacing):
    """Stock CarRacing physics and reward; semantic observation; no per-step pixels.

    ## Description
    A rear-wheel-drive car on a random closed track (stock generator, about 300 tiles). The
    observation describes the road ahead in the car's terms instead of a top-down image.

    ## Action Space
    `Box([-1, 0, 0], [1, 1, 1], float32)`: steer (negative is left), gas (rear wheels),
    brake (0.9 or more locks the wheels). Out-of-range values are clipped; a non-finite or
    wrongly shaped action raises `InvalidAction`.

    ## Observation Space
    `Dict(tiles=Box((12, 4)), indicators=Box((7,)))`, float32.
    - ``tiles``: the 12 tiles ahead in track order, nearest first (tile 0 is the nearest
      tile whose centre is not behind the car). Per tile, in the tile's own frame and in
      track units (`UNITS_PER_WORLD` = 0.03 per world unit, so the half-width is 0.2):
      ``x`` lateral position of the car relative to the tile centre, positive when the car
      is left of it (|x| > 0.2: the wheels are on the grass); ``y`` longitudinal position of
      the car relative to the tile centre along the driving direction (negative: the centre
      is still ahead; consecutive tiles are about 0.105 apart); ``theta`` tile heading minus
      car heading, radians wrapped to [-pi, pi], positive when the road turns left;
      ``border`` 1.0 on tiles the track draws with a red-white curb, else 0.0. x and y are
      clipped to +-40 (beyond the playfield, so only reachable by a bug).
    - ``indicators``: speed / 100 (world units per second, not clipped; the scripted expert
      reaches about 1 on long straights); heading (0 facing world +y, counter-clockwise
      positive) wrapped to [-pi, pi] and divided by pi; angular velocity in rad/s (Box2D's
      unit, positive turning left); the four wheels' ABS readings front-left, front-right,
      rear-left, rear-right: wheel surface speed on the speed scale, ``omega * 0.54 / 100``,
      so a rolling wheel reads about the speed and a spinning one more.

    ## Rewards
    The stock env's: +1000 / N for each of the N tiles touched for the first time, -0.1 per
    step, -100 for leaving the playfield.

    ## Starting State
    The car stands still on the first tile, facing along the track; the seed fixes the track.

    ## Episode End
    Terminates when every tile has been visited or the lap is closed (``info["lap_finished"]``
    true, ``info["success"]`` 1.0) or when the car leaves the playfield
    (``lap_finished`` false). The registered id truncates after 1000 steps (20 s).
    ``info`` also carries ``tiles_visited`` and ``track_tiles``.

    ## Arguments
    `render_mode` (None, "human", "rgb_array", "state_pixels"), `lap_complete_percent`,
    `domain_randomize` as in the stock env.

    ## Helpers
    On ``env.unwrapped``, for experts and viewers (world units): ``track_geometry()``,
    ``track_centreline() -> (N, 2)``, ``tile_polygons() -> (N, 4, 2)``,
    ``border_flags() -> (N,)``, ``semantic_observation()`` (re-read after moving the car),
    ``car_state() -> dict`` (x, y, angle, vx, vy, speed, angular_velocity, steer,
    wheel_omegas[4], wheel_phases[4], wheel_positions[4, 2]), ``track_index`` (tile 0),
    ``units_per_world``.

    ## Version History
    - v0: stock CarRacing-v3 physics with the semantic observation.
    """

    def __init__(
        self,
        render_mode: str | None = None,
        lap_complete_percent: float = 0.95,
        domain_randomize: bool = False,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} not in {self.metadata['render_modes']}")
        super().__init__(
            render_mode=render_mode,
            lap_complete_percent=lap_complete_percent,
            domain_randomize=domain_randomize,
            continuous=True,
        )
        EzPickle.__init__(self, render_mode, lap_complete_percent, domain_randomize)
        self.observation_space = observation_space()
        self.state = None  # the stock env keeps its last pixel frame here; we never fill it
        self.geometry: TrackGeometry | None = None
        self.track_index = 0
        self._nearest: int | None = None
        self.units_per_world = UNITS_PER_WORLD

    # -- gymnasium API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.geometry = None
        self._nearest = None
        return super().reset(seed=seed, options=options)  # ends in self.step(None)

    def step(self, action: Any):
        car = self.car
        if car is None:
            raise RuntimeError("call reset() before step()")
        if action is not None:
            a = np.asarray(action, dtype=np.float64)
            if a.shape != (3,) or not np.all(np.isfinite(a)):
                raise InvalidAction(
                    f"action must be 3 finite numbers (steer, gas, brake), got {action!r}"
                )
            a = np.clip(a, self.action_space.low, self.action_space.high)
            car.steer(-a[0])
            car.gas(a[1])
            car.brake(a[2])
        car.step(1.0 / _cr.FPS)
        self.world.Step(1.0 / _cr.FPS, 6 * 30, 2 * 30)
        self.t += 1.0 / _cr.FPS

        reward = 0.0
        terminated = False
        info: dict[str, Any] = {}
        if action is not None:  # reset()'s own first step carries no reward
            self.reward -= 0.1
            car.fuel_spent = 0.0
            reward = self.reward - self.prev_reward
            self.prev_reward = self.reward
            if self.tile_visited_count == len(self.track) or self.new_lap:
                terminated = True
                info["lap_finished"] = True
            x, y = car.hull.position
            if abs(x) > _cr.PLAYFIELD or abs(y) > _cr.PLAYFIELD:
                terminated = True
                info["lap_finished"] = False
                reward = -100.0
        info["success"] = 1.0 if info.get("lap_finished", False) else 0.0
        info["tiles_visited"] = self.tile_visited_count
        info["track_tiles"] = len(self.track)
        obs = self.semantic_observation()
        if self.render_mode == "human":
            self.render()
        return obs, float(reward), terminated, False, info

    # -- semantic observation ------------------------------------------------------------
    def track_geometry(self) -> TrackGeometry:
        """Per-tile geometry of the current track (privileged: experts and visualisation)."""
        return self._geometry()

    def _geometry(self) -> TrackGeometry:
        if self.geometry is None:
            self.geometry = TrackGeometry.from_track(self.track)
        return self.geometry

    def semantic_observation(self) -> dict[str, np.ndarray]:
        """The observation for the car's current pose (public so a caller that moved the car,
        e.g. a test or the sim node, can re-read it without stepping)."""
        g = self._geometry()
        hull = self.car.hull
        pos = np.array(hull.position, dtype=np.float64)
        angle = float(hull.angle)
        self._nearest = g.locate(pos, self._nearest)
        self.track_index = g.first_ahead(pos, self._nearest)
        tiles = g.tile_features(pos, angle, self.track_index)
        v = hull.linearVelocity
        w = self.car.wheels
        ind = np.array(
            [
                math.hypot(v[0], v[1]) / SPEED_SCALE,
                float(wrap_angle(angle)) / np.pi,
                hull.angularVelocity,
                *(wheel_reading(wheel.omega) for wheel in w),
            ],
            dtype=np.float64,
        )
        ind[1] = min(max(ind[1], -1.0), 1.0)
        return {"tiles": tiles.astype(np.float32), "indicators": ind.astype(np.float32)}

    # -- helpers for visualisation and experts ----------------------------------------------
    def track_centreline(self) -> np.ndarray:
        return self._geometry().points.copy()

    def tile_polygons(self) -> np.ndarray:
        return self._geometry().polygons.copy()

    def border_flags(self) -> np.ndarray:
        return self._geometry().border.copy()

    def car_state(self) -> dict[str, Any]:
        if self.car is None:
            raise RuntimeError("call reset() first")
        hull = self.car.hull
        v = hull.linearVelocity
        return {
            "x": float(hull.position[0]),
            "y": float(hull.position[1]),
            "angle": float(hull.angle),
            "vx": float(v[0]),
            "vy": float(v[1]),
            "speed": math.hypot(v[0], v[1]),
            "angular_velocity": float(hull.angularVelocity),
            "steer": float(self.car.wheels[0].joint.angle),
            "wheel_omegas": [float(w.omega) for w in self.car.wheels],
            "wheel_phases": [float(w.phase) for w in self.car.wheels],
            "wheel_positions": [
                [float(w.position[0]), float(w.position[1])] for w in self.car.wheels
            ],
        }
