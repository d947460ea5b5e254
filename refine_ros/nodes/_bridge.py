"""What both hardware bridges share: the last hop before the robot, so the stop rules that must
hold even when the safety node is gone live here too.

- Every `refine/safe_action` is re-checked (defence in depth); a malformed one is a stop.
- A command the safety node labels as a stop (the dimension label carries its reason) becomes
  the bridge's own stop, zero motion in the robot's command interface, whatever the values.
- The bridge sends that stop by itself when the node shuts down (SIGINT, SIGTERM, launch
  ending), when its driver goes silent for `driver_timeout` (and every control tick after,
  until it is back), while `refine/estop` is asserted, and when no safe command arrived for
  `command_timeout` (its own command watchdog: the safety node killed, hung or cut off; the
  safety node publishes every watchdog period while it lives, so silence means it is gone), on
  every control tick until safe commands are back; once it has sent the driver anything at all
  (in a dry run nothing reaches the robot, not even a stop).
- After its command watchdog stopped the robot the bridge says so on `refine/bridge_stop`, again
  every `BRIDGE_STOP_REPEAT_S` until answered (a safety node started again later hears it too),
  and passes no moving command until the safety node has answered with its stop labelled
  `BRIDGE_ACK`, which revokes the episode's confirmation. Any other stop is no answer: a safety
  node that was only frozen (SIGSTOP, a hung interpreter) reads its queues in no set order when
  it resumes: in the process-death rig the news was read 0.2 s after its first commands, or
  only when said again a second later; a released dead-man, say, is a stop that keeps the
  confirmation, and the still-confirmed episode moved the car again in between (CI, car
  `sigstop_safety`). The same holds when the bridge itself was frozen:
  a safe command taken after a silence longer than `command_timeout` trips the watchdog
  before it is looked at, even when the executor takes it before the control tick, and so
  does one whose handling was itself held up that long before it reached the driver.
- A driver that has not spoken yet is not a lost one: for `startup_grace` s after the bridge
  starts it waits without an error (nothing moves meanwhile: without feedback there are no
  observations, so the safety node only sends stops, and the bridge halts any command).
- For every safe command it publishes what became of it on `refine/command_result`, a counted
  vector [halted, rejected] with the command's counters: halted 1 when a stop went out instead
  of the policy's command, rejected 1 when the driver refused it (MoveIt Servo halted). The
  rollout logger stores both per step, so a halted step is never logged as executed.
- The step counter an episode's start event resets, so observations carry the learner's
  episode counter from step 0.
- An observation goes out only while every input it needs is fresh; when the bridge withholds
  them for `WITHHOLD_REPORT_S` it says which input and how stale (a log line, and a
  diagnostic_msgs/DiagnosticArray on `bridge/status`, latched), and again when they flow: the
  learner names that input when an episode fails for want of observations, instead of "a
  sensor went silent".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.duration import Duration
from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray, String

from refine_ros.safety import BRIDGE_ACK, InvalidCommand, parse_command, stop_label
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_vector, unpack_json, vector_label

SHUTDOWN_ACK_S = 0.5
"""How long a bridge that shuts down waits for its driver to acknowledge the stop."""
COMMAND_TIMEOUT_S = 0.1
"""Default of the bridge's command watchdog: the safety node publishes every watchdog period
(10 ms on the arm, 20 ms on the car), so 0.1 s is several periods; MoveIt Servo's own
incoming_command_timeout is the same 0.1 s."""
STARTUP_GRACE_S = 10.0
"""Default time a bridge waits for its driver's first feedback before calling it lost."""
RESULT_TOPIC = "refine/command_result"
BRIDGE_STOP_TOPIC = "refine/bridge_stop"
BRIDGE_STATUS_TOPIC = "bridge/status"
BRIDGE_STOP_REPEAT_S = 1.0
"""How often a bridge waiting for the safety node's answer to its stop says it again."""
WITHHOLD_REPORT_S = 0.2
"""Observations withheld this long are reported (a tick or two is scheduling, not a fault)."""


@dataclass
class Withholding:
    """Whether the bridge's observations are being withheld, and when to say so. `key` names
    the input at fault (stable from tick to tick), `detail` says how (its age changes)."""

    key: str | None = None
    since: float = 0.0
    reported: str | None = None
    detail: str = ""

    def update(self, key: str | None, detail: str, now: float) -> tuple[bool, str] | None:
        """This tick's state -> (withheld, text) to report, or None when nothing changed."""
        if key is None:
            self.key = None
            if self.reported is None:
                return None
            self.reported = None
            return False, f"observations flow again (they were withheld: {self.detail})"
        if key != self.key:
            self.key, self.since = key, now
        if key != self.reported and now - self.since >= WITHHOLD_REPORT_S:
            self.reported, self.detail = key, detail
            return True, f"observations withheld: {detail}"
        return None


class BridgeNode(Node):
    """Base of the arm and RC-car bridges; `axes` is the task's action width. Subclasses call
    `_start_bridge()` once their driver publishers exist, and implement `send_command`,
    `send_stop` and `command_publishers`."""

    axes: int = 0

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        self.episode, self.step, self.rejected = 0, 0, 0
        self.estop_asserted = False
        self.driver_lost = False
        self.stops_sent = 0
        self.driver_rejections = 0
        self.commanded = False
        """The driver got a command from this bridge: from then on its own stops go out too."""
        self._driver_seen: float | None = None
        self._started = False
        self._last_safe: float | None = None
        self.commands_lost = False
        """The safety node's commands stopped: the bridge's watchdog holds the robot stopped."""
        self.watchdog_stops = 0
        self._waiting_said = False
        self._await_stop = False
        """The watchdog stopped the robot: no moving command until the safety node answered."""
        self._stop_said_at = 0.0

    def _start_bridge(self, driver_timeout: float, command_timeout: float = COMMAND_TIMEOUT_S,
                      startup_grace: float = STARTUP_GRACE_S) -> None:
        self.driver_timeout = driver_timeout
        self.command_timeout, self.startup_grace = command_timeout, startup_grace
        self._start_time = self._now()
        self._result_pub = self.create_publisher(Float64MultiArray, RESULT_TOPIC, qos.CONTROL)
        self._bridge_stop_pub = self.create_publisher(String, BRIDGE_STOP_TOPIC, qos.STATE)
        self._status_pub = self.create_publisher(DiagnosticArray, BRIDGE_STATUS_TOPIC, qos.LATCHED)
        self._withholding = Withholding()
        self.create_subscription(Float64MultiArray, "refine/safe_action", self._on_safe_action, qos.COMMAND)
        self.create_subscription(Bool, "refine/estop", self._on_estop, qos.COMMAND)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        self._started = True

    # ---- to implement -------------------------------------------------------------------
    def send_command(self, values: np.ndarray) -> str | None:
        """Send the task action `values` to the driver; returns why the driver refuses it, or
        None when it takes it."""
        raise NotImplementedError

    def send_stop(self) -> None:
        """Zero motion on the driver's command interface."""
        raise NotImplementedError

    def command_publishers(self) -> list[Any]:
        """The publishers a shutdown stop must reach."""
        raise NotImplementedError

    # ---- shared ---------------------------------------------------------------------------
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _stop(self) -> None:
        self.send_stop()
        self.stops_sent += 1
        self.commanded = True

    def _own_stop(self) -> None:
        """A stop on the bridge's own initiative (e-stop, lost driver, shutdown)."""
        if self.commanded:
            self._stop()

    def halt_reason(self, label: str) -> str | None:
        if stop_label(label):
            return label
        if self.estop_asserted:
            return "estop"
        if self.driver_lost:
            return "driver lost"
        if self._driver_seen is None:
            return "driver not heard yet"
        return None

    def _on_safe_action(self, msg: Float64MultiArray) -> None:
        now = self._now()
        if self._last_safe is not None and now - self._last_safe > self.command_timeout:
            # A silence no control tick has judged yet: this process was frozen or starved and
            # the command waited in its queue. The watchdog's rule comes first, whichever of the
            # two the executor takes first after the stall.
            self.check_commands(now)
        self._last_safe = now
        if self.commands_lost:
            self.commands_lost = False
            self.get_logger().warning("safe commands are back; motion resumes once the safety node allows it")
        try:
            episode, step, values = parse_command(msg.layout.data_offset, msg.data, self.axes)
        except InvalidCommand as exc:
            self.rejected += 1
            self.get_logger().warning(f"malformed safe_action, stopping: {exc}", throttle_duration_sec=1.0)
            self._stop()
            return
        label = vector_label(msg)
        if label == BRIDGE_ACK:
            self._await_stop = False  # the safety node knows the robot was stopped, and revoked
        elif self._await_stop:
            self.get_logger().warning("a moving command before the safety node answered the bridge's stop: "
                                      "held", throttle_duration_sec=1.0)
        if self.halt_reason(label) is not None or self._await_stop:
            self._stop()
            result = (1.0, 0.0)
        elif not self.check_commands(self._now()):
            # Frozen inside this callback for longer than command_timeout (SIGSTOP between the
            # checks above and the send): the command is as stale as one that waited in the
            # queue, and the watchdog's rule applies to it the same way (CI run ciO, the car
            # bridge's frozen test: a moving command reached the driver 1.7 ms after SIGCONT,
            # then stops).
            result = (1.0, 0.0)
        else:
            refused = self.send_command(values)
            self.commanded = True
            if refused is not None:
                self.driver_rejections += 1
                self.get_logger().warning(f"the driver refused step {step} of episode {episode}: {refused}",
                                          throttle_duration_sec=1.0)
            result = (0.0, 0.0 if refused is None else 1.0)
        self._result_pub.publish(pack_vector(episode, step, result))

    def _on_estop(self, msg: Bool) -> None:
        self.estop_asserted = bool(msg.data)
        if self.estop_asserted:
            self._own_stop()

    def note_driver(self, now: float) -> None:
        """The driver gave feedback at `now`."""
        self._driver_seen = now
        if self.driver_lost:
            self.driver_lost = False
            self.get_logger().warning("driver feedback is back; motion resumes once the safety node allows it")

    def check_commands(self, now: float) -> bool:
        """The bridge's own command watchdog (called every control tick, by `check_driver`):
        False, and the stop sent, while no safe command came for `command_timeout` after the
        driver was sent anything."""
        if not self.commanded or self._last_safe is None or now - self._last_safe <= self.command_timeout:
            return True
        if not self.commands_lost:
            self.commands_lost = self._await_stop = True
            self.get_logger().error(f"no safe command for {self.command_timeout:.3f} s (the safety node is gone or "
                                    "hung): the bridge stops the robot itself")
            self._say_stopped(now)
        self._stop()
        self.watchdog_stops += 1
        return False

    def _say_stopped(self, now: float) -> None:
        self._stop_said_at = now
        self._bridge_stop_pub.publish(String(data=f"no safe command for {self.command_timeout:.3f} s"))

    def check_driver(self, now: float) -> bool:
        """Called every control tick: False (and a stop sent) while the driver is silent; also
        runs the command watchdog (`check_commands`) and repeats an unanswered bridge stop."""
        self.check_commands(now)
        if self._await_stop and now - self._stop_said_at >= BRIDGE_STOP_REPEAT_S:
            self._say_stopped(now)
        if self._driver_seen is not None and now - self._driver_seen <= self.driver_timeout:
            return True
        if self._driver_seen is None and now - self._start_time <= self.startup_grace:
            if not self._waiting_said:
                self._waiting_said = True
                self.get_logger().info(f"waiting for the driver's first feedback (up to {self.startup_grace:g} s "
                                       "before it counts as lost)")
            return False
        if not self.driver_lost:
            self.driver_lost = True
            if self._driver_seen is None:
                self.get_logger().error(f"no driver feedback in the {self.startup_grace:g} s since the bridge "
                                        "started: is the driver running? stopping the robot")
            else:
                self.get_logger().error(f"no driver feedback for {self.driver_timeout:.3f} s: stopping the robot")
        self._own_stop()
        return False

    def observed(self, now: float, withheld: str | None = None, detail: str = "") -> None:
        """Every control tick: the observation went out (`withheld` None), or which input kept
        it back and how (`detail`, e.g. "track/tiles 0.62 s old, sensor_timeout 0.15 s")."""
        if withheld == "driver" and self._driver_seen is None and now - self._start_time <= self.startup_grace:
            return  # the start-up wait for the driver is no fault, and `check_driver` says it once
        report = self._withholding.update(withheld, detail or str(withheld), now)
        if report is None:
            return
        held, text = report
        if held:  # two call sites: rclpy refuses one site that logs at two severities
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        status = DiagnosticStatus(level=DiagnosticStatus.WARN if held else DiagnosticStatus.OK,
                                  name=self.get_name(), message=text,
                                  values=[KeyValue(key="withheld", value=withheld or "")])
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._status_pub.publish(msg)

    def driver_silence(self, now: float) -> str:
        """How the driver is silent, for `observed` (check_driver returned False)."""
        if self._driver_seen is None:
            return f"no feedback from the driver yet ({now - self._start_time:.1f} s since the bridge started)"
        return f"no feedback from the driver for {now - self._driver_seen:.2f} s (driver_timeout {self.driver_timeout:g} s)"

    def _on_event(self, msg: String) -> None:
        try:
            event = unpack_json(msg)
            if isinstance(event, dict) and event.get("event") == "start":
                self.episode, self.step = int(event.get("episode", self.episode + 1)), 0
                self._on_start()
        except (ValueError, TypeError):
            self.get_logger().warning("ignored a malformed episode event")

    def _on_start(self) -> None:
        """A new episode begins (after the counters were reset)."""

    def destroy_node(self) -> None:
        """A bridge that ends leaves the robot stopped: the stop goes out and the driver gets a
        moment to acknowledge it before the node goes."""
        if self._started and self.commanded and self.context.ok():
            try:
                self._stop()
                for pub in self.command_publishers():
                    pub.wait_for_all_acked(Duration(seconds=SHUTDOWN_ACK_S))
            except Exception as exc:  # noqa: BLE001 - shutting down: report, never mask the exit
                self.get_logger().warning(f"shutdown stop not confirmed: {exc}")
        super().destroy_node()
