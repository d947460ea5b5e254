"""The Box2D racing car as an F1TENTH-style robot: driven by what `ackermann_msgs/
AckermannDriveStamped` carries (steering angle, speed), reporting what a VESC-based car's
drivers publish (odometry, wheel speeds, motor ERPM) and what its camera sees.

Why a speed loop: a real car's motor controller (a VESC in speed mode) takes a speed set
point and works the motor itself; the simulator takes gas and brake pedals. `SpeedController`
is that loop: a PI controller on the driven (rear) wheels' surface speed, as a VESC measures
it at the motor. A speed of 0 means stop: the pedals brake to rest and then hold the wheels,
and the gas pedal is never pressed, so a stop never moves the car, least of all backwards.
The simulated car has no reverse gear, so a negative speed is a stop too.

Scale (one number, `road_width_m`, default 0.3 m as the track detector assumes): the
simulator's 13.3-unit road becomes `road_width_m` wide, so with the default one world unit
is 0.0225 m, the car is 0.10 m long with a 0.073 m wheelbase and 0.012 m wheels, and the
scripted expert's top speed (110 units/s) is 2.5 m/s. Every metric reading scales with it.

Frames (REP-103/105): `odom` is the car's pose when the twin started or was last reset (x
forward, y left, z up); `base_link` is the car's reference point (the simulator's hull
position), x forward. Yaw and yaw rate are counter-clockwise positive, as in Box2D. The
steering angle is the front wheels' angle, left positive (the simulator's joint limit is
0.4 rad). Wheel speeds are the simulator's wheel angular velocities in rad/s (the same at
every scale, wheel radius and distances scaling together), positive rolling forward, for
the joints `wheel_fl, wheel_fr, wheel_rl, wheel_rr` (the car bridge's default names).
Motor ERPM follows the VESC driver's convention, ERPM = speed_to_erpm_gain * speed (m/s),
with speed the rear wheels' surface speed: gain = gear ratio * pole pairs * 60 /
(2 pi wheel radius); the default 4614 is the F1TENTH stack's `speed_to_erpm_gain`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from refine_ros.robots._twin.frames import JointStates, Pose, Transform
from refine_ros.robots._twin.realtime import (
    DropoutPlan,
    FixedRate,
    Latency,
    Noise,
    check_dropout_names,
    sensor_streams,
)
from refine_ros.robots.rc_car.camera import ROAD_WIDTH_M, CarCamera, PinholeCamera, metres_per_unit

WHEEL_JOINTS = ("wheel_fl", "wheel_fr", "wheel_rl", "wheel_rr")
F1TENTH_SPEED_TO_ERPM_GAIN = 4614.0
SIM_RATE_HZ = 50.0  # CarRacing integrates in fixed 20 ms steps
SIM_STEER_LIMIT = 0.4  # rad, the simulator's front-wheel joint limit
CAR_SENSORS = ("odom", "wheels", "motor", "camera")


@dataclass(frozen=True)
class DriveCommand:
    """What `ackermann_msgs/AckermannDrive` carries (the fields the twin executes):
    `speed` m/s forward, `steering_angle` rad (left positive), `steering_angle_velocity`
    rad/s (0: as fast as the steering turns)."""

    speed: float = 0.0
    steering_angle: float = 0.0
    steering_angle_velocity: float = 0.0

    def finite(self) -> bool:
        return all(math.isfinite(v) for v in (self.speed, self.steering_angle, self.steering_angle_velocity))


def drive_from_twist(linear_x: float, angular_z: float, wheelbase_m: float) -> DriveCommand:
    """A `geometry_msgs/Twist` (forward speed m/s, yaw rate rad/s, left positive) as the
    Ackermann command that turns at that yaw rate: steering = atan(wheelbase * yaw rate /
    speed). Standing still, the yaw rate cannot be met and the steering stays straight."""
    if abs(linear_x) < 1e-6:
        return DriveCommand(speed=0.0, steering_angle=0.0)
    return DriveCommand(speed=float(linear_x), steering_angle=math.atan(wheelbase_m * angular_z / linear_x))


@dataclass(frozen=True)
class SpeedLoop:
    """Gains of the motor controller's speed loop (pedal fractions per m/s of error)."""

    kp: float = 1.5  # gas per m/s below the set point
    ki: float = 1.0  # gas per m/s.s of accumulated error
    brake_gain: float = 0.6  # brake per m/s above the set point (stop: per m/s of speed)
    max_brake: float = 0.8  # below the simulator's 0.9, where brake locks the wheels
    hold_speed: float = 0.05  # m/s: a stopped car slower than this gets the wheels locked
    integral_band: float = 0.25  # m/s: the error integrates only this close to the set point


class SpeedController:
    """A PI speed loop that presses the simulator's gas and brake pedals (see module doc)."""

    def __init__(self, loop: SpeedLoop = SpeedLoop()) -> None:
        self.loop = loop
        self.integral = 0.0

    def reset(self) -> None:
        self.integral = 0.0

    def update(self, setpoint: float, wheel_speed: float, body_speed: float, dt: float) -> tuple[float, float]:
        """(gas, brake) in [0, 1] for a speed `setpoint` (m/s) given the driven wheels'
        surface speed and the body's forward speed (m/s)."""
        c = self.loop
        if not setpoint > 0.0:  # stop (zero, negative or NaN): brake, never gas
            self.integral = 0.0
            if abs(body_speed) < c.hold_speed and abs(wheel_speed) < c.hold_speed:
                return 0.0, 1.0
            return 0.0, min(c.max_brake, c.brake_gain * max(abs(wheel_speed), abs(body_speed)) + 0.1)
        error = setpoint - wheel_speed
        if abs(error) < c.integral_band:  # no wind-up while the car is still accelerating
            self.integral = float(np.clip(self.integral + error * dt, 0.0, 1.0 / max(c.ki, 1e-9)))
        u = c.kp * error + c.ki * self.integral
        if u >= 0.0:
            return min(1.0, u), 0.0
        return 0.0, min(c.max_brake, c.brake_gain * -error)


@dataclass(frozen=True)
class CarTwinConfig:
    """Everything a car twin is built from; units in the names, defaults documented."""

    track_seed: int = 0  # the simulator's track
    seed: int = 0  # sensor noise and random dropouts
    rate_hz: float = 50.0  # odometry, wheel and motor readings
    camera_rate_hz: float = 25.0
    road_width_m: float = ROAD_WIDTH_M  # sets metres per simulator unit (module doc)
    camera: PinholeCamera = PinholeCamera()
    max_steering_angle: float = SIM_STEER_LIMIT  # rad; commands beyond are clipped
    speed_loop: SpeedLoop = SpeedLoop()
    speed_to_erpm_gain: float = F1TENTH_SPEED_TO_ERPM_GAIN
    command_latency_s: float = 0.0  # a command takes effect this long after it arrives
    command_timeout_s: float = 0.5  # no command for this long: stop (0 disables)
    odom_position_std_m: float = 0.002
    odom_yaw_std_rad: float = 0.005
    odom_speed_std_mps: float = 0.01
    odom_yaw_rate_std_radps: float = 0.02
    wheel_speed_std_radps: float = 0.5
    erpm_std: float = 20.0
    pixel_noise: float = 2.0  # camera noise, std per pixel and channel (0-255)
    dropouts: dict[str, DropoutPlan] = field(default_factory=dict)  # sensor name -> plan
    odom_frame: str = "odom"
    base_frame: str = "base_link"
    camera_frame: str = "camera_optical_frame"

    def __post_init__(self) -> None:
        check_dropout_names(self.dropouts, CAR_SENSORS)
        if not 0 < self.max_steering_angle <= SIM_STEER_LIMIT:
            raise ValueError(f"max_steering_angle must be in (0, {SIM_STEER_LIMIT}]")


@dataclass(frozen=True)
class Odometry:
    """`nav_msgs/Odometry`: pose of `child_frame_id` in `frame_id`, twist in the body frame."""

    stamp: float
    x: float  # m
    y: float  # m
    yaw: float  # rad, counter-clockwise
    vx: float  # m/s forward
    vy: float  # m/s left
    yaw_rate: float  # rad/s, counter-clockwise
    frame_id: str = "odom"
    child_frame_id: str = "base_link"

    def quaternion_xyzw(self) -> tuple[float, float, float, float]:
        return (0.0, 0.0, math.sin(self.yaw / 2.0), math.cos(self.yaw / 2.0))


@dataclass(frozen=True)
class MotorState:
    """The VESC driver's core state: electrical RPM of the drive motor."""

    stamp: float
    erpm: float


@dataclass(frozen=True)
class CameraFrame:
    """One camera picture: H x W x 3 uint8, BGR (`sensor_msgs/Image` encoding bgr8)."""

    stamp: float
    image: np.ndarray
    frame_id: str


@dataclass(frozen=True)
class CarReadings:
    """What the car's drivers publish at one tick; None where a sensor has nothing due (its
    rate) or is in a dropout."""

    odom: Odometry | None = None
    wheels: JointStates | None = None  # the four wheels: angle (rad), angular velocity (rad/s)
    motor: MotorState | None = None
    camera: CameraFrame | None = None


class CarTwin:
    """The Box2D car in real time behind F1TENTH-style interfaces.

    `drive(command, now)` takes a command (it takes effect `command_latency_s` later);
    `tick(now)` advances the simulator to `now` in its own 20 ms steps (at most five at once;
    further lag is dropped and counted in `overruns`) and returns the readings due. `now`
    is seconds on the caller's monotonic clock; the twin starts at `start`."""

    def __init__(self, config: CarTwinConfig = CarTwinConfig(), start: float = 0.0) -> None:
        from refine_core.tasks.car_racing.env import WHEEL_RADIUS, CarRacingSemantic
        from refine_core.tasks.car_racing.expert import WHEELBASE

        self.config = config
        self.env = CarRacingSemantic()
        self.metres_per_unit = metres_per_unit(config.road_width_m)
        self.wheel_radius_m = WHEEL_RADIUS * self.metres_per_unit
        self.wheelbase_m = WHEELBASE * self.metres_per_unit
        self.start = float(start)
        self._noise = Noise(config.seed)
        self.camera = CarCamera(self.env, config.camera, config.road_width_m, pixel_noise=config.pixel_noise,
                                rng=np.random.default_rng([config.seed, 1]))  # fmt: skip
        rates = dict(zip(CAR_SENSORS, (config.rate_hz,) * 3 + (config.camera_rate_hz,), strict=True))
        self.sensors = sensor_streams(rates, self.start, config.dropouts, config.seed)
        self.reset(config.track_seed, start)

    # -- episode -------------------------------------------------------------------------
    def reset(self, track_seed: int | None = None, now: float | None = None) -> None:
        """A fresh car on the start line of `track_seed` (the current track when None); the
        odometry frame restarts at the car's pose; pending commands are discarded."""
        now = self.start if now is None else float(now)
        self.track_seed = self.config.track_seed if track_seed is None else int(track_seed)
        self.env.reset(seed=self.track_seed)
        hull = self.env.car.hull
        self._origin = (float(hull.position[0]), float(hull.position[1]), float(hull.angle))
        self._sim_clock = FixedRate(SIM_RATE_HZ, now)
        self._commands: Latency[DriveCommand] = Latency(self.config.command_latency_s, DriveCommand())
        self._controller = SpeedController(self.config.speed_loop)
        self._steer_target = 0.0
        self.lap_completed = False
        self.left_playfield = False
        self.sim_steps = 0
        self.rejected_commands = 0

    def success(self) -> float:
        """1.0 once the car has closed a lap since the last reset (the simulator's rule:
        every tile visited, or back over the start line with 95% of them), else 0.0."""
        return 1.0 if self.lap_completed else 0.0

    @property
    def overruns(self) -> int:
        """Simulator steps dropped because `tick` was called too late to catch up."""
        return self._sim_clock.skipped

    # -- commands ------------------------------------------------------------------------
    def drive(self, command: DriveCommand, now: float) -> bool:
        """Queue a command; a non-finite one is refused (False) and counted."""
        if not command.finite():
            self.rejected_commands += 1
            return False
        self._commands.push(command, now)
        return True

    def command_in_effect(self, now: float) -> DriveCommand:
        """The command the car executes at `now`: the latest one past its latency, or a
        stop when none has arrived within `command_timeout_s`."""
        command = self._commands.current(now)
        if self._commands.timed_out(now, self.config.command_timeout_s):
            return DriveCommand(speed=0.0, steering_angle=command.steering_angle)
        return command

    # -- time ----------------------------------------------------------------------------
    def tick(self, now: float) -> CarReadings:
        for _ in range(self._sim_clock.due(now)):
            self._step(self.command_in_effect(now))
        return CarReadings(
            odom=self.odometry(now) if self.sensors["odom"].due(now) else None,
            wheels=self.wheel_states(now) if self.sensors["wheels"].due(now) else None,
            motor=self.motor_state(now) if self.sensors["motor"].due(now) else None,
            camera=self.camera_frame(now) if self.sensors["camera"].due(now) else None,
        )

    def _step(self, command: DriveCommand) -> None:
        dt = 1.0 / SIM_RATE_HZ
        limit = self.config.max_steering_angle
        target = float(np.clip(command.steering_angle, -limit, limit))
        if command.steering_angle_velocity > 0:
            max_change = command.steering_angle_velocity * dt
            target = self._steer_target + float(np.clip(target - self._steer_target, -max_change, max_change))
        self._steer_target = target
        gas, brake = self._controller.update(command.speed, self.driven_wheel_speed(), self.forward_speed(), dt)
        # the simulator's steer action is minus the wheel angle (negative steers left)
        _, _, terminated, _, info = self.env.step(np.array([-target, gas, brake]))
        self.sim_steps += 1
        if terminated:
            self.lap_completed |= bool(info.get("lap_finished"))
            self.left_playfield |= not info.get("lap_finished", False)

    # -- ground truth (no noise) ---------------------------------------------------------
    def forward_speed(self) -> float:
        """Body speed along the car's heading, m/s (negative: rolling backwards)."""
        hull = self.env.car.hull
        a = hull.angle
        v = hull.linearVelocity
        return float((-math.sin(a) * v[0] + math.cos(a) * v[1]) * self.metres_per_unit)

    def driven_wheel_speed(self) -> float:
        """Mean surface speed of the rear (driven) wheels, m/s: what the motor turns."""
        wheels = self.env.car.wheels
        return float((wheels[2].omega + wheels[3].omega) / 2.0 * self.wheel_radius_m)

    def pose(self) -> tuple[float, float, float]:
        """(x, y, yaw) of base_link in odom, exact."""
        hull = self.env.car.hull
        x0, y0, a0 = self._origin
        dx, dy = float(hull.position[0]) - x0, float(hull.position[1]) - y0
        # odom x is the start heading (world direction (-sin a0, cos a0)), y its left
        fx, fy = -math.sin(a0), math.cos(a0)
        x = (dx * fx + dy * fy) * self.metres_per_unit
        y = (-dx * fy + dy * fx) * self.metres_per_unit
        yaw = math.atan2(math.sin(hull.angle - a0), math.cos(hull.angle - a0))
        return x, y, yaw

    def simulator_tiles(self) -> np.ndarray:
        """The simulator's own (12, 4) tiles for the current pose (for the detector's bench)."""
        return np.asarray(self.env.semantic_observation()["tiles"], dtype=float)

    def status(self) -> dict[str, Any]:
        return {
            "track_seed": self.track_seed,
            "sim_time": self.sim_steps / SIM_RATE_HZ,
            "tiles_visited": int(self.env.tile_visited_count),
            "track_tiles": len(self.env.track),
            "lap_completed": self.lap_completed,
            "left_playfield": self.left_playfield,
            "overruns": self.overruns,
            "rejected_commands": self.rejected_commands,
            "dropped": {name: s.dropped for name, s in self.sensors.items()},
        }

    # -- readings (noisy) ----------------------------------------------------------------
    def odometry(self, now: float) -> Odometry:
        c = self.config
        hull = self.env.car.hull
        a = hull.angle
        v = np.array(hull.linearVelocity) * self.metres_per_unit
        vx = -math.sin(a) * v[0] + math.cos(a) * v[1]
        vy = -math.cos(a) * v[0] - math.sin(a) * v[1]
        x, y, yaw = self.pose()
        n = self._noise([x, y, yaw, vx, vy, hull.angularVelocity],
                        [c.odom_position_std_m] * 2 + [c.odom_yaw_std_rad] + [c.odom_speed_std_mps] * 2
                        + [c.odom_yaw_rate_std_radps])  # fmt: skip
        yaw_n = math.atan2(math.sin(n[2]), math.cos(n[2]))
        return Odometry(now, float(n[0]), float(n[1]), yaw_n, float(n[3]), float(n[4]), float(n[5]),
                        c.odom_frame, c.base_frame)  # fmt: skip

    def wheel_states(self, now: float) -> JointStates:
        wheels = self.env.car.wheels
        omega = self._noise([w.omega for w in wheels], self.config.wheel_speed_std_radps)
        return JointStates(now, WHEEL_JOINTS, tuple(float(w.phase) for w in wheels), tuple(float(o) for o in omega))

    def motor_state(self, now: float) -> MotorState:
        erpm = self.config.speed_to_erpm_gain * self.driven_wheel_speed()
        return MotorState(now, float(self._noise(erpm, self.config.erpm_std)))

    def camera_frame(self, now: float) -> CameraFrame:
        return CameraFrame(now, self.camera.render(), self.config.camera_frame)

    def camera_mount(self) -> Transform:
        """base_link -> the camera's optical frame (static: where the camera is mounted)."""
        cam = self.config.camera
        return Transform(self.config.base_frame, self.config.camera_frame,
                         Pose.of((cam.forward_offset_m, 0.0, cam.height_m), cam.axes().T))  # fmt: skip

    def odom_transform(self, odometry: Odometry) -> Transform:
        """odom -> base_link for a reading, as a car's odometry node broadcasts it."""
        pose = Pose((odometry.x, odometry.y, 0.0), odometry.quaternion_xyzw())
        return Transform(odometry.frame_id, odometry.child_frame_id, pose)

    def close(self) -> None:
        self.env.close()
