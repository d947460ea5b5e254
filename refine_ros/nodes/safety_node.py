"""Safety node: the only path from a policy (or a teleoperator) to a hardware bridge.

The rules live in `refine_ros.safety` (tested without DDS); this node feeds it messages and
the clock, runs the watchdog on a timer well inside the budget, and reports on
`safety/status`. With `dry_run` it still decides every command but publishes none.

QoS: incoming commands and the e-stop are read COMMAND (reliable, depth 1: only the newest
command matters, and a reliable e-stop is not silently dropped); `refine/safe_action` is
published CONTROL, a deep writer history, because the rollout logger records every safe command
and a depth-1 writer would overwrite samples it has not acknowledged; the observation heartbeat
is read STATE; the diagnostics use STATE as documented in docs/ROS_INTERFACES.md.
"""

from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.duration import Duration
from rclpy.node import Node
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger

from refine_ros.nodes._main import run_node
from refine_ros.params import (
    Param,
    Required,
    StartRefused,
    Unset,
    declare_parameters,
    refusing,
    values,
)
from refine_ros.safety import Decision, InvalidSafetyConfig, SafetyConfig, SafetyFilter
from refine_ros.wire import qos
from refine_ros.wire.messages import NotCounted, pack_vector, unpack_vector
from refine_ros_interfaces.msg import Step

# The limits belong to one robot, so they have no default here: each real profile sets them
# (each robot's real profile, config/<profile>.yaml) and the node refuses to start without them.
# Only behaviour that is the same on every robot has a default. Every limit, `dry_run` and
# `require_confirmation` is read-only: fixed at start, so `ros2 param set` cannot loosen them
# while the robot runs (restart the node to change them).
PARAMETERS: dict[str, Param] = {
    "lower": Param(Required("double_array"), "per-axis lower clamp of the command, in the task's action units "
                   "(task action order)"),
    "upper": Param(Required("double_array"), "per-axis upper clamp of the command, in the task's action units"),
    "zero": Param(Required("double_array"), "the stop command in action units (arm: no motion; car: steer 0, "
                  "gas 0, brake 1, which every car bridge mode turns into zero speed, never reverse)"),
    "max_rate": Param(Required("double_array"), "largest change per second per axis when ramping up, action units "
                      "per second (<= 0: unlimited); stops are immediate"),
    "hold_axes": Param(Required("integer_array"), "axes whose stop value is the last value sent (the arm's "
                       "gripper position: keeping it is no motion); [-1] = none"),
    "watchdog_timeout": Param(Required("double"), "seconds within which zero is commanded after observations or "
                              "commands go stale", (0.005, 5.0)),
    "watchdog_period": Param(Required("double"), "watchdog timer period in seconds (<= watchdog_timeout / 4); "
                             "inputs are stale after timeout - period - max(period, 0.3 * timeout)", (0.001, 1.0)),
    "workspace_observation_indices": Param(Unset("integer_array"), "observation coordinates checked against the "
                                           "box (arm: gripper xyz 0, 1, 2, metres in the base frame); unset: no box"),
    "workspace_lower": Param(Unset("double_array"), "lower corner of the box, per checked coordinate (arm: m)"),
    "workspace_upper": Param(Unset("double_array"), "upper corner of the box, per checked coordinate (arm: m)"),
    "workspace_action_axes": Param(Unset("integer_array"), "action axis that moves each checked coordinate; "
                                   "outside the box only motion back is kept"),
    "workspace_reach": Param(Unset("double"), "metres the arm reaches from its base frame's origin; every corner "
                             "of the box must lie within it (required with a box)"),
    "teleop_hold": Param(0.5, "seconds a teleop command keeps preempting policy commands", (0.0, 10.0)),
    "require_confirmation": Param(True, "policy commands need safety/confirm_episode before each episode and "
                                  "after every stop"),
    "dry_run": Param(False, "decide every command but publish nothing on refine/safe_action"),
    "estop_timeout": Param(0.0, "seconds: > 0 makes refine/estop a heartbeat (the e-stop publishes its state "
                           "continuously; silence or its publisher leaving latches the e-stop); 0: off",
                           (0.0, 10.0)),
    "deadman_topic": Param("/joy", "sensor_msgs/Joy carrying the autonomy dead-man button"),
    "deadman_button": Param(-1, "button that must be held for policy commands to pass (F1TENTH: 5, RB); -1: off",
                            (-1, 64)),
    "deadman_timeout": Param(0.5, "seconds after which the dead-man's last Joy message counts as released",
                             (0.01, 5.0)),
    "status_period": Param(0.1, "seconds between safety/status diagnostics", (0.01, 10.0)),
}
SHUTDOWN_ACK_S = 0.5
"""How long destroy_node waits for the bridge to acknowledge the shutdown stop."""

_LEVEL = {
    "policy": DiagnosticStatus.OK,
    "teleop": DiagnosticStatus.OK,
    "unconfirmed": DiagnosticStatus.WARN,
    "startup": DiagnosticStatus.WARN,
    "stale": DiagnosticStatus.WARN,
    "rejected": DiagnosticStatus.WARN,
    "deadman": DiagnosticStatus.WARN,
    "estop": DiagnosticStatus.ERROR,
    "shutdown": DiagnosticStatus.WARN,
    "bridge": DiagnosticStatus.WARN,
}


class SafetyNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("safety_node", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            try:
                self.filter = SafetyFilter(self._config_from(values(self, PARAMETERS)))
            except InvalidSafetyConfig as exc:
                raise StartRefused(f"safety_node: invalid safety limits: {exc}") from None
        self.published = 0
        self._dry_run = bool(self.get_parameter("dry_run").value)

        self._safe_pub = self.create_publisher(Float64MultiArray, "refine/safe_action", qos.CONTROL)
        self._status_pub = self.create_publisher(DiagnosticArray, "safety/status", qos.STATE)
        # The inputs a command is judged by are subscribed before the commands: rclpy runs the
        # ready subscriptions of one wake-up in creation order, so after this process was held
        # up, an observation (or e-stop, dead-man) that arrived with a command is taken first,
        # and the command is not stopped, and its confirmation not revoked, as "stale" on news
        # already waiting in the queue (test_ros_safety: a command queued with its observation
        # passed only in this order).
        self.create_subscription(Bool, "refine/estop", self._on_estop, qos.COMMAND)
        self.create_subscription(Step, "refine/observation", self._on_observation, qos.STATE)
        # the bridge stopped the robot on its own (its command watchdog: this node was silent)
        self.create_subscription(String, "refine/bridge_stop", self._on_bridge_stop, qos.STATE)
        self._deadman_button = int(self.get_parameter("deadman_button").value)
        if self._deadman_button >= 0:
            self.create_subscription(Joy, str(self.get_parameter("deadman_topic").value), self._on_joy, qos.SENSOR)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_policy, qos.COMMAND)
        self.create_subscription(Float64MultiArray, "refine/teleop_action", self._on_teleop, qos.COMMAND)
        self._last_tick: float | None = None
        self._deferred = False
        self.late_ticks = 0
        self._watchdog = self.create_timer(self.filter.config.watchdog_period, self._on_tick)
        self._status_timer = self.create_timer(float(self.get_parameter("status_period").value), self._publish_status)
        # services last: an operator tool that sees them knows the node is fully up
        self.create_service(Trigger, "safety/rearm", self._on_rearm)
        self.create_service(Trigger, "safety/confirm_episode", self._on_confirm)
        self.get_logger().info(
            f"safety on: dry_run={self._dry_run}, watchdog {self.filter.config.watchdog_timeout:.3f} s"
        )

    # ---- parameters ---------------------------------------------------------------------
    @staticmethod
    def _config_from(p: dict[str, object]) -> SafetyConfig:
        """Every limit of `p` (parameter name -> value) as one checked SafetyConfig."""

        def floats(name: str) -> tuple[float, ...]:
            return tuple(float(v) for v in p[name] or ())

        def ints(name: str) -> tuple[int, ...]:
            return tuple(int(v) for v in p[name] or ())

        return SafetyConfig(
            lower=floats("lower"),
            upper=floats("upper"),
            zero=floats("zero"),
            max_rate=floats("max_rate"),
            # a ROS integer array cannot be empty: [-1] means none
            hold_axes=tuple(a for a in ints("hold_axes") if a >= 0),
            watchdog_timeout=float(p["watchdog_timeout"]),
            watchdog_period=float(p["watchdog_period"]),
            teleop_hold=float(p["teleop_hold"]),
            workspace_observation_indices=ints("workspace_observation_indices"),
            workspace_lower=floats("workspace_lower"),
            workspace_upper=floats("workspace_upper"),
            workspace_action_axes=ints("workspace_action_axes"),
            workspace_reach=float(p["workspace_reach"] or 0.0),
            require_confirmation=bool(p["require_confirmation"]),
            estop_timeout=float(p["estop_timeout"]),
            deadman_timeout=float(p["deadman_timeout"]) if int(p["deadman_button"]) >= 0 else 0.0,
        )

    # ---- callbacks ----------------------------------------------------------------------
    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_policy(self, msg: Float64MultiArray) -> None:
        self._send(self.filter.on_policy(msg.layout.data_offset, msg.data, self._now()))

    def _on_teleop(self, msg: Float64MultiArray) -> None:
        self._send(self.filter.on_teleop(msg.layout.data_offset, msg.data, self._now()))

    def _on_estop(self, msg: Bool) -> None:
        if msg.data and not self.filter.estop_latched:
            self.get_logger().error("E-STOP: latched until safety/rearm")
        self._send(self.filter.on_estop(msg.data, self._now()))

    def _on_observation(self, msg: Step) -> None:
        try:
            observation = unpack_vector(msg)
        except NotCounted:
            return
        self.filter.on_observation(observation.values, self._now())

    def _on_bridge_stop(self, msg: String) -> None:
        """The robot was stopped without this node (frozen, or its commands lost): the episode's
        confirmation is revoked, so a human looks first, and the stop goes out labelled
        `BRIDGE_ACK`, the only answer the bridge waits for before it passes motion again (the
        bridge says it again every second until then)."""
        self.get_logger().warning(f"the bridge stopped the robot itself ({msg.data}): confirm the episode again")
        self._send(self.filter.bridge_stopped(self._now()))

    def _on_joy(self, msg: Joy) -> None:
        b = self._deadman_button
        self._send(self.filter.on_deadman(b < len(msg.buttons) and bool(msg.buttons[b]), self._now()))

    def _on_tick(self) -> None:
        """The watchdog. rclpy runs a ready timer before ready subscriptions, so after this
        process was held up (a tick more than two periods late) the observations and commands
        that arrived meanwhile are still queued behind this call: judging now would stop a robot
        whose inputs are fresh. Such a tick only notes the time and the next one, at most a
        period later and after those messages, judges. Only one tick in a row is deferred: a
        process held up again and again still has every second tick judge."""
        now = self._now()
        late = self._last_tick is not None and now - self._last_tick > 2 * self.filter.config.watchdog_period
        self._last_tick = now
        if late and not self._deferred:
            self._deferred = True
            self.late_ticks += 1
            return
        self._deferred = False
        if self.filter.config.estop_timeout > 0:
            self._send(self.filter.on_estop_publishers(self.count_publishers("refine/estop"), now))
        self._send(self.filter.tick(now))

    def _on_rearm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.filter.rearm(self._now())
        self.get_logger().warning(f"rearm: {response.message}")
        return response

    def _on_confirm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.filter.confirm_episode()
        self.get_logger().info(f"confirm_episode: {response.message}")
        return response

    def _send(self, decision: Decision | None) -> None:
        """The decision's reason travels as the dimension label: the bridge and the logger can
        tell a stop from a command that happens to be zero."""
        if decision is None or self._dry_run:
            return
        self._safe_pub.publish(pack_vector(decision.episode, decision.step, decision.values, label=decision.reason))
        self.published += 1

    def destroy_node(self) -> None:
        """A node that ends (Ctrl-C, SIGTERM, launch shutting down) leaves the robot stopped:
        the stop goes out, and the bridge gets a moment to acknowledge it, before the node goes."""
        if not self._dry_run and self.context.ok():
            try:
                self._send(self.filter.stop_now("shutdown", self._now()))
                self._safe_pub.wait_for_all_acked(Duration(seconds=SHUTDOWN_ACK_S))
            except Exception as exc:  # noqa: BLE001 - shutting down: report, never mask the exit
                self.get_logger().warning(f"shutdown stop not confirmed: {exc}")
        super().destroy_node()

    def _publish_status(self) -> None:
        values = self.filter.status(self._now())
        values["dry_run"] = str(self._dry_run)
        values["late_watchdog_ticks"] = str(self.late_ticks)
        status = DiagnosticStatus(
            level=_LEVEL.get(values["state"], DiagnosticStatus.WARN),
            name="refine safety",
            hardware_id=self.get_namespace(),
            message=values["state"],
            values=[KeyValue(key=k, value=v) for k, v in values.items()],
        )
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._status_pub.publish(msg)


def main(args: list[str] | None = None) -> None:
    # missing or inconsistent limits: one line and exit status 2 (run_node, StartRefused)
    run_node(SafetyNode, args)


if __name__ == "__main__":
    main()
