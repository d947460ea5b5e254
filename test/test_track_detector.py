"""The camera track detector on tracks drawn with OpenCV, checked against the geometry we drew
(signs and magnitudes in the simulator's units), plus the node over real DDS."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Image
from std_msgs.msg import Float64MultiArray

from refine_ros.bringup.spin import NodeSpinner
from refine_ros.robots.rc_car.track_detector import PARAMETERS, TrackDetector, image_to_bgr
from refine_ros.robots.rc_car.vision import (
    HALF_WIDTH_UNITS,
    TILE_SPACING_UNITS,
    CameraModel,
    InvalidImage,
    Segmentation,
    TrackNotFound,
    _smooth,
    detect_tiles,
)
from refine_ros.wire import qos

W, H = 300, 400
MPP = 0.005  # metres per pixel of the top-down drawings
CAR = (150, 390)  # the car's reference point in the drawing
ROAD_W = 0.3  # metres
CAM = CameraModel.top_down(MPP, CAR, ROAD_W, view_forward_m=1.9, view_half_width_m=0.74)
UNITS = 2 * HALF_WIDTH_UNITS / ROAD_W
GRASS, ROAD, RED, WHITE = (102, 204, 102), (102, 102, 102), (0, 0, 255), (255, 255, 255)


def to_pixels(forward: np.ndarray, left: np.ndarray) -> np.ndarray:
    return np.stack([CAR[0] - left / MPP, CAR[1] - forward / MPP], axis=1).round().astype(np.int32)


def draw(centre, kerb_range: tuple[float, float] | None = None) -> np.ndarray:
    """A top-down picture of a road whose centre is at lateral `centre(forward)` metres, with
    red/white kerbs on both edges where forward lies in `kerb_range`."""
    img = np.full((H, W, 3), GRASS, np.uint8)
    f = np.linspace(-0.1, 2.2, 400)
    c = centre(f)
    cv2.polylines(img, [to_pixels(f, c)], False, ROAD, int(ROAD_W / MPP))
    if kerb_range:
        slope = np.gradient(c, f)
        norm = np.hypot(1.0, slope)
        for side in (-1.0, 1.0):
            ef = f - side * (ROAD_W / 2) * slope / norm
            el = c + side * (ROAD_W / 2) / norm
            px = to_pixels(ef, el)
            for k in range(len(f) - 1):
                if kerb_range[0] <= f[k] <= kerb_range[1]:
                    colour = RED if (k // 8) % 2 == 0 else WHITE
                    cv2.line(img, tuple(map(int, px[k])), tuple(map(int, px[k + 1])), colour, 8)
    return img


def expected_tiles(centre) -> np.ndarray:
    """Tiles from the exact drawn curve: arc-length sampling, the simulator's formulas."""
    f = np.linspace(0.0, 3.0, 20000)
    c = centre(f)
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(np.diff(f), np.diff(c)))])
    spacing = TILE_SPACING_UNITS / UNITS
    ft = np.interp(spacing * (0.5 + np.arange(12)), arc, f)
    ct = centre(ft)
    phi = np.arctan(np.gradient(c, f)[np.searchsorted(f, ft)])
    x = (ft * np.sin(phi) - ct * np.cos(phi)) * UNITS
    y = (-ft * np.cos(phi) - ct * np.sin(phi)) * UNITS
    return np.stack([x, y, phi], axis=1)


def straight(offset):
    return lambda f: offset + 0.0 * f


def curve(a):
    return lambda f: a * f**2


@pytest.mark.parametrize("offset, sign", [(-0.08, 1.0), (0.08, -1.0)])
def test_straight_road_lateral_sign_and_magnitude(offset, sign):
    """The road centre to the car's right (negative left) means the car is left of centre."""
    tiles = detect_tiles(draw(straight(offset)), CAM)
    assert tiles.shape == (12, 4)
    assert np.all(np.sign(tiles[:, 0]) == sign)
    np.testing.assert_allclose(tiles[:, 0], -offset * UNITS, atol=0.01)
    np.testing.assert_allclose(tiles[:, 2], 0.0, atol=0.02)
    np.testing.assert_allclose(tiles[:, 1], -TILE_SPACING_UNITS * (0.5 + np.arange(12)), atol=0.01)
    assert np.all(tiles[:, 3] == 0)


def test_car_on_the_grass_is_beyond_the_half_width():
    tiles = detect_tiles(draw(straight(-0.2)), CAM)  # 0.2 m off a 0.3 m road
    assert np.all(tiles[:, 0] > HALF_WIDTH_UNITS)


@pytest.mark.parametrize("a, sign", [(0.4, 1.0), (-0.4, -1.0)])
def test_curves_turn_theta_with_the_road(a, sign):
    """A left curve (centre moving to +left ahead) gives positive, growing theta."""
    tiles = detect_tiles(draw(curve(a)), CAM)
    truth = expected_tiles(curve(a))
    assert np.all(np.sign(tiles[3:, 2]) == sign)
    assert np.all(np.diff(sign * tiles[:, 2]) > 0), "the bend sharpens ahead"
    np.testing.assert_allclose(tiles[:, 2], truth[:, 2], atol=0.08)
    np.testing.assert_allclose(tiles[:, 0], truth[:, 0], atol=0.04)
    np.testing.assert_allclose(tiles[:, 1], truth[:, 1], atol=0.04)


def test_kerb_flags_only_the_tiles_beside_kerb_pixels():
    kerb = (0.35, 0.75)
    tiles = detect_tiles(draw(curve(0.4), kerb_range=kerb), CAM)
    plain = detect_tiles(draw(curve(0.4)), CAM)
    np.testing.assert_allclose(tiles[:, :3], plain[:, :3], atol=0.02)  # kerbs do not move the road
    assert np.all(plain[:, 3] == 0)
    forward = -tiles[:, 1] / UNITS  # roughly the forward distance of each tile (m)
    inside = (forward > kerb[0] + 0.06) & (forward < kerb[1] - 0.06)
    outside = (forward < kerb[0] - 0.06) | (forward > kerb[1] + 0.06)
    assert inside.any() and outside.any()
    assert np.all(tiles[inside, 3] == 1)
    assert np.all(tiles[outside, 3] == 0)


def test_a_pinhole_camera_sees_the_same_tiles_as_the_top_down_view():
    """Render the drawn ground through a forward camera and detect from that view."""
    cam = CameraModel.pinhole(
        fx=300, fy=300, cx=320, cy=240, height_m=0.25, pitch_rad=0.6, road_width_m=ROAD_W,
        view_forward_m=1.6, view_half_width_m=0.7, grid_m=0.005, forward_offset_m=0.05,
    )  # fmt: skip
    ground = draw(curve(0.3))
    camera_to_topdown = np.linalg.inv(CAM.homography) @ cam.homography
    view = cv2.warpPerspective(
        ground, camera_to_topdown, (640, 480), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
        borderValue=GRASS,
    )  # fmt: skip
    tiles = detect_tiles(view, cam)
    truth = expected_tiles(curve(0.3))
    np.testing.assert_allclose(tiles[:8, 2], truth[:8, 2], atol=0.1)
    np.testing.assert_allclose(tiles[:8, 0], truth[:8, 0], atol=0.05)


def path_tiles(points: np.ndarray) -> np.ndarray:
    """Tiles from an exact centreline given as dense (forward, left) points starting behind
    the car: arc length from the car's abeam point, headings from the path's direction."""
    arc = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(points, axis=0).T))])
    heading = np.unwrap(np.arctan2(*np.gradient(points, axis=0)[:, ::-1].T))
    abeam = arc[int(np.argmin(np.hypot(*points.T)))]
    s = abeam + TILE_SPACING_UNITS / UNITS * (0.5 + np.arange(12))
    f, c, phi = (np.interp(s, arc, v) for v in (points[:, 0], points[:, 1], heading))
    x = (f * np.sin(phi) - c * np.cos(phi)) * UNITS
    y = (-f * np.cos(phi) - c * np.sin(phi)) * UNITS
    return np.stack([x, y, phi], axis=1)


def bend_path(straight_m: float, radius_m: float, turn_rad: float, offset_m: float = 0.0) -> np.ndarray:
    """A road that runs straight ahead for `straight_m`, then bends left by `turn_rad` on a
    `radius_m` arc, then runs straight again; its centre is `offset_m` to the car's left."""
    f = np.linspace(-0.1, straight_m, 200)
    straight = np.stack([f, np.full_like(f, offset_m)], axis=1)
    a = np.linspace(0.0, turn_rad, 200)[1:]
    arc = np.stack([straight_m + radius_m * np.sin(a), offset_m + radius_m * (1 - np.cos(a))], axis=1)
    u = np.linspace(0.0, 1.0, 100)[1:]
    exit_ = arc[-1] + u[:, None] * np.array([np.cos(turn_rad), np.sin(turn_rad)])
    return np.concatenate([straight, arc, exit_])


def draw_path(points: np.ndarray, kerb_side: float = 0.0, kerb_width_m: float = 0.0) -> np.ndarray:
    """A top-down picture of a road along `points`; with `kerb_side` +1 (left) or -1 (right),
    a red/white kerb `kerb_width_m` wide along that edge, outside the road, as the simulator
    draws one (kerb_side 0: none)."""
    img = np.full((H, W, 3), GRASS, np.uint8)
    cv2.polylines(img, [to_pixels(points[:, 0], points[:, 1])], False, ROAD, int(ROAD_W / MPP))
    if kerb_side:
        direction = np.gradient(points, axis=0)
        direction /= np.linalg.norm(direction, axis=1, keepdims=True)
        normal = np.stack([-direction[:, 1], direction[:, 0]], axis=1) * kerb_side
        edge = points + normal * (ROAD_W / 2 + kerb_width_m / 2)
        px = to_pixels(edge[:, 0], edge[:, 1])
        for k in range(len(px) - 1):
            colour = RED if (k // 8) % 2 == 0 else WHITE
            cv2.line(img, tuple(map(int, px[k])), tuple(map(int, px[k + 1])), colour, max(1, round(kerb_width_m / MPP)))
    return img


def test_a_right_angle_bend_ahead_leaves_the_straight_tiles_straight():
    """A straight that ends in a 90-degree bend (the simulator's tracks have many): the tiles
    on the straight point straight ahead and the ones in the bend turn with it. A centreline
    fitted as lateral = f(forward) cannot turn that far and bends the straight instead."""
    path = bend_path(straight_m=0.6, radius_m=0.25, turn_rad=np.pi / 2)
    tiles = detect_tiles(draw_path(path), CAM)
    truth = path_tiles(path)
    on_straight = TILE_SPACING_UNITS / UNITS * (0.5 + np.arange(12)) < 0.6 - 0.05  # arc from the car
    assert on_straight.sum() >= 6
    np.testing.assert_allclose(tiles[on_straight, 2], 0.0, atol=0.05)
    np.testing.assert_allclose(tiles[on_straight, 0], 0.0, atol=0.02)
    np.testing.assert_allclose(tiles[:, 2], truth[:, 2], atol=0.12)
    assert tiles[-1, 2] > 0.8, "the far tiles lie in the bend"


def test_a_pinhole_view_that_shows_one_road_edge_still_finds_the_centre():
    """Near a forward camera the road is wider than the view: only one edge is in sight, and
    the other side of the road run is the border of the picture, not a road edge. The centre
    lies half a road width inside the edge that is seen."""
    cam = CameraModel.pinhole(
        fx=500, fy=500, cx=320, cy=240, height_m=0.15, pitch_rad=0.5, road_width_m=ROAD_W,
        view_forward_m=1.6, view_half_width_m=0.7, grid_m=0.005,
    )  # fmt: skip
    offset = 0.1  # the road centre 0.1 m to the car's left: the car is right of centre
    ground = draw(straight(offset))
    view = cv2.warpPerspective(ground, np.linalg.inv(CAM.homography) @ cam.homography, (640, 480),
                               flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP, borderValue=GRASS)  # fmt: skip
    tiles = detect_tiles(view, cam)
    np.testing.assert_allclose(tiles[:, 0], -offset * UNITS, atol=0.015)
    np.testing.assert_allclose(tiles[:, 2], 0.0, atol=0.03)


def test_a_one_sided_kerb_as_narrow_as_the_simulators_is_flagged():
    """The simulator draws a kerb on one side of a tile only, a tenth of the road width wide."""
    path = bend_path(straight_m=0.3, radius_m=0.6, turn_rad=0.9)
    tiles = detect_tiles(draw_path(path, kerb_side=-1.0, kerb_width_m=0.1 * ROAD_W), CAM)
    plain = detect_tiles(draw_path(path), CAM)
    assert np.all(plain[:, 3] == 0)
    assert np.all(tiles[:, 3] == 1)


def test_segmentation_thresholds_adapt_to_a_dark_track():
    img = draw(straight(-0.08))
    img[np.all(img == ROAD, axis=2)] = (40, 40, 40)  # dark asphalt
    with pytest.raises(TrackNotFound):
        detect_tiles(img, CAM)
    tiles = detect_tiles(img, CAM, Segmentation(road_value_min=20))
    np.testing.assert_allclose(tiles[:, 0], 0.08 * UNITS, atol=0.01)


def test_no_road_is_a_typed_error_and_bad_images_too():
    with pytest.raises(TrackNotFound):
        detect_tiles(np.full((H, W, 3), GRASS, np.uint8), CAM)
    for bad in (np.zeros((10, 10), np.uint8), np.zeros((10, 10, 3), np.float32), "image"):
        with pytest.raises(InvalidImage):
            detect_tiles(bad, CAM)
    with pytest.raises(ValueError):
        CameraModel(np.zeros((3, 3)), 0.3, 1.0, 1.0, 0.01)


def test_units_match_the_simulator():
    car_racing = pytest.importorskip("refine_core.tasks.car_racing.env")
    from gymnasium.envs.box2d import car_racing as stock

    assert HALF_WIDTH_UNITS == car_racing.HALF_WIDTH_UNITS
    assert TILE_SPACING_UNITS == pytest.approx(stock.TRACK_DETAIL_STEP * car_racing.UNITS_PER_WORLD)


# ---- node over DDS ---------------------------------------------------------------------------
def image_message(bgr: np.ndarray, encoding: str = "bgr8") -> Image:
    data = bgr[..., ::-1] if encoding == "rgb8" else bgr
    msg = Image(height=bgr.shape[0], width=bgr.shape[1], encoding=encoding, step=bgr.shape[1] * 3)
    msg.data = np.ascontiguousarray(data).tobytes()
    return msg


def test_image_conversion_handles_rgb_and_rejects_short_data():
    img = draw(straight(0.0))
    np.testing.assert_array_equal(image_to_bgr(image_message(img, "rgb8")), img)
    msg = image_message(img)
    msg.data = msg.data[:100]
    with pytest.raises(InvalidImage):
        image_to_bgr(msg)
    msg = image_message(img)
    msg.encoding = "mono16"
    with pytest.raises(InvalidImage):
        image_to_bgr(msg)


def _smooth_by_polyfit(found: np.ndarray, half_window: float) -> tuple[np.ndarray, np.ndarray]:
    """The smoothing `_smooth` stands for, written the obvious way: per point, a quadratic
    through the points within the window (the three nearest where fewer), by np.polyfit."""
    arc = found[:, 0]
    pts, headings = np.empty((len(arc), 2)), np.empty(len(arc))
    for k, s in enumerate(arc):
        near = np.abs(arc - s) <= half_window
        if near.sum() < 3:
            near = np.isin(np.arange(len(arc)), np.argsort(np.abs(arc - s), kind="stable")[:3])
        fx, fy = (np.polyfit(arc[near] - s, found[near, c], 2) for c in (1, 2))
        pts[k] = fx[-1], fy[-1]
        headings[k] = np.arctan2(fy[-2], fx[-2])
    return pts, np.unwrap(headings)


@pytest.mark.parametrize("seed", range(5))
def test_the_smoothing_is_a_local_quadratic_fit_at_every_point(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    arc = np.cumsum(rng.uniform(0.02, 0.3, n))
    arc[n // 2:] += rng.uniform(0.5, 3.0)  # a gap in the trace: points beside it have few neighbours
    found = np.c_[arc, 3 * np.cos(arc) + rng.normal(0, 0.02, n), 2 * np.sin(0.7 * arc) + rng.normal(0, 0.02, n)]
    half_window = float(rng.uniform(0.1, 1.0))
    pts, headings = _smooth(found, half_window)
    want_pts, want_headings = _smooth_by_polyfit(found, half_window)
    np.testing.assert_allclose(pts, want_pts, atol=1e-9)
    np.testing.assert_allclose(headings, want_headings, atol=1e-9)


@pytest.mark.ros  # a detector node over DDS
@pytest.mark.timeout(60)
def test_node_publishes_tiles_for_camera_images():
    ctx = Context()
    rclpy.init(context=ctx)
    overrides = [
        Parameter("camera_mode", value="top_down"),
        Parameter("metres_per_pixel", value=MPP),
        Parameter("car_pixel", value=[float(CAR[0]), float(CAR[1])]),
        Parameter("road_width", value=ROAD_W),
        Parameter("view_forward", value=1.9),
        Parameter("view_half_width", value=0.74),
        Parameter("grid_resolution", value=MPP),
    ]
    detector = TrackDetector(context=ctx, parameter_overrides=overrides)
    fake = Node("fake_camera", context=ctx)
    got: list[np.ndarray] = []
    pub = fake.create_publisher(Image, "/camera/image_raw", qos.SENSOR)
    fake.create_subscription(
        Float64MultiArray, "track/tiles", lambda m: got.append(np.array(m.data).reshape(12, 4)), qos.SENSOR
    )
    # NodeSpinner: its stop() joins the spin thread before the nodes are destroyed. With
    # `executor.shutdown(timeout_sec=2.0)` and no join, an image callback still running after 2 s
    # (two busy loops beside a full run, ciG) published on a destroyed node: InvalidHandle.
    spinner = NodeSpinner([detector, fake], ctx).start()
    try:
        names = set(detector.list_parameters([], 0).names)
        assert set(PARAMETERS) <= names
        assert all(d.description for d in detector.describe_parameters(list(PARAMETERS)))
        bad = detector.set_parameters([Parameter("camera_mode", value="fisheye")])[0]
        assert not bad.successful
        # Until both images have been handled: the tiles of the road image can arrive before the
        # detector has taken the grass image after it (CI, stop 39: tiles in, failures still 0).
        deadline = time.monotonic() + 10.0
        while not (got and detector.failures > 0) and time.monotonic() < deadline:
            pub.publish(image_message(draw(straight(-0.08))))
            pub.publish(image_message(np.full((H, W, 3), GRASS, np.uint8)))  # no road: no tiles
            time.sleep(0.05)
        assert got, "no tiles received"
        np.testing.assert_allclose(got[0][:, 0], 0.08 * UNITS, atol=0.01)
        assert detector.failures > 0 and detector.detected > 0
    finally:
        stopped = spinner.stop(timeout_s=30.0)  # one image callback, however slow the machine
        if stopped:
            detector.destroy_node()
            fake.destroy_node()
        rclpy.shutdown(context=ctx)
    assert stopped, "the detector's callback was still running 30 s after the spin was asked to stop"
