"""The last hop's own supervisor, without ROS: when the command stream to a robot's driver
stops after a moving command, send the driver's exact stop.

Why it exists: the bridge is the last of our processes before the robot, and a killed, hung or
partitioned bridge sends nothing at all, not even a stop. What the robot then does is up to its
own stack, and for several stacks people deploy it keeps moving:
- a ros2_control forward velocity controller holds its last command with no timeout
  (ros2_controllers, forward_controllers_base.cpp), so the arm moves until a joint limit or a
  protective stop;
- F1TENTH's ackermann_mux forwards messages as they come and never sends a stop of its own, and
  the VESC driver sends each speed once: the motor keeps the last speed until the VESC
  firmware's timeout (1 s by default) and then coasts (timeout brake current 0 A).
MoveIt Servo does stop by itself (its incoming_command_timeout, 0.1 s, judged from the twist's
stamp), so there the guard only repeats what Servo does.

The guard runs as a process of its own beside the bridge (the `command_guard` node), reads the
driver's command topic in the driver's own message type, and after `timeout` s without any
message following a moving one sends the exact stop `repeats` times, one per `period` (a lost
message does not leave the robot moving), then once every `hold` s for as long as no moving
command comes (a command of the dead bridge delivered late, out of order with the guard's, is
overridden within `hold`). Nothing is sent before it has seen a moving command, so a dry run,
where the bridge sends nothing, stays silent; its own stops arrive on the topic too and, being
stops, change nothing. It cannot help when it dies together with the bridge (one
process under `refine up`, the machine losing power): the robot's own protective stop and the
stack's own timeout are then all that is left, which docs/ROBOT_CHECKLIST.md states per stack.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

COMMAND_TYPES = ("twist_stamped", "joint_velocities", "ackermann", "twist")
"""What the driver takes: geometry_msgs/TwistStamped (MoveIt Servo, a Cartesian controller),
std_msgs/Float64MultiArray of joint velocities (a forward velocity controller),
ackermann_msgs/AckermannDriveStamped (F1TENTH's /drive), geometry_msgs/Twist (a car on /cmd_vel)."""
STANDARD_TOPICS = {
    "twist_stamped": "/servo_node/delta_twist_cmds",
    "joint_velocities": "/forward_velocity_controller/commands",
    "ackermann": "/drive",
    "twist": "/cmd_vel",
}


def moving(command_type: str, values: Sequence[float]) -> bool:
    """Whether a command asks for motion: any nonzero (or non-finite) velocity; for a car the
    speed alone (a steering angle at speed 0 moves nothing). `values` are the motion fields:
    twist_stamped / twist the six of the twist (twist: linear.x and angular.z are what a car
    reads), joint_velocities the velocities, ackermann (speed, steering angle)."""
    if command_type == "ackermann":
        return not values or not (math.isfinite(values[0]) and values[0] == 0.0)
    return any(not (math.isfinite(v) and v == 0.0) for v in values)


@dataclass
class Guard:
    """The guard's state on the caller's clock: `heard(moving, now)` for every command on the
    topic, `tick(now)` every period, True when a stop must go out now."""

    timeout: float
    repeats: int = 5
    hold: float = 0.1
    last_heard: float | None = None
    last_moving: bool = False
    stops_due: int = 0
    trips: int = 0
    tripped: bool = False
    last_stop: float = -math.inf
    last_tick: float | None = None
    deferred: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError("timeout must be > 0")
        if self.repeats < 1:
            raise ValueError("repeats must be >= 1")

    def heard(self, is_moving: bool, now: float) -> None:
        self.last_heard, self.last_moving = now, is_moving
        if is_moving:  # the stream is back: whoever sends it is in charge again
            self.stops_due, self.tripped = 0, False

    def tick(self, now: float) -> bool:
        # A tick that comes late means this process itself was not running, and the commands that
        # arrived meanwhile are still queued behind the timer: judge after reading them, one tick
        # later, but never defer two ticks in a row (a guard starved on every tick still stops).
        stalled = self.last_tick is not None and now - self.last_tick > self.timeout / 2
        self.last_tick = now
        if stalled and not self.tripped and not self.deferred:
            self.deferred = True
            return False
        self.deferred = False
        if not self.tripped and self.last_moving and self.last_heard is not None \
                and now - self.last_heard > self.timeout:
            self.stops_due, self.tripped = self.repeats, True
            self.trips += 1
            self.last_moving = False
        if self.stops_due > 0 or (self.tripped and now - self.last_stop >= self.hold):
            self.stops_due = max(self.stops_due - 1, 0)
            self.last_stop = now
            return True
        return False
