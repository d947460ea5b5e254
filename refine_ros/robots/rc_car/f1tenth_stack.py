"""F1TENTH's stock drive stack as plain Python, for the car twin: what happens to a `/drive`
command between our bridge and the motor on a car brought up with f1tenth_system, and what
`/odom` then says. Each piece follows the upstream node it stands for (their sources in
docs/ROBOT_CHECKLIST.md, F1TENTH section):

- `JoyTeleop` (teleop_tools' joy_teleop with f1tenth_stack's joy_teleop.yaml): a command with
  no dead-man button (`default`) is active while no button at all is held and publishes a zero
  AckermannDriveStamped on `teleop` at every Joy message; `human_control` (LB, button 4) drives
  from the sticks (speed = axis 1 x 5.0, steering = axis 2 x 0.34); `autonomous_control` (RB,
  button 5) publishes nothing that reaches the car. So `teleop` carries zeros while the pad is
  idle, and stops only while a button is held (or no pad publishes at all).
- `AckermannMux` (ackermann_mux with f1tenth_stack's mux.yaml): `drive` (priority 10) and
  `teleop` (priority 100), each expiring 0.2 s after its last message. A message is forwarded
  the moment it arrives if its input is the highest-priority one not expired; the mux never
  sends anything of its own, a stop least of all.
- `Vesc` (ackermann_to_vesc + vesc_driver + the VESC firmware): each forwarded command sets the
  speed setpoint (ERPM = gain x speed + offset) and the servo; the motor keeps the setpoint
  until the next one or until the firmware's timeout (`timeout_s`, 1 s by default) since the
  last command, after which the firmware applies `timeout_brake_current` (0 A by default: the
  motor is released and the car coasts).
- `VescToOdom` (vesc_to_odom): nothing until the first servo command has reached the driver;
  then, per VESC state (50 Hz), speed = (-ERPM - offset) / gain (note the minus), zeroed below
  0.05 m/s, yaw rate = speed x tan(steering) / wheelbase with the steering from the last servo
  command, and the pose integrated from those (dead reckoning, not the true pose).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

DRIVE, TELEOP = "drive", "teleop"


@dataclass(frozen=True)
class Drive:
    """An AckermannDrive's moving fields: m/s and rad (left positive)."""

    speed: float = 0.0
    steering_angle: float = 0.0


@dataclass(frozen=True)
class JoyLayout:
    """f1tenth_stack's joy_teleop.yaml (humble-devel): dead-man buttons and stick mappings."""

    human_button: int = 4  # LB
    autonomy_button: int = 5  # RB
    speed_axis: int = 1
    speed_scale: float = 5.0
    steering_axis: int = 2
    steering_scale: float = 0.34


class JoyTeleop:
    """What f1tenth's joy_teleop publishes on `teleop` for one Joy message (None: nothing)."""

    def __init__(self, layout: JoyLayout = JoyLayout()) -> None:
        self.layout = layout

    def teleop(self, buttons: Sequence[int], axes: Sequence[float]) -> Drive | None:
        if sum(buttons) == 0:
            return Drive(0.0, 0.0)  # `default`: axis mappings with scale 0
        lay = self.layout
        if lay.human_button < len(buttons) and buttons[lay.human_button]:
            speed = axes[lay.speed_axis] * lay.speed_scale if lay.speed_axis < len(axes) else 0.0
            steer = axes[lay.steering_axis] * lay.steering_scale if lay.steering_axis < len(axes) else 0.0
            return Drive(float(speed), float(steer))
        return None  # RB (autonomy) or any other button: `default` is inactive, nothing on teleop


@dataclass
class AckermannMux:
    """ackermann_mux: `forward(source, drive, now)` is the message passed on now, or None."""

    timeouts: dict[str, float] = field(default_factory=lambda: {DRIVE: 0.2, TELEOP: 0.2})
    priorities: dict[str, int] = field(default_factory=lambda: {DRIVE: 10, TELEOP: 100})
    last: dict[str, float] = field(default_factory=dict)

    def _expired(self, source: str, now: float) -> bool:
        t = self.last.get(source)
        timeout = self.timeouts[source]
        return t is None or (timeout > 0 and now - t > timeout)

    def forward(self, source: str, drive: Drive, now: float) -> Drive | None:
        self.last[source] = now
        live = [s for s in self.priorities if not self._expired(s, now)]
        top = max(live, key=lambda s: self.priorities[s])
        return drive if top == source else None


@dataclass(frozen=True)
class VescConfig:
    """f1tenth_stack's vesc.yaml and the firmware's app settings (their defaults)."""

    speed_to_erpm_gain: float = 4614.0
    speed_to_erpm_offset: float = 0.0
    timeout_s: float = 1.0  # firmware APPCONF_TIMEOUT_MSEC 1000
    timeout_brake_current: float = 0.0  # A; 0: the motor is released (coasts)
    motor_erpm_sign: float = 1.0
    """+1: the motor reports the ERPM it was commanded (positive driving forward)."""


@dataclass(frozen=True)
class MotorCommand:
    """What the motor does now: hold `speed` (m/s), or, after the firmware's timeout, brake
    with `brake_current` A (0: released, the car coasts)."""

    speed: float = 0.0
    steering_angle: float = 0.0
    timed_out: bool = False
    brake_current: float = 0.0


class Vesc:
    """The speed setpoint the VESC keeps, and the firmware's timeout."""

    def __init__(self, config: VescConfig = VescConfig()) -> None:
        self.config = config
        self.setpoint: Drive | None = None
        self.last_command: float | None = None
        self.servo_commanded = False

    def command(self, drive: Drive, now: float) -> None:
        self.setpoint, self.last_command, self.servo_commanded = drive, now, True

    def in_effect(self, now: float) -> MotorCommand:
        if self.setpoint is None:
            return MotorCommand(timed_out=True, brake_current=self.config.timeout_brake_current)
        if self.config.timeout_s > 0 and now - self.last_command > self.config.timeout_s:
            return MotorCommand(0.0, self.setpoint.steering_angle, True, self.config.timeout_brake_current)
        return MotorCommand(self.setpoint.speed, self.setpoint.steering_angle)

    def erpm(self, motor_speed: float) -> float:
        """The ERPM the VESC reports for a motor turning at `motor_speed` m/s at the wheels."""
        c = self.config
        return c.motor_erpm_sign * (c.speed_to_erpm_gain * motor_speed) + c.speed_to_erpm_offset


@dataclass
class OdomState:
    stamp: float
    x: float
    y: float
    yaw: float
    speed: float
    yaw_rate: float


class VescToOdom:
    """vesc_to_odom's dead reckoning, one VESC state at a time (None until it publishes)."""

    def __init__(self, gain: float = 4614.0, offset: float = 0.0, wheelbase: float = 0.25) -> None:
        self.gain, self.offset, self.wheelbase = gain, offset, wheelbase
        self.x = self.y = self.yaw = 0.0
        self.last_stamp: float | None = None

    def state(self, erpm: float, servo_steering: float | None, stamp: float) -> OdomState | None:
        """`servo_steering`: the steering angle of the last servo command (None: none yet)."""
        if servo_steering is None:
            return None
        speed = (-erpm - self.offset) / self.gain
        if abs(speed) < 0.05:
            speed = 0.0
        yaw_rate = speed * math.tan(servo_steering) / self.wheelbase
        dt = 0.0 if self.last_stamp is None else stamp - self.last_stamp
        self.last_stamp = stamp
        self.x += speed * math.cos(self.yaw) * dt
        self.y += speed * math.sin(self.yaw) * dt
        self.yaw += yaw_rate * dt
        return OdomState(stamp, self.x, self.y, self.yaw, speed, yaw_rate)

    def reset(self) -> None:
        self.x = self.y = self.yaw = 0.0
        self.last_stamp = None


class F1tenthStack:
    """The chain from `/drive` and `/joy` to the motor, and what `/odom` says."""

    def __init__(self, vesc: VescConfig = VescConfig(), wheelbase: float = 0.25,
                 layout: JoyLayout = JoyLayout(), mux_timeout: float = 0.2) -> None:
        self.joy_teleop_node = JoyTeleop(layout)
        self.mux = AckermannMux(timeouts={DRIVE: mux_timeout, TELEOP: mux_timeout})
        self.vesc = Vesc(vesc)
        self.odom = VescToOdom(vesc.speed_to_erpm_gain, vesc.speed_to_erpm_offset, wheelbase)
        self.forwarded = {DRIVE: 0, TELEOP: 0}
        self.blocked = {DRIVE: 0, TELEOP: 0}

    def _offer(self, source: str, drive: Drive, now: float) -> bool:
        passed = self.mux.forward(source, drive, now)
        if passed is None:
            self.blocked[source] += 1
            return False
        self.forwarded[source] += 1
        self.vesc.command(passed, now)
        return True

    def drive(self, drive: Drive, now: float) -> bool:
        """Our `/drive`: True when the mux passed it on to the VESC."""
        return self._offer(DRIVE, drive, now)

    def joy(self, buttons: Sequence[int], axes: Sequence[float], now: float) -> None:
        teleop = self.joy_teleop(buttons, axes)
        if teleop is not None:
            self._offer(TELEOP, teleop, now)

    def joy_teleop(self, buttons: Sequence[int], axes: Sequence[float]) -> Drive | None:
        return self.joy_teleop_node.teleop(buttons, axes)

    def motor(self, now: float) -> MotorCommand:
        return self.vesc.in_effect(now)

    def odometry(self, motor_speed: float, stamp: float) -> OdomState | None:
        steering = self.vesc.setpoint.steering_angle if self.vesc.servo_commanded else None
        return self.odom.state(self.vesc.erpm(motor_speed), steering, stamp)

    def restart_odometry(self) -> None:
        """The dead reckoning from zero again, as restarting vesc_to_odom does (the twin's reset
        does this: on the car, the operator restarts the driver with the car on the start line)."""
        self.odom.reset()
