"""The car twin: the Box2D car driven like an F1TENTH car (steering angle, speed), its
drivers' readings, and its camera read by the real track detector. The clock is the test's,
so every run is the same. No ROS."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from refine_ros.robots._twin.frames import Pose
from refine_ros.robots._twin.realtime import DropoutPlan
from refine_ros.robots.rc_car.bench import detector_tile_error
from refine_ros.robots.rc_car.camera import SKY_BGR, CarCamera, PinholeCamera, metres_per_unit
from refine_ros.robots.rc_car.twin import (
    CarTwin,
    CarTwinConfig,
    DriveCommand,
    SpeedController,
    drive_from_twist,
)

PERIOD = 0.02  # 50 Hz


def run(twin: CarTwin, commands, start: float = 0.0):
    """Tick the twin every 20 ms from `start`, sending commands(t) first; the readings."""
    out = []
    for k, command in enumerate(commands):
        t = round(start + k * PERIOD, 9)
        if command is not None:
            twin.drive(command, t)
        out.append((t, twin.tick(t), twin.forward_speed()))
    return out


@pytest.fixture
def twin():
    car = CarTwin(CarTwinConfig(pixel_noise=0.0))
    yield car
    car.close()


# ---- camera ------------------------------------------------------------------------------------
def test_the_renderer_and_the_detectors_camera_model_are_the_same_pinhole():
    """Two derivations, one from the camera's pose (renderer), one from the ground
    homography (detector): the same ground points land on the same pixels."""
    cam = PinholeCamera(fx=420.0, fy=410.0, cx=300.0, cy=250.0, height_m=0.2, pitch_rad=0.35, forward_offset_m=0.07)
    model = cam.detector_model()
    rng = np.random.default_rng(0)
    f, left = rng.uniform(0.3, 3.0, 50), rng.uniform(-1.0, 1.0, 50)
    u, v, z = cam.project(f, left)
    assert np.all(z > 0)
    ground = model.homography @ np.stack([u, v, np.ones_like(u)])
    np.testing.assert_allclose(ground[0] / ground[2], f, atol=1e-9)
    np.testing.assert_allclose(ground[1] / ground[2], left, atol=1e-9)


def test_the_camera_sees_grey_road_ahead_and_sky_above_the_horizon(twin):
    twin.reset(0, 0.0)
    img = CarCamera(twin.env, PinholeCamera(pitch_rad=0.15), pixel_noise=0.0).render()
    assert img.shape == (480, 640, 3) and img.dtype == np.uint8
    horizon = 240 - 500 * math.tan(0.15)
    assert tuple(img[5, 320]) == SKY_BGR and tuple(img[int(horizon) - 3, 10]) == SKY_BGR
    b, g, r = img[470, 320].astype(int)
    assert abs(b - g) <= 2 and abs(g - r) <= 2 and 95 <= g <= 112, "the start line is on the road"
    assert tuple(img[int(horizon) + 3, 5]) != SKY_BGR, "ground below the horizon"


def test_the_detector_reads_the_rendered_camera_within_the_measured_error():
    """The track detector on the twin's pictures against the simulator's own tiles, along
    part of an expert lap (a different track from the bench's seed 0).

    Bounds, from `python -m refine_ros.robots.rc_car.bench detector --seeds 0 1 2 3 4` (x 0.015,
    y 0.031, theta 0.040 mean; 0.8% frames without tiles) with margins a calibration error
    would exceed (the end of the test): x within a tenth of the road's half-width on
    average; y carries the tile phase no camera can see (uniform over +-half a spacing, mean
    0.026), so its bound is that plus the x bound; theta within 0.08 rad on average."""
    bounds = {"x": 0.04, "y": 0.026 + 0.04, "theta": 0.08}
    fig = detector_tile_error(seeds=(3,), every=4, max_steps=360, pixel_noise=2.0, progress=False)
    assert fig["frames"] == 90
    assert fig["not_found_fraction"] <= 0.05
    for name, bound in bounds.items():
        assert fig[name]["mean"] < bound, (name, fig[name])
    assert fig["border_agreement"] > 0.85
    # the same bounds fail when the detector's camera model is off by 0.05 rad of pitch
    wrong = detector_tile_error(seeds=(3,), every=4, max_steps=360, pixel_noise=2.0, progress=False,
                                detector_camera=dataclasses.replace(PinholeCamera(), pitch_rad=0.55))  # fmt: skip
    assert any(wrong[name]["mean"] >= bound for name, bound in bounds.items()) or wrong["not_found_fraction"] > 0.05


def test_the_camera_mount_puts_the_optical_axis_where_the_renderer_looks(twin):
    """The static transform a node broadcasts for the camera agrees with the pinhole the
    renderer and the detector use: a ground point on the optical axis, taken through the
    mount, lies straight ahead of the camera at the pitch below the horizon."""
    cam = twin.config.camera
    mount = twin.camera_mount()
    assert (mount.parent, mount.child) == ("base_link", "camera_optical_frame")
    distance = cam.height_m / math.sin(cam.pitch_rad)
    ground = mount.pose * Pose((0.0, 0.0, distance))  # on the optical axis
    np.testing.assert_allclose(ground.position, [cam.height_m / math.tan(cam.pitch_rad), 0.0, 0.0], atol=1e-12)
    u, v, _ = cam.project(np.array([ground.position[0]]), np.array([0.0]))
    assert (u[0], v[0]) == pytest.approx((cam.cx, cam.cy))


def test_camera_frames_follow_the_seed(twin):
    a = CarTwin(CarTwinConfig(seed=5, pixel_noise=3.0))
    b = CarTwin(CarTwinConfig(seed=5, pixel_noise=3.0))
    c = CarTwin(CarTwinConfig(seed=6, pixel_noise=3.0))
    fa, fb, fc = (t.camera_frame(0.0).image for t in (a, b, c))
    np.testing.assert_array_equal(fa, fb)
    assert not np.array_equal(fa, fc)
    for t in (a, b, c):
        t.close()


# ---- drive ---------------------------------------------------------------------------------------
def test_the_speed_loop_holds_the_set_point_and_the_drivers_report_it(twin):
    twin.reset(0, 0.0)
    log = run(twin, [DriveCommand(speed=1.0)] * 200)
    speeds = np.array([s for _, _, s in log])
    assert speeds[-25:].mean() == pytest.approx(1.0, abs=0.05)
    assert speeds.max() < 1.15, "little overshoot"
    _, last, _ = log[-1]
    assert last.odom.vx == pytest.approx(1.0, abs=0.06)
    assert last.odom.x == pytest.approx(twin.pose()[0], abs=0.02) and last.odom.x > 1.5
    assert last.motor.erpm == pytest.approx(4614.0 * twin.driven_wheel_speed(), abs=100.0)
    assert last.motor.erpm == pytest.approx(4614.0, rel=0.06)
    rolling = np.array(last.wheels.velocity) * twin.wheel_radius_m
    np.testing.assert_allclose(rolling, 1.0, atol=0.1)  # wheels roll at the car's speed
    assert last.wheels.name == ("wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr")


@pytest.mark.parametrize("stop", [DriveCommand(speed=0.0), DriveCommand(speed=-1.0), None])
def test_a_stop_brings_the_car_to_rest_and_never_reverses_it(twin, stop):
    """Speed 0, a negative speed (the car has no reverse) and silence (the command timeout)
    all stop the car; its forward speed never goes below zero on the way."""
    twin.reset(0, 0.0)
    run(twin, [DriveCommand(speed=2.0)] * 150)
    assert twin.forward_speed() > 1.5
    log = run(twin, [stop] * 150, start=3.0)
    speeds = np.array([s for _, _, s in log])
    assert speeds.min() > -1e-3, "the car rolled backwards"
    assert np.all(np.abs(speeds[-50:]) < 0.01), "the car is at rest"
    assert np.all(np.array(log[-1][1].wheels.velocity) == pytest.approx(0.0, abs=2.0))


def test_the_speed_controller_never_presses_gas_to_stop():
    controller = SpeedController()
    for wheel, body in [(1.0, 1.0), (-0.5, -0.4), (0.0, -0.2), (0.01, 0.0), (3.0, 2.0)]:
        for setpoint in (0.0, -2.0, float("nan")):
            gas, brake = controller.update(setpoint, wheel, body, 0.02)
            assert gas == 0.0 and brake > 0.0


def test_a_twist_command_turns_the_car_at_the_commanded_yaw_rate(twin):
    twin.reset(0, 0.0)
    command = drive_from_twist(0.5, 1.0, twin.wheelbase_m)
    assert command.steering_angle == pytest.approx(math.atan(twin.wheelbase_m * 2.0))
    log = run(twin, [command] * 150)
    yaw_rate = np.mean([r.odom.yaw_rate for _, r, _ in log[100:]])
    assert yaw_rate == pytest.approx(1.0, rel=0.15)
    assert log[-1][1].odom.y > 0.05, "a left turn moves the car to the left of its start"
    assert drive_from_twist(0.0, 1.0, twin.wheelbase_m) == DriveCommand()


def test_latency_delays_the_command_by_the_configured_time():
    twin = CarTwin(CarTwinConfig(command_latency_s=0.1, command_timeout_s=0.0, pixel_noise=0.0))
    log = run(twin, [None] * 50 + [DriveCommand(speed=1.0)] + [None] * 50)
    moving = [t for t, _, s in log if s > 1e-4]
    assert moving and moving[0] == pytest.approx(1.0 + 0.1, abs=1e-6)
    twin.close()


def test_dropouts_silence_the_configured_sensor_only_in_its_windows():
    plan = {"odom": DropoutPlan.of([(0.5, 0.8)]), "camera": DropoutPlan.of([(0.0, 0.3)])}
    twin = CarTwin(CarTwinConfig(dropouts=plan, pixel_noise=0.0))
    log = run(twin, [DriveCommand(speed=0.5)] * 60)
    odom = [t for t, r, _ in log if r.odom is not None]
    wheels = [t for t, r, _ in log if r.wheels is not None]
    camera = [t for t, r, _ in log if r.camera is not None]
    assert len(wheels) == 60
    assert not [t for t in odom if 0.5 <= t < 0.8] and len(odom) == 60 - 15
    assert camera[0] == pytest.approx(0.32) and len(camera) == 22  # 25 Hz from 0.32 to 1.16
    assert twin.status()["dropped"] == {"odom": 15, "wheels": 0, "motor": 0, "camera": 8}
    twin.close()


def test_the_same_seed_gives_the_same_readings():
    def readings(seed):
        twin = CarTwin(CarTwinConfig(seed=seed, pixel_noise=0.0, dropouts={"wheels": DropoutPlan(rate_per_s=2.0)}))
        log = run(twin, [DriveCommand(speed=1.0, steering_angle=0.1)] * 80)
        twin.close()
        return [(r.odom, r.wheels) for _, r, _ in log]

    assert readings(1) == readings(1)
    assert readings(1) != readings(2)


def test_bad_commands_are_refused_and_config_errors_caught(twin):
    assert not twin.drive(DriveCommand(speed=float("nan")), 100.0)
    assert twin.status()["rejected_commands"] >= 1
    with pytest.raises(ValueError):
        CarTwinConfig(dropouts={"lidar": DropoutPlan()})
    with pytest.raises(ValueError):
        CarTwinConfig(max_steering_angle=1.0)
    assert metres_per_unit(0.3) == pytest.approx(0.0225)


# ---- success -----------------------------------------------------------------------------------
def test_a_lap_driven_through_ackermann_commands_reports_success():
    """Pure pursuit on the track's centreline (privileged, like the simulator's expert),
    sending only steering angles and speeds: the twin reports the closed lap."""
    twin = CarTwin(CarTwinConfig(track_seed=1, pixel_noise=0.0))
    geometry = twin.env.track_geometry()
    t = 0.0
    while twin.success() == 0.0 and t < 60.0:
        hull = twin.env.car.hull
        pos, angle = np.array(hull.position), hull.angle
        target = geometry.points[(twin.env.track_index + 4) % len(geometry)] - pos
        alpha = math.atan2(target[1], target[0]) - (angle + math.pi / 2)
        steer = math.atan2(2 * twin.wheelbase_m * math.sin(alpha), np.hypot(*target) * twin.metres_per_unit)
        twin.drive(DriveCommand(speed=1.0, steering_angle=steer), t)
        twin.tick(t)
        t = round(t + PERIOD, 9)
    assert twin.success() == 1.0, twin.status()
    assert twin.status()["tiles_visited"] >= 0.95 * twin.status()["track_tiles"]
    twin.close()


def test_the_tick_cost_bench_reports_every_tick_and_the_camera_ticks():
    from refine_ros.robots.rc_car.bench import car_step_cost

    fig = car_step_cost(seconds=1.0, progress=False)
    assert fig["ticks"] == 50 and fig["camera_ticks"]["ticks"] == 25 and fig["period_ms"] == 20.0
    assert 0 < fig["p50_ms"] <= fig["p99_ms"] <= fig["max_ms"]
