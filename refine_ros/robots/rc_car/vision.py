"""Camera track detector: a real car's camera image -> the simulator's (12, 4) tile block.

Why here and ROS-free: the features must match `refine_core.tasks.car_racing.env` exactly
(units, signs, tile spacing), and that is only checkable with images we draw ourselves.

Pipeline: warp the image onto a bird's-eye grid of the ground plane (car frame: forward,
left, metres) through the camera's ground homography, keeping track of which cells the
camera actually sees; segment grey road and red/white kerb by colour; walk along the road
from the car, correcting each predicted centre point from the road edges seen across the
road there (an edge at the border of the camera's view is not a road edge); smooth the walk
locally and continue it as circular arcs behind its first and past its last point; sample
12 tile centres along it by arc length, and express the car in each tile's frame exactly as
the simulator does: x = d . left (positive: car left of centre), y = d . forward (negative:
tile still ahead), theta = tile heading - car heading (positive: road turns left), border =
kerb pixels beside the tile. Metres become track units through the road width (half-width
= 0.2 units).

What a camera cannot give: the simulator's tile boundaries are painted nowhere, so tile 0 is
assumed to be half a tile spacing ahead of the car (the simulator's tile 0 is 0 to 1 spacing
ahead): y carries that phase error, up to half a spacing (0.05 units). The road right beside
the car is below the camera's view; the first tiles come from continuing the road seen
further ahead back to the car.
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


def _birds_eye(image: np.ndarray, cam: CameraModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bird's-eye image, the mask of its cells the camera actually sees, and the forward/left
    metres of each grid row/column."""
    rows = int(round(cam.view_forward_m / cam.grid_m)) + 1
    cols = int(round(2 * cam.view_half_width_m / cam.grid_m)) + 1
    if rows * cols > 4_000_000:
        raise ValueError("bird's-eye grid too large; raise grid_m")
    # grid pixel (i = column, j = row) -> ground; row 0 is the far end, as in a picture
    grid_to_ground = np.array(
        [[0.0, -cam.grid_m, cam.view_forward_m], [-cam.grid_m, 0.0, cam.view_half_width_m], [0.0, 0.0, 1.0]]
    )
    h = np.asarray(cam.homography, dtype=float)
    grid_to_image = np.linalg.inv(h) @ grid_to_ground
    warp = dict(flags=cv2.INTER_NEAREST | cv2.WARP_INVERSE_MAP, borderMode=cv2.BORDER_CONSTANT)
    warped = cv2.warpPerspective(image, grid_to_image, (cols, rows), borderValue=(0, 0, 0), **warp)
    inside = cv2.warpPerspective(np.full(image.shape[:2], 255, np.uint8), grid_to_image, (cols, rows),
                                 borderValue=0, **warp) > 0  # fmt: skip
    # A ground point behind the camera also lands on some pixel (the projection mirrors it):
    # it is seen only where the homogeneous scale has the sign of a point in front, such as
    # the one under the image's bottom centre.
    bottom_centre = np.array([image.shape[1] / 2.0, image.shape[0] - 1.0, 1.0])
    front = np.sign((h @ bottom_centre)[2])
    jj, ii = np.mgrid[0:rows, 0:cols]
    scale = grid_to_image[2, 0] * ii + grid_to_image[2, 1] * jj + grid_to_image[2, 2]
    visible = inside & (np.sign(scale) == front)
    forward = cam.view_forward_m - cam.grid_m * np.arange(rows)
    left = cam.view_half_width_m - cam.grid_m * np.arange(cols)
    return warped, visible, forward, left


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


# Cells of the bird's-eye grid as the centreline tracer sees them.
_UNSEEN, _GROUND, _ROAD = 0, 1, 2
_STEP_CELLS = 4  # tracer step along the road, in grid cells
_HEADING_BASELINE = 4  # measured centres back to the one the heading is taken from
_EDGE_TOLERANCE = 0.3  # road widths an edge may sit from where the predicted centre puts it
_MAX_GAP = 0.6  # road widths the tracer coasts without a measurement before it stops
_SMOOTHING = 0.5  # road widths of arc on each side of a centre point that smooth it
_END_WINDOW = 1.0  # road widths at each end of the trace whose bend is continued beyond it
MIN_TRACE = 1.0  # road widths of centreline the detector must see, else TrackNotFound
KERB_MIN_FILL = 0.03  # fraction of a tile's kerb bands that kerb pixels must cover


@dataclass(frozen=True)
class _Grid:
    """The bird's-eye cells (unseen, ground, road) and their ground coordinates (m)."""

    cells: np.ndarray
    forward: np.ndarray
    left: np.ndarray

    @property
    def step(self) -> float:
        return abs(float(self.left[0] - self.left[1]))

    def sample(self, points: np.ndarray) -> np.ndarray:
        """The cell under each ground point (..., 2) in (forward, left) metres."""
        j = np.rint((self.forward[0] - points[..., 0]) / self.step).astype(int)
        i = np.rint((self.left[0] - points[..., 1]) / self.step).astype(int)
        ok = (j >= 0) & (j < self.cells.shape[0]) & (i >= 0) & (i < self.cells.shape[1])
        return np.where(ok, self.cells[np.clip(j, 0, self.cells.shape[0] - 1), np.clip(i, 0, self.cells.shape[1] - 1)],
                        _UNSEEN)  # fmt: skip

    def contains(self, point: np.ndarray) -> bool:
        return bool(self.forward[-1] <= point[0] <= self.forward[0] and self.left[-1] <= point[1] <= self.left[0])


def _centre_offset(cells: np.ndarray, offsets: np.ndarray, width: float, tolerance: float) -> float | None:
    """Where the road centre lies along a line across the road (offsets in metres, positive
    to the left of the predicted centre at 0), from the road run nearest the prediction.

    Each edge of that run that borders seen ground (not the edge of the camera's view) puts
    the centre half a road width inside it; edges farther than `tolerance` from where the
    prediction expects them are ignored (the line then runs along the road, as in a sharp
    bend). None when no edge qualifies: the caller coasts on its prediction."""
    road = cells == _ROAD
    if not road.any():
        return None
    k = int(np.argmin(np.where(road, np.abs(offsets), np.inf)))
    after = np.flatnonzero(~road[k:])
    before = np.flatnonzero(~road[:k][::-1])
    estimates = []
    if after.size and cells[k + after[0]] == _GROUND:  # the run's left edge
        b = k + after[0]
        estimates.append((offsets[b - 1] + offsets[b]) / 2.0 - width / 2.0)
    if before.size and cells[k - 1 - before[0]] == _GROUND:  # its right edge
        a = k - 1 - before[0]
        estimates.append((offsets[a] + offsets[a + 1]) / 2.0 + width / 2.0)
    good = [e for e in estimates if abs(e) <= tolerance]
    return float(np.mean(good)) if good else None


def _trace_centreline(grid: _Grid, width: float, length: float) -> np.ndarray:
    """Centre points (arc, forward, left) found by walking along the road from the car.

    Why a walk and not lateral = f(forward): a bend of 90 degrees or more within the view
    (common on the simulator's tracks) has no such function, and near the car the camera
    sees one road edge at most, which still fixes the centre half a road width inside it.
    Each step predicts the next centre along the current heading, looks across the road
    there, and corrects the prediction; the heading comes from the last few centres."""
    step = grid.step
    ds = _STEP_CELLS * step
    offsets = np.arange(-width, width + step / 2.0, step)
    seen_rows = np.flatnonzero((grid.cells != _UNSEEN).any(axis=1))
    if seen_rows.size == 0:
        return np.zeros((0, 3))
    centre = np.array([max(0.0, float(grid.forward[seen_rows[-1]])), 0.0])
    heading, arc, gap = 0.0, 0.0, 0.0
    found: list[tuple[float, float, float]] = []
    while arc <= length and grid.contains(centre):
        normal = np.array([-np.sin(heading), np.cos(heading)])
        cells = grid.sample(centre + offsets[:, None] * normal)
        tolerance = _EDGE_TOLERANCE * width if found else width
        offset = _centre_offset(cells, offsets, width, tolerance)
        if offset is not None:
            centre = centre + offset * normal
            found.append((arc, centre[0], centre[1]))
            gap = 0.0
            if len(found) > 1:
                back = np.array(found[max(0, len(found) - 1 - _HEADING_BASELINE)][1:])
                heading = float(np.arctan2(centre[1] - back[1], centre[0] - back[0]))
        elif found:
            gap += ds
            if gap > _MAX_GAP * width:
                break
        centre = centre + ds * np.array([np.cos(heading), np.sin(heading)])
        arc += ds
    return np.array(found).reshape(-1, 3)


def _continue_arc(
    start: np.ndarray, heading: float, curvature: float, length: float, ds: float
) -> tuple[np.ndarray, np.ndarray]:
    """Points and headings of a constant-curvature arc (length may be negative: backwards)."""
    n = max(1, int(np.ceil(abs(length) / ds)))
    s = np.linspace(0.0, length, n + 1)[1:]
    psi = heading + curvature * s
    if abs(curvature) < 1e-9:
        along, across = s * np.cos(heading), s * np.sin(heading)
    else:
        along = (np.sin(psi) - np.sin(heading)) / curvature
        across = (np.cos(heading) - np.cos(psi)) / curvature
    return start + np.stack([along, across], axis=1), psi


def _smooth(found: np.ndarray, half_window: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions and headings along the traced centre points, each from a quadratic fitted
    to the points within `half_window` metres of arc: local, so a straight that ends in a
    hairpin stays straight (one polynomial through both would bend it).

    All the fits at once, as weighted least squares over every point (weight 1 inside a
    point's window, else 0): one (n, 3, 3) solve instead of two `np.polyfit` calls per point,
    which took most of the detector's time (profiled on the car twin: 100 fits a frame, 0.54
    of a core for the node)."""
    arc = found[:, 0]
    n = len(arc)
    if n < 3:  # too few points for a quadratic: the exact fits of lower degree
        return _smooth_few(found)
    u = arc[None, :] - arc[:, None]  # u[k, j]: point j's arc measured from point k's
    near = np.abs(u) <= half_window
    sparse = near.sum(axis=1) < 3  # beside a gap in the trace: the three nearest points
    if sparse.any():
        nearest = np.argsort(np.abs(u[sparse]), axis=1, kind="stable")[:, :3]
        near[sparse] = False
        near[np.flatnonzero(sparse)[:, None], nearest] = True
    w = near.astype(float)
    powers = u[..., None] ** np.arange(5)  # (n, n, 5): 1, u, ..., u^4
    moments = np.einsum("kj,kjp->kp", w, powers)
    normal = moments[:, np.arange(3)[:, None] + np.arange(3)[None, :]]  # (n, 3, 3): sum of u^(a+b)
    rhs = np.einsum("kj,kjp,jc->kpc", w, powers[..., :3], found[:, 1:3])  # (n, 3, 2)
    coef = np.linalg.solve(normal, rhs)  # coef[k, p, c]: the u^p coefficient of coordinate c
    pts = coef[:, 0, :]
    headings = np.arctan2(coef[:, 1, 1], coef[:, 1, 0])
    return pts, np.unwrap(headings)


def _smooth_few(found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_smooth` for one or two points: each point itself; the heading of the line through
    both (none through one: 0)."""
    pts = found[:, 1:3].copy()
    if len(found) == 2:
        heading = float(np.arctan2(*(pts[1] - pts[0])[::-1]))
        return pts, np.full(2, heading)
    return pts, np.zeros(len(found))


def _centreline(
    found: np.ndarray, width: float, reach: float, ds: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The smoothed traced centreline, continued as circular arcs behind the first and past
    the last point (with the curvature seen near each end) so that it runs from beside the
    car to `reach` metres ahead. Returns points (n, 2), headings, arc lengths from the first
    point (behind the car), and the index of the first traced point among them."""
    pts, psi = _smooth(found, _SMOOTHING * width)
    arcs = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(pts, axis=0).T))])
    window = min(arcs[-1] / 3.0, _END_WINDOW * width)

    def end_curvature(at: float, other: float) -> float:
        k = (np.interp(at, arcs, psi) - np.interp(other, arcs, psi)) / (at - other)
        return float(np.clip(k, -2.0 / width, 2.0 / width))  # no road bends tighter than that

    k0 = end_curvature(window, 0.0)
    k1 = end_curvature(arcs[-1], arcs[-1] - window)
    back = float(np.hypot(*pts[0])) + width
    ahead = max(0.0, reach - arcs[-1]) + width
    back_pts, back_psi = _continue_arc(pts[0], psi[0], k0, -back, ds)
    ahead_pts, ahead_psi = _continue_arc(pts[-1], psi[-1], k1, ahead, ds)
    points = np.concatenate([back_pts[::-1], pts, ahead_pts])
    headings = np.concatenate([back_psi[::-1], psi, ahead_psi])
    arcs = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(points, axis=0).T))])
    return points, headings, arcs, len(back_pts)


def detect_tiles(
    image_bgr: np.ndarray, camera_model: CameraModel, segmentation: Segmentation = Segmentation()
) -> np.ndarray:
    """The (12, 4) tile block for the car seen through `camera_model`; raises TrackNotFound."""
    if not isinstance(image_bgr, np.ndarray) or image_bgr.dtype != np.uint8 or image_bgr.ndim != 3 or image_bgr.shape[2] != 3:
        raise InvalidImage("expected an HxWx3 uint8 BGR image")
    cam = camera_model
    warped, visible, forward, left = _birds_eye(image_bgr, cam)
    road, kerb = segment(warped, segmentation)
    grid = _Grid(np.where(visible, np.where(road, _ROAD, _GROUND), _UNSEEN).astype(np.uint8), forward, left)
    scale = cam.metres_to_units
    spacing_m = cam.tile_spacing_units / scale
    width = cam.road_width_m
    reach = (N_TILES + 1) * spacing_m
    found = _trace_centreline(grid, width, reach + width)
    if len(found) < 5 or found[-1, 0] - found[0, 0] < MIN_TRACE * width:
        seen = found[-1, 0] - found[0, 0] if len(found) else 0.0
        raise TrackNotFound(f"road centre seen over {seen:.2f} m only (need {MIN_TRACE * width:.2f} m)")
    points, headings, arcs, first = _centreline(found, width, reach + float(np.hypot(*found[0, 1:])), grid.step)

    # tile k's centre lies (k + 1/2) spacings along the road from the car's abeam point: the
    # centreline point nearest the car, before the first centre seen (the road may pass near
    # the car again further on)
    start = int(np.argmin(np.hypot(points[: first + 1, 0], points[: first + 1, 1])))
    s_tiles = arcs[start] + spacing_m * (0.5 + np.arange(N_TILES))
    centres = np.stack([np.interp(s_tiles, arcs, points[:, 0]), np.interp(s_tiles, arcs, points[:, 1])], axis=1)
    phi = np.interp(s_tiles, arcs, headings)
    fwd = np.stack([np.cos(phi), np.sin(phi)], axis=1)
    lft = np.stack([-np.sin(phi), np.cos(phi)], axis=1)
    d = -centres  # the car sits at the origin

    out = np.zeros((N_TILES, TILE_FEATURES))
    out[:, 0] = np.einsum("ij,ij->i", d, lft) * scale
    out[:, 1] = np.einsum("ij,ij->i", d, fwd) * scale
    out[:, 2] = (phi + np.pi) % (2.0 * np.pi) - np.pi
    out[:, 3] = _kerb_flags(kerb & visible, forward, left, centres, fwd, lft, spacing_m, width)
    return out


def _kerb_flags(kerb, forward, left, centres, fwd, lft, spacing_m, width_m) -> np.ndarray:
    """1 where kerb pixels line a tile's edges: a band on each side from 0.3 to 0.8 road
    widths off the centre, covered to at least KERB_MIN_FILL. The simulator draws its kerb on
    one side only, 0.1 road widths wide, so a full kerb fills 10% of the two bands."""
    jj, ii = np.nonzero(kerb)
    flags = np.zeros(N_TILES)
    if jj.size == 0:
        return flags
    p = np.stack([forward[jj], left[ii]], axis=1)
    cell_area = (forward[0] - forward[1]) ** 2
    band_area = spacing_m * 0.5 * width_m * 2  # both sides
    for k in range(N_TILES):
        rel = p - centres[k]
        along = rel @ fwd[k]
        side = np.abs(rel @ lft[k])
        in_band = (np.abs(along) <= spacing_m / 2) & (side >= 0.3 * width_m) & (side <= 0.8 * width_m)
        flags[k] = float(in_band.sum() * cell_area >= KERB_MIN_FILL * band_area)
    return flags
