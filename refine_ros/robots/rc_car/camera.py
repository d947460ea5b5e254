"""What a camera on the Box2D car sees: the track drawn in perspective on the ground plane.

Why: the car's track detector (`refine_ros.robots.rc_car.vision`) has to turn a forward camera's pictures
into the simulator's tiles on the real car. On the twin it gets pictures of the simulator's
own track, so its error can be measured against the simulator's tiles, and a refinement run
on the twin sees what it would see on the robot: tiles detected from pixels.

The scene is the simulator's own drawing list (`env.road_poly`: every road tile with its
shade, the red/white kerbs) on the stock grass (background and lighter patches), in the
stock colours; above the horizon is sky. The camera is an ideal pinhole (no lens distortion)
`height_m` above the ground, pitched down by `pitch_rad`, `forward_offset_m` ahead of the
car's reference point (the hull position the simulator reports), looking along the car's
heading: the same model `vision.CameraModel.pinhole` inverts, written here independently
from the camera's pose so that a test comparing the two checks the detector's geometry.
The car's own body is not drawn (a camera mounted at the front does not see it).

Scale: the simulator's road is 2 * TRACK_WIDTH = 13.3 world units wide; the twin maps it
onto `road_width_m` metres (default 0.3 m, the detector's default road width), so one world
unit is 0.0225 m and the car (4.6 units long) is about 0.1 m long.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from gymnasium.envs.box2d import car_racing as _cr

from refine_ros.robots.rc_car.vision import CameraModel

ROAD_WIDTH_M = 0.3  # the track detector's default `road_width`
SKY_BGR = (235, 206, 135)
KERB_BORDER_UNITS = _cr.BORDER  # kerb width beside the road, world units
_SHIFT = 4  # fixed-point bits for sub-pixel polygon vertices
_Z_NEAR_M = 0.01  # polygons are clipped this far in front of the camera
_NOISE_MARGIN = 64  # pixels by which the noise field exceeds the image, for random offsets


def metres_per_unit(road_width_m: float = ROAD_WIDTH_M) -> float:
    """Metres per simulator world unit when the simulated road is `road_width_m` wide."""
    if not (np.isfinite(road_width_m) and road_width_m > 0):
        raise ValueError(f"road_width_m must be positive, got {road_width_m}")
    return road_width_m / (2.0 * _cr.TRACK_WIDTH)


@dataclass(frozen=True)
class PinholeCamera:
    """A calibrated forward camera on the car. Defaults are the track detector's defaults
    (`refine_ros.robots.rc_car.track_detector` PARAMETERS: fx, fy, cx, cy, camera_height,
    camera_pitch, camera_forward_offset) with a 640 x 480 image."""

    width: int = 640
    height: int = 480
    fx: float = 500.0
    fy: float = 500.0
    cx: float = 320.0
    cy: float = 240.0
    height_m: float = 0.15
    pitch_rad: float = 0.5
    forward_offset_m: float = 0.0

    def __post_init__(self) -> None:
        if self.width < 8 or self.height < 8:
            raise ValueError("image must be at least 8 x 8 pixels")
        for name in ("fx", "fy", "height_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if not 0.0 <= self.pitch_rad < np.pi / 2:
            raise ValueError("pitch_rad must be in [0, pi/2)")

    def axes(self) -> np.ndarray:
        """Rows: the camera's x (image right), y (image down), z (optical axis) in the car
        frame (forward, left, up)."""
        s, c = np.sin(self.pitch_rad), np.cos(self.pitch_rad)
        return np.array([[0.0, -1.0, 0.0], [-s, 0.0, -c], [c, 0.0, -s]])

    def project(self, forward: np.ndarray, left: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pixel (u, v) and depth z (m along the optical axis) of ground points given in the
        car frame (metres); points with z <= 0 are behind the camera."""
        d = np.stack([np.asarray(forward) - self.forward_offset_m, np.asarray(left),
                      np.full(np.shape(forward), -self.height_m)], axis=-1)  # fmt: skip
        x, y, z = np.moveaxis(d @ self.axes().T, -1, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.fx * x / z + self.cx, self.fy * y / z + self.cy, z

    def horizon_row(self) -> float:
        """Image row of the horizon (the ground's vanishing line); rows above it are sky."""
        return self.cy - self.fy * np.tan(self.pitch_rad)

    def nearest_forward_m(self, z_min: float) -> float:
        """Ground points closer than this (car frame, m) are less than `z_min` deep."""
        s, c = np.sin(self.pitch_rad), np.cos(self.pitch_rad)
        return self.forward_offset_m + (z_min - self.height_m * s) / c

    def detector_model(
        self,
        road_width_m: float = ROAD_WIDTH_M,
        view_forward_m: float = 1.5,
        view_half_width_m: float = 0.75,
        grid_m: float = 0.005,
    ) -> CameraModel:
        """The detector's camera model for this camera: what calibrating it would give."""
        return CameraModel.pinhole(
            self.fx, self.fy, self.cx, self.cy, self.height_m, self.pitch_rad, road_width_m,
            view_forward_m, view_half_width_m, grid_m, forward_offset_m=self.forward_offset_m,
        )  # fmt: skip

    def info(self) -> dict:
        """What a driver puts in `sensor_msgs/CameraInfo`: size, K, P (plumb_bob, zero D)."""
        k = [self.fx, 0.0, self.cx, 0.0, self.fy, self.cy, 0.0, 0.0, 1.0]
        p = [self.fx, 0.0, self.cx, 0.0, 0.0, self.fy, self.cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        return {"width": self.width, "height": self.height, "distortion_model": "plumb_bob",
                "d": [0.0] * 5, "k": k, "r": [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0], "p": p}  # fmt: skip


@dataclass(frozen=True)
class _Scene:
    """The simulator's ground drawing list in world units (every polygon is a quad), colours
    as BGR, in drawing order."""

    quads: np.ndarray  # (P, 4, 2)
    colours: list[tuple[int, int, int]]
    centres: np.ndarray  # (P, 2)
    radii: np.ndarray  # (P,)


def _bgr(rgb) -> tuple[int, int, int]:
    r, g, b = (int(round(float(c))) for c in rgb)
    return (b, g, r)


def _scene(env) -> _Scene:
    """Grass patches as the stock renderer lays them, then the road list in its order."""
    quads, colours = [], []
    dim = _cr.GRASS_DIM
    for x in range(-20, 20, 2):
        for y in range(-20, 20, 2):
            quads.append(dim * np.array([[x + 1, y], [x, y], [x, y + 1], [x + 1, y + 1]], dtype=float))
            colours.append(_bgr(env.grass_color))
    for poly, colour in env.road_poly:
        quads.append(np.asarray(poly, dtype=float).reshape(4, 2))
        colours.append(_bgr(colour))
    q = np.array(quads)
    centres = q.mean(axis=1)
    radii = np.linalg.norm(q - centres[:, None, :], axis=2).max(axis=1)
    return _Scene(q, colours, centres, radii)


def _clip_front(poly: np.ndarray, f_min: float) -> np.ndarray:
    """Sutherland-Hodgman: the part of a ground polygon (forward, left) with forward >= f_min."""
    out = []
    n = len(poly)
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        a_in, b_in = a[0] >= f_min, b[0] >= f_min
        if a_in:
            out.append(a)
        if a_in != b_in:
            out.append(a + (f_min - a[0]) / (b[0] - a[0]) * (b - a))
    return np.array(out).reshape(-1, 2)


class CarCamera:
    """Renders `env`'s camera view for the car's current pose (or any pose).

    `supersample` draws at that many times the resolution and averages down, which
    antialiases edges the way a real sensor's finite pixels do; `view_range_m` skips ground
    polygons farther than that from the camera (they are a few pixels by the horizon);
    `pixel_noise` is the standard deviation of Gaussian noise per pixel and channel (0-255
    scale), drawn from `rng` (seeded by the caller, so frames are reproducible).
    """

    def __init__(
        self,
        env,
        camera: PinholeCamera = PinholeCamera(),
        road_width_m: float = ROAD_WIDTH_M,
        supersample: int = 2,
        view_range_m: float = 4.0,
        pixel_noise: float = 0.0,
        rng: np.random.Generator | None = None,
        sky_bgr: tuple[int, int, int] = SKY_BGR,
    ) -> None:
        if supersample < 1:
            raise ValueError("supersample must be >= 1")
        if pixel_noise < 0:
            raise ValueError("pixel_noise must be >= 0")
        self.env = env.unwrapped if hasattr(env, "unwrapped") else env
        self.camera = camera
        self.metres_per_unit = metres_per_unit(road_width_m)
        self.supersample = int(supersample)
        self.view_range_m = float(view_range_m)
        self.pixel_noise = float(pixel_noise)
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.sky_bgr = tuple(int(c) for c in sky_bgr)
        self._scene: _Scene | None = None
        self._scene_source = None
        self._noise: np.ndarray | None = None

    def render(self) -> np.ndarray:
        """The camera image (H x W x 3 uint8, BGR) for the car's current pose."""
        hull = self.env.car.hull
        return self.render_at(float(hull.position[0]), float(hull.position[1]), float(hull.angle))

    def render_at(self, x: float, y: float, angle: float) -> np.ndarray:
        """The image for a car at world (x, y) with hull angle `angle` (0 faces world +y)."""
        cam, s = self.camera, self.supersample
        scene = self._current_scene()
        img = np.empty((cam.height * s, cam.width * s, 3), np.uint8)
        horizon = min(max(math.ceil((cam.horizon_row() + 0.5) * s - 0.5), 0), img.shape[0])
        # (cv2.rectangle fills ten times faster than numpy's broadcast assignment)
        cv2.rectangle(img, (0, 0), (img.shape[1] - 1, img.shape[0] - 1), _bgr(self.env.bg_color), -1)
        if horizon > 0:
            cv2.rectangle(img, (0, 0), (img.shape[1] - 1, horizon - 1), self.sky_bgr, -1)

        mpu = self.metres_per_unit
        fwd = np.array([-np.sin(angle), np.cos(angle)])
        left = np.array([-np.cos(angle), -np.sin(angle)])
        camera_xy = np.array([x, y]) + fwd * cam.forward_offset_m / mpu
        reach = self.view_range_m / mpu
        near = np.flatnonzero(np.linalg.norm(scene.centres - camera_xy, axis=1) < reach + scene.radii)
        rel = scene.quads[near] - np.array([x, y])
        ground = np.stack([rel @ fwd, rel @ left], axis=-1) * mpu  # (P, 4, 2) car frame, metres
        f_min = cam.nearest_forward_m(_Z_NEAR_M)
        seen = ground[..., 0].max(axis=1) >= f_min
        whole = ground[..., 0].min(axis=1) >= f_min  # the rest reach behind the near plane
        u, v, _ = cam.project(ground[whole, :, 0], ground[whole, :, 1])
        polys = np.empty(ground.shape, np.int32)
        # the near clip keeps vertices within about 1e6 pixels: far inside int32 when shifted
        polys[whole] = np.round(np.stack([(u + 0.5) * s - 0.5, (v + 0.5) * s - 0.5], axis=-1) * (1 << _SHIFT))
        for k in np.flatnonzero(seen):
            poly = polys[k]
            if not whole[k]:  # clip on the ground first, then project what is left
                part = _clip_front(ground[k], f_min)
                if len(part) < 3:
                    continue
                pu, pv, _ = cam.project(part[:, 0], part[:, 1])
                poly = np.round(np.stack([(pu + 0.5) * s - 0.5, (pv + 0.5) * s - 0.5], axis=1) * (1 << _SHIFT))
            cv2.fillPoly(img, [poly.astype(np.int32)], scene.colours[near[k]], lineType=cv2.LINE_8, shift=_SHIFT)
        if s > 1:
            img = cv2.resize(img, (cam.width, cam.height), interpolation=cv2.INTER_AREA)
        if self.pixel_noise > 0:
            img = self._add_noise(img)
        return img

    def _add_noise(self, img: np.ndarray) -> np.ndarray:
        """Sensor noise from a window at a random offset in one seeded noise field: drawing a
        fresh normal sample per pixel would cost more than rendering the frame."""
        margin = _NOISE_MARGIN
        if self._noise is None:
            shape = (img.shape[0] + margin, img.shape[1] + margin, 3)
            self._noise = np.rint(self.rng.normal(0.0, self.pixel_noise, shape)).astype(np.int16)
        dy, dx = self.rng.integers(0, margin, 2)
        window = self._noise[dy : dy + img.shape[0], dx : dx + img.shape[1]]
        return cv2.add(img, window, dtype=cv2.CV_8U)  # saturating

    def _current_scene(self) -> _Scene:
        """The drawing list is rebuilt when the env made a new track (reset)."""
        if self._scene is None or self._scene_source is not self.env.road_poly:
            self._scene = _scene(self.env)
            self._scene_source = self.env.road_poly
        return self._scene
