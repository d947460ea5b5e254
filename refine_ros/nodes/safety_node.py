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
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import Trigger

from refine_ros import qos
from refine_ros.messages import pack_vector
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values
from refine_ros.safety import Decision, InvalidSafetyConfig, SafetyConfig, SafetyFilter

# The limits belong to one robot, so they have no default here: each real profile sets them
# (config/arm_real.yaml, config/rc_car_real.yaml) and the node refuses to start without them.
# Only behaviour that is the same on every robot has a default.
_LIMIT = {"read_only": False}
PARAMETERS: dict[str, Param] = {
    "lower": Param(Required("double_array"), "per-axis lower clamp of the command, task action order", **_LIMIT),
    "upper": Param(Required("double_array"), "per-axis upper clamp of the command, task action order", **_LIMIT),
    "zero": Param(Required("double_array"), "the stop command (arm: no motion; car: steer 0, gas 0, brake 1)",
                  **_LIMIT),
    "max_rate": Param(Required("double_array"), "largest change per second per axis when ramping up (<= 0: "
                      "unlimited); stops are immediate", **_LIMIT),
    "hold_axes": Param(Required("integer_array"), "axes whose stop value is the last value sent (arm gripper "
                       "keeps its grip); [-1] = none", **_LIMIT),
    "watchdog_timeout": Param(Required("double"), "seconds within which zero is commanded after observations or "
                              "commands go stale", (0.005, 5.0), **_LIMIT),
    "watchdog_period": Param(Required("double"), "watchdog timer period in seconds (<= watchdog_timeout / 4); "
                             "inputs are stale after timeout - period - max(period, 0.3 * timeout)", (0.001, 1.0)),
    "workspace_observation_indices": Param(Required("integer_array"), "observation coordinates checked against "
                                           "the box (arm: gripper xyz 0,1,2; car: speed 48)", **_LIMIT),
    "workspace_lower": Param(Required("double_array"), "lower bound per checked coordinate", **_LIMIT),
    "workspace_upper": Param(Required("double_array"), "upper bound per checked coordinate (car: the speed cap)",
                             **_LIMIT),
    "workspace_action_axes": Param(Required("integer_array"), "action axis that moves each checked coordinate; "
                                   "outside the box only motion back is kept", **_LIMIT),
    "teleop_hold": Param(0.5, "seconds a teleop command keeps preempting policy commands", (0.0, 10.0), **_LIMIT),
    "require_confirmation": Param(True, "policy commands need safety/confirm_episode before each episode",
                                  **_LIMIT),
    "dry_run": Param(False, "decide every command but publish nothing on refine/safe_action", **_LIMIT),
    "status_period": Param(0.1, "seconds between safety/status diagnostics", (0.01, 10.0)),
}
_FIXED = {name for name, p in PARAMETERS.items() if p.read_only}

_LEVEL = {
    "policy": DiagnosticStatus.OK,
    "teleop": DiagnosticStatus.OK,
    "unconfirmed": DiagnosticStatus.WARN,
    "startup": DiagnosticStatus.WARN,
    "stale": DiagnosticStatus.WARN,
    "rejected": DiagnosticStatus.WARN,
    "estop": DiagnosticStatus.ERROR,
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
        self.add_on_set_parameters_callback(self._on_set_parameters)

        self._safe_pub = self.create_publisher(Float64MultiArray, "refine/safe_action", qos.CONTROL)
        self._status_pub = self.create_publisher(DiagnosticArray, "safety/status", qos.STATE)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_policy, qos.COMMAND)
        self.create_subscription(Float64MultiArray, "refine/teleop_action", self._on_teleop, qos.COMMAND)
        self.create_subscription(Bool, "refine/estop", self._on_estop, qos.COMMAND)
        self.create_subscription(Float64MultiArray, "refine/observation", self._on_observation, qos.STATE)
        self._last_tick: float | None = None
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
    @property
    def _dry_run(self) -> bool:
        return bool(self.get_parameter("dry_run").value)

    @staticmethod
    def _config_from(p: dict[str, object]) -> SafetyConfig:
        """Every limit of `p` (parameter name -> value) as one checked SafetyConfig."""

        def floats(name: str) -> tuple[float, ...]:
            return tuple(float(v) for v in p[name])

        def ints(name: str) -> tuple[int, ...]:
            return tuple(int(v) for v in p[name])

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
            require_confirmation=bool(p["require_confirmation"]),
        )

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Limits change only as a consistent set; the latch and confirmation survive a change."""
        changes = {p.name: p.value for p in params}
        if _FIXED & set(changes):  # read-only parameters never get here through ROS; be explicit anyway
            return SetParametersResult(successful=False, reason=f"{sorted(_FIXED & set(changes))} are fixed at start")
        if not set(changes) - {"dry_run"}:
            return SetParametersResult(successful=True)
        try:
            config = self._config_from({**values(self, PARAMETERS), **changes})
            self.filter.reconfigure(config)
        except (InvalidSafetyConfig, TypeError, ValueError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

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

    def _on_observation(self, msg: Float64MultiArray) -> None:
        if msg.layout.data_offset != 2 or len(msg.data) < 2:
            return
        self.filter.on_observation(msg.data[2:], self._now())

    def _on_tick(self) -> None:
        """The watchdog. rclpy runs a ready timer before ready subscriptions, so after this
        process was held up (a tick more than two periods late) the observations and commands
        that arrived meanwhile are still queued behind this call: judging now would stop a robot
        whose inputs are fresh. Such a tick only notes the time; the next one, at most a period
        later and after those messages, judges."""
        now = self._now()
        late = self._last_tick is not None and now - self._last_tick > 2 * self.filter.config.watchdog_period
        self._last_tick = now
        if late:
            self.late_ticks += 1
            return
        self._send(self.filter.tick(now))

    def _on_rearm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.filter.rearm()
        self.get_logger().warning(f"rearm: {response.message}")
        return response

    def _on_confirm(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.filter.confirm_episode()
        self.get_logger().info(f"confirm_episode: {response.message}")
        return response

    def _send(self, decision: Decision | None) -> None:
        if decision is None or self._dry_run:
            return
        self._safe_pub.publish(pack_vector(decision.episode, decision.step, decision.values))
        self.published += 1

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
