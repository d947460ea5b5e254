"""Camera track detector: a real car's camera image -> the simulator's (12, 4) tile block.

Why here and ROS-free: the features must match `refine_core.tasks.car_racing.env` exactly
(units, signs, tile spacing), and that is only checkable with images we draw ourselves.

Pipeline: warp the image onto a bird's-eye grid of the ground plane (car frame: forward,
left, metres) through the camera's ground homography; segment grey road and red/white kerb
by colour; walk the road rows outward from the car to get centreline points; fit the
centreline as lateral = poly(forward); sample 12 tile centres along it by arc length, and
express the car in each tile's frame exactly as the simulator does:
x = d . left (positive: car left of centre), y = d . forward (negative: tile still ahead),
theta = tile heading - car heading (positive: road turns left), border = kerb pixels beside
the tile. Metres become track units through the road width (half-width = 0.2 units).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

N_TILES = 12
TILE_FEATURES = 4
HALF_WIDTH_UNITS = 0.2  # refine_core.tasks.car_racing.env.HALF_WIDTH_UNITS
TILE_SPACING_UNITS = 0.2 * (21.0 / 6.0) / (40.0 / 6.0)  # CarRacing detail step / half-width


class InvalidImage(ValueError):
    """Not an 8-bit 3-channel BGR image."""


class TrackNotFound(ValueError):
    """Too little road in view to fit a centreline; the caller must not invent tiles."""


@dataclass(frozen=True)
class CameraModel:
    """How image pixels map onto the ground in the car frame.

    `homography` maps homogeneous pixels (u, v, 1) to ground (forward, left, 1) in metres,
    with the origin at the car's reference point (where the simulator puts the car position).
    """

    homography: np.ndarray
    road_width_m: float
    view_forward_m: float
    view_half_width_m: float
    grid_m: float
    tile_spacing_units: float = TILE_SPACING_UNITS

    def __post_init__(self) -> None:
        h = np.asarray(self.homography, dtype=float)
        if h.shape != (3, 3) or not np.all(np.isfinite(h)) or abs(np.linalg.det(h)) < 1e-12:
            raise ValueError("homography must be a finite invertible 3x3 matrix")
        for name in ("road_width_m", "view_forward_m", "view_half_width_m", "grid_m", "tile_spacing_units"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be positive, got {value}")

    @property
    def metres_to_units(self) -> float:
        return 2.0 * HALF_WIDTH_UNITS / self.road_width_m

    @classmethod
    def top_down(
        cls,
        metres_per_pixel: float,
        car_pixel: tuple[float, float],
        road_width_m: float,
        view_forward_m: float,
        view_half_width_m: float,
        tile_spacing_units: float = TILE_SPACING_UNITS,
    ) -> CameraModel:
        """A camera looking straight down, image up = car forward, image left = car left."""
        u0, v0 = car_pixel
        m = metres_per_pixel
        h = np.array([[0.0, -m, v0 * m], [-m, 0.0, u0 * m], [0.0, 0.0, 1.0]])
        return cls(h, road_width_m, view_forward_m, view_half_width_m, m, tile_spacing_units)

    @classmethod
    def pinhole(
        cls,
        fx: float,
        fy: float,
        cx: float,
        cy: float,
        height_m: float,
        pitch_rad: float,
        road_width_m: float,
        view_forward_m: float,
        view_half_width_m: float,
        grid_m: float,
        forward_offset_m: float = 0.0,
        tile_spacing_units: float = TILE_SPACING_UNITS,
    ) -> CameraModel:
        """A forward camera `height_m` above the ground, pitched down by `pitch_rad`, mounted
        `forward_offset_m` ahead of the car's reference point (calibrated intrinsics)."""
        s, c = np.sin(pitch_rad), np.cos(pitch_rad)
        k = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])
        # ground (F, L, 1) -> camera (x right, y down, z optical axis)
        ground_to_camera = np.array(
            [
                [0.0, -1.0, 0.0],
                [-s, 0.0, forward_offset_m * s + height_m * c],
                [c, 0.0, -forward_offset_m * c + height_m * s],
            ]
        )
        h = np.linalg.inv(k @ ground_to_camera)
        return cls(h / h[2, 2], road_width_m, view_forward_m, view_half_width_m, grid_m, tile_spacing_units)


def _birds_eye(image: np.ndarray, cam: CameraModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bird's-eye image plus the forward/left metres of each grid row/column."""
    rows = int(round(cam.view_forward_m / cam.grid_m)) + 1
    cols = int(round(2 * cam.view_half_width_m / cam.grid_m)) + 1
    if rows * cols > 4_000_000:
        raise ValueError("bird's-eye grid too large; raise grid_m")
    # grid pixel (i = column, j = row) -> ground; row 0 is the far end, as in a picture
    grid_to_ground = np.array(
        [[0.0, -cam.grid_m, cam.view_forward_m], [-cam.grid_m, 0.0, cam.view_half_width_m], [0.0, 0.0, 1.0]]
    )
    grid_to_image = np.linalg.inv(np.asarray(cam.homography, dtype=float)) @ grid_to_ground
    warped = cv2.warpPerspective(
        image, grid_to_image, (cols, rows), flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP,
        borderMode=cv2.BORDER_CONSTANT, borderValue=(0, 0, 0),
    )  # fmt: skip
    forward = cam.view_forward_m - cam.grid_m * np.arange(rows)
    left = cam.view_half_width_m - cam.grid_m * np.arange(cols)
    return warped, forward, left


@dataclass(frozen=True)
class Segmentation:
    """HSV thresholds (OpenCV ranges: H 0-179, S and V 0-255). The defaults fit the
    simulator's colours (grey road, green grass, red/white kerb); a real track sets its own."""

    road_saturation_max: int = 60
    road_value_min: int = 50
    road_value_max: int = 190
    kerb_saturation_min: int = 120
    kerb_white_value_min: int = 215


def segment(bgr: np.ndarray, seg: Segmentation = Segmentation()) -> tuple[np.ndarray, np.ndarray]:
    """(road, kerb) boolean masks: road is unsaturated mid-grey, kerb is saturated red or
    bright white; grass and out-of-view black are neither."""
    hsv = cv2.cvtColor(bgr, cv2.COLOR_BGR2HSV)
    h, s, v = hsv[..., 0], hsv[..., 1], hsv[..., 2]
    road = (s < seg.road_saturation_max) & (v > seg.road_value_min) & (v < seg.road_value_max)
    red = ((h < 10) | (h > 170)) & (s > seg.kerb_saturation_min) & (v > 100)
    white = (s < 40) & (v >= seg.kerb_white_value_min)
    road = cv2.morphologyEx(road.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)) > 0
    return road, red | white


def _centreline_points(road: np.ndarray, forward: np.ndarray, left: np.ndarray, width: float) -> np.ndarray:
    """Walk rows from the car outward, following the road run nearest the last centre."""
    points = []
    centre = 0.0
    step = abs(left[1] - left[0])
    for j in range(road.shape[0] - 1, -1, -1):
        if forward[j] < 0:
            continue
        cols = np.flatnonzero(road[j])
        if cols.size == 0:
            continue
        breaks = np.flatnonzero(np.diff(cols) > 1)
        starts = np.concatenate([[cols[0]], cols[breaks + 1]])
        ends = np.concatenate([cols[breaks], [cols[-1]]])
        mids = (left[starts] + left[ends]) / 2.0
        widths = (ends - starts + 1) * step
        # a run cut by the edge of the view has a false midpoint
        ok = (widths >= 0.3 * width) & (starts > 0) & (ends < road.shape[1] - 1)
        if not np.any(ok):
            continue
        k = int(np.argmin(np.where(ok, np.abs(mids - centre), np.inf)))
        if points and abs(mids[k] - centre) > width:
            break  # the run we followed ended; another road branch is not ours
        centre = float(mids[k])
        points.append((float(forward[j]), centre))
    return np.array(points).reshape(-1, 2)


def detect_tiles(
    image_bgr: np.ndarray, camera_model: CameraModel, segmentation: Segmentation = Segmentation()
) -> np.ndarray:
    """The (12, 4) tile block for the car seen through `camera_model`; raises TrackNotFound."""
    if not isinstance(image_bgr, np.ndarray) or image_bgr.dtype != np.uint8 or image_bgr.ndim != 3 or image_bgr.shape[2] != 3:
        raise InvalidImage("expected an HxWx3 uint8 BGR image")
    cam = camera_model
    warped, forward, left = _birds_eye(image_bgr, cam)
    road, kerb = segment(warped, segmentation)
    pts = _centreline_points(road, forward, left, cam.road_width_m)
    if len(pts) < 8 or np.ptp(pts[:, 0]) < 2 * cam.road_width_m:
        raise TrackNotFound(f"road visible over {len(pts)} rows only")
    degree = 3 if np.ptp(pts[:, 0]) > 4 * cam.road_width_m else 2
    coeffs = np.polyfit(pts[:, 0], pts[:, 1], degree)
    slope = np.polyder(coeffs)

    # arc length along the fitted centreline from the car's abeam point (forward = 0)
    scale = cam.metres_to_units
    spacing_m = cam.tile_spacing_units / scale
    f_max = max(pts[:, 0].max(), 13 * spacing_m)
    f = np.linspace(0.0, f_max * 1.5, 2000)
    c = np.polyval(coeffs, f)
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(f), np.diff(c)))])
    s_tiles = spacing_m * (0.5 + np.arange(N_TILES))
    f_tiles = np.interp(s_tiles, arc, f)
    centres = np.stack([f_tiles, np.polyval(coeffs, f_tiles)], axis=1)
    phi = np.arctan(np.polyval(slope, f_tiles))
    fwd = np.stack([np.cos(phi), np.sin(phi)], axis=1)
    lft = np.stack([-np.sin(phi), np.cos(phi)], axis=1)
    d = -centres  # the car sits at the origin

    out = np.zeros((N_TILES, TILE_FEATURES))
    out[:, 0] = np.einsum("ij,ij->i", d, lft) * scale
    out[:, 1] = np.einsum("ij,ij->i", d, fwd) * scale
    out[:, 2] = phi
    out[:, 3] = _kerb_flags(kerb, forward, left, centres, fwd, lft, spacing_m, cam.road_width_m)
    return out


def _kerb_flags(kerb, forward, left, centres, fwd, lft, spacing_m, width_m) -> np.ndarray:
    """1 where kerb pixels line the tile's edges (a band just inside/outside the road edge)."""
    jj, ii = np.nonzero(kerb)
    flags = np.zeros(N_TILES)
    if jj.size == 0:
        return flags
    p = np.stack([forward[jj], left[ii]], axis=1)
    for k in range(N_TILES):
        rel = p - centres[k]
        along = rel @ fwd[k]
        side = np.abs(rel @ lft[k])
        in_band = (np.abs(along) <= spacing_m / 2) & (side >= 0.3 * width_m) & (side <= 0.8 * width_m)
        band_area = spacing_m * 0.5 * width_m * 2  # both sides
        flags[k] = float(in_band.sum() * (forward[0] - forward[1]) ** 2 > 0.1 * band_area)
    return flags
