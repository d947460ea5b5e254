"""Joy teleop: a gamepad (`sensor_msgs/Joy`, e.g. from the ROS `joy` package's
game_controller_node) -> `refine/teleop_action`, the task's action vector.

Each action is `offset + scale * axis` of the Joy axis mapped to it (`refine_ros.teleop.maps`:
the task's standard map, or the `axes` / `scales` / `offsets` parameters). Commands go out
at `rate` only while the dead-man button (`enable_button`) is held and the Joy messages are
fresh (`joy_timeout`): let go, or unplug the pad, and nothing is sent, so the safety node's
watchdog stops the robot. Other buttons: `estop_button` publishes `refine/estop` true while
held (false on release; the safety node latches it until `safety/rearm`; with `estop_heartbeat`
its state goes out with every Joy message, for a safety node whose `estop_timeout` makes the
e-stop a heartbeat: an unplugged pad then stops the robot), the recording buttons
(`start_button`, `stop_button`, `keep_button`, `discard_button`, `rerecord_button`,
`success_button`, `failure_button`, `finish_button`; `refine_ros.teleop.maps.DEMO_BUTTONS`) call the
demo recorder's services (`demo/start`, ..., `demo/label` true / false, `demo/finish`); with no
recorder running, success / failure label the last live episode (`logger/label_episode`).

Why continuous publishing while enabled: the safety node treats a teleop command older than
its stale limit (about 60 ms on the arm) as gone, so the node repeats the current command at
`rate` instead of only on stick changes.
"""

from __future__ import annotations

import time
from typing import Any

from rclpy.node import Node
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import SetBool, Trigger

from refine_core.tasks.registry import get_task, task_names
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.teleop.maps import (
    BUTTON_B,
    BUTTON_LEFT_SHOULDER,
    DEMO_BUTTONS,
    DEMO_CONTROLS,
    EPISODE_LABEL,
    Edges,
    joy_map_for,
    label_service,
)
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_vector


def _button(control: str, what: str) -> Param:
    service, value = DEMO_CONTROLS[control]
    call = service if value is None else f"{service} {str(value).lower()}"
    return Param(DEMO_BUTTONS[control], f"button calling {call}: {what} (-1 = none)", (-1, 64), read_only=False)


PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())}): the actions and the standard map"),
    "joy_topic": Param("joy", "sensor_msgs/Joy input"),
    "axes": Param([-1], "Joy axis per action, task action order; [-1] (one entry) = the task's standard map"),
    "scales": Param([0.0], "factor per action (used with axes)"),
    "offsets": Param([0.0], "value per action at axis 0 (used with axes)"),
    "deadzone": Param(0.05, "stick values smaller than this read 0", (0.0, 0.9), read_only=False),
    "enable_button": Param(BUTTON_LEFT_SHOULDER, "dead-man button: commands only while held (-1 = always, not "
                           "recommended)", (-1, 64), read_only=False),
    "estop_button": Param(BUTTON_B, "button publishing refine/estop true while held (-1 = none)", (-1, 64),
                          read_only=False),
    "estop_heartbeat": Param(False, "publish the e-stop button's state with every Joy message, not only on change "
                             "(for the safety node's estop_timeout)"),
    "start_button": _button("start", "start a take"),
    "stop_button": _button("stop", "stop the take"),
    "keep_button": _button("keep", "keep the stopped take"),
    "discard_button": _button("discard", "discard the stopped take"),
    "rerecord_button": _button("rerecord", "drop the take and record it again"),
    "success_button": _button("success", "label the take (or, with no recorder, the last live episode) a success"),
    "failure_button": _button("failure", "label it a failure"),
    "finish_button": _button("finish", "end the recording session"),
    "rate": Param(50.0, "Hz of refine/teleop_action while enabled", (1.0, 500.0)),
    "joy_timeout": Param(0.5, "seconds after which the last Joy message counts as gone", (0.01, 10.0),
                         read_only=False),
}


class JoyTeleop(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("joy_teleop", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            if str(p["task"]) not in task_names():
                raise StartRefused(f"joy_teleop: unknown task {p['task']!r}")
            self.spec = get_task(str(p["task"])).spec
            standard = list(p["axes"]) == [-1]
            try:
                self.map = joy_map_for(self.spec, *(() if standard else (p["axes"], p["scales"], p["offsets"])))
            except ValueError as exc:
                raise StartRefused(f"joy_teleop: {exc}") from None
        self.last_joy: Joy | None = None
        self.last_joy_time = -1e18
        self.step = 0
        self.sent = 0
        self._edges = Edges()
        self._estop_held = False
        self._estop_heartbeat = bool(self.get_parameter("estop_heartbeat").value)
        self.pub_teleop = self.create_publisher(Float64MultiArray, "refine/teleop_action", qos.COMMAND)
        self.pub_estop = self.create_publisher(Bool, "refine/estop", qos.COMMAND)
        self.create_subscription(Joy, str(p["joy_topic"]), self._on_joy, qos.SENSOR)
        self._demo_clients = {service: self.create_client(Trigger if value is None else SetBool, service)
                              for service, value in DEMO_CONTROLS.values()}
        self._demo_clients[EPISODE_LABEL] = self.create_client(SetBool, EPISODE_LABEL)
        self.create_timer(1.0 / float(p["rate"]), self._tick)
        names = ", ".join(f"{a}: axis {i}" for a, i in zip(self.spec.action_names, self.map.axes, strict=True))
        self.get_logger().info(f"gamepad teleop for {self.spec.name} ({names}); hold button "
                               f"{p['enable_button']} to drive")

    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _on_joy(self, msg: Joy) -> None:
        self.last_joy, self.last_joy_time = msg, time.monotonic()
        buttons = list(msg.buttons)
        estop = int(self._p("estop_button"))
        held = 0 <= estop < len(buttons) and bool(buttons[estop])
        if held != self._estop_held or self._estop_heartbeat:
            self._estop_held = held
            self.pub_estop.publish(Bool(data=held))
        wanted = {name: int(self._p(f"{name}_button")) for name in DEMO_CONTROLS}
        for name in self._edges.pressed(buttons, wanted):
            self._call(name)

    def _call(self, name: str) -> None:
        service, value = DEMO_CONTROLS[name]
        client = self._demo_clients[label_service(service, self._demo_clients[service].service_is_ready())]
        if not client.service_is_ready():
            self.get_logger().warning(f"{client.srv_name} is not available (is the demo recorder running?)")
            return
        request = Trigger.Request() if value is None else SetBool.Request(data=value)
        client.call_async(request).add_done_callback(
            lambda f, n=client.srv_name: self.get_logger().info(
                f"{n}: {f.result().message if f.exception() is None else f.exception()}"))

    def command(self, now: float) -> list[float] | None:
        """The command to send now, or None (dead-man released, no or stale Joy, bad message)."""
        msg = self.last_joy
        if msg is None or now - self.last_joy_time > float(self._p("joy_timeout")):
            return None
        enable = int(self._p("enable_button"))
        if enable >= 0 and not (enable < len(msg.buttons) and msg.buttons[enable]):
            return None
        try:
            return self.map.command(self.spec, list(msg.axes), float(self._p("deadzone"))).tolist()
        except ValueError as exc:
            self.get_logger().warning(f"ignored a Joy message: {exc}", throttle_duration_sec=2.0)
            return None

    def _tick(self) -> None:
        values_ = self.command(time.monotonic())
        if values_ is None:
            return
        self.pub_teleop.publish(pack_vector(0, self.step, values_))
        self.step += 1
        self.sent += 1


def main(args: list[str] | None = None) -> None:
    run_node(JoyTeleop, args)


if __name__ == "__main__":
    main()
