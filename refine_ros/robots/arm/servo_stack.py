"""A stock arm stack's timing and rules as plain Python, for the arm twin: MoveIt Servo as it
judges a twist, robot_state_publisher's /tf rate and a fiducial tracker's latency. Each follows
its upstream source (docs/ROBOT_CHECKLIST.md names them):

- `Servo`: the Jazzy node (`servo_node.cpp`) runs from the start, takes twists only once
  `switch_command_type` chose TWIST and while not paused; paused, it executes nothing and
  publishes no status. The Humble node (`servo_calcs.cpp`) runs after `start_servo`, takes
  twists while not paused and publishes its status even while paused. Both judge a twist stale
  when their clock minus the twist's stamp reaches `incoming_command_timeout` (0.1 s), and halt
  (a stamp ahead of their clock stays fresh that much longer). `command_in_type` unitless (both
  releases' default) multiplies the twist by `scale.linear` (0.4): 0.1 m/s sent moves at 0.04
  m/s; Humble skips a unitless twist with a component above 1 altogether. speed_units moves at
  the twist's m/s, Jazzy capping its norm at `scale.linear`.
- `RobotStatePublisher`: /tf from joint states at most every 1/`publish_frequency` s (20 Hz),
  stamped with the joint state's stamp: with 30 Hz joint states it publishes every second one.
- `Detections`: a tag pose stamped with the camera frame's capture time and published one
  detection time later.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RELEASES = ("jazzy", "humble")
COMMAND_IN_TYPES = ("unitless", "speed_units")
TWIST = 1
"""moveit_msgs/srv/ServoCommandType TWIST (JOINT_JOG 0, POSE 2)."""


@dataclass(frozen=True)
class ServoConfig:
    release: str = "jazzy"
    incoming_command_timeout: float = 0.1
    command_in_type: str = "unitless"
    scale_linear: float = 0.4

    def __post_init__(self) -> None:
        if self.release not in RELEASES:
            raise ValueError(f"release must be one of {RELEASES}, got {self.release!r}")
        if self.command_in_type not in COMMAND_IN_TYPES:
            raise ValueError(f"command_in_type must be one of {COMMAND_IN_TYPES}, got {self.command_in_type!r}")


class Servo:
    """One MoveIt Servo: its state, what it does with each twist, the velocity it executes."""

    def __init__(self, config: ServoConfig = ServoConfig()) -> None:
        self.config = config
        jazzy = config.release == "jazzy"
        self.running = jazzy  # Humble: after start_servo
        self.paused = False
        self.command_type = -1 if jazzy else TWIST  # Jazzy: until switch_command_type
        self._linear = np.zeros(3)
        self._stamp: float | None = None
        self._valid = True
        self.ignored: dict[str, int] = {}

    # -- services ----------------------------------------------------------------------------
    def switch_command_type(self, command_type: int) -> bool:
        if int(command_type) in (0, 1, 2):
            self.command_type = int(command_type)
        return self.command_type == int(command_type)

    def start(self) -> None:
        self.running, self.paused = True, False

    def set_paused(self, paused: bool) -> None:
        self.paused = bool(paused)

    # -- commands ----------------------------------------------------------------------------
    def twist(self, linear: Sequence[float], stamp: float) -> str | None:
        """A TwistStamped arrives; returns why Servo does nothing with it (None: taken)."""
        why = None
        if not self.running:
            why = "not started"
        elif self.paused:
            why = "paused"
        elif self.command_type != TWIST:
            why = "command type not TWIST"
        if why is not None:
            self.ignored[why] = self.ignored.get(why, 0) + 1
            return why
        v = np.asarray(linear, dtype=float)
        self._linear = v
        if not (self.config.release == "humble" and stamp == 0.0):  # Humble keeps the last nonzero stamp
            self._stamp = stamp
        c = self.config
        self._valid = bool(np.all(np.isfinite(v))) and not (
            c.release == "humble" and c.command_in_type == "unitless" and np.any(np.abs(v) > 1.0))
        if not self._valid:
            self.ignored["component > 1 or NaN"] = self.ignored.get("component > 1 or NaN", 0) + 1
            return "component > 1 or NaN"
        return None

    def velocity(self, now: float) -> np.ndarray:
        """The tool velocity (m/s) Servo commands at `now`: zero when stopped, paused, stale."""
        c = self.config
        if not self.running or self.paused or self._stamp is None or not self._valid:
            return np.zeros(3)
        if now - self._stamp >= c.incoming_command_timeout:
            return np.zeros(3)
        v = self._linear.copy()
        if c.command_in_type == "unitless":
            return v * c.scale_linear
        speed = float(np.linalg.norm(v))
        if c.release == "jazzy" and c.scale_linear > 0 and speed > c.scale_linear:
            v *= c.scale_linear / speed
        return v

    def status(self) -> int | None:
        """The status code published now (0: no warning); None when Servo publishes none."""
        if not self.running or (self.paused and self.config.release == "jazzy"):
            return None
        return 0

    def parameters(self) -> dict[str, Any]:
        """Servo's own parameters as a client reads them (`ros2 param get /servo_node ...`)."""
        c = self.config
        return {"moveit_servo.command_in_type": c.command_in_type, "moveit_servo.scale.linear": c.scale_linear,
                "moveit_servo.incoming_command_timeout": c.incoming_command_timeout}


class RobotStatePublisher:
    """Which joint states robot_state_publisher turns into /tf: `due(stamp)`."""

    def __init__(self, publish_frequency: float = 20.0) -> None:
        self.interval = math.floor(1000.0 / publish_frequency) / 1000.0  # it rounds to whole ms
        self.last: float | None = None

    def due(self, stamp: float) -> bool:
        if self.last is not None and stamp < self.last + self.interval - 1e-9:
            return False
        self.last = stamp
        return True


class Detections:
    """A detector's output queue: `push(capture_stamp, item)`, `due(now)` -> the items whose
    detection has finished (capture stamp + `latency` <= now), in capture order."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self._queue: deque[tuple[float, Any]] = deque()

    def push(self, capture_stamp: float, item: Any) -> None:
        self._queue.append((capture_stamp, item))

    def due(self, now: float) -> list[tuple[float, Any]]:
        out = []
        while self._queue and self._queue[0][0] + self.latency <= now + 1e-9:
            out.append(self._queue.popleft())
        return out

    def clear(self) -> None:
        self._queue.clear()
