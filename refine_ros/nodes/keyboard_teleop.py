"""Keyboard teleop: drive from a terminal when there is no gamepad.

Run it in a terminal of its own (`ros2 run refine_ros keyboard_teleop --ros-args -p
task:=door_open`, or `python -m refine_ros.nodes.keyboard_teleop ...` without a ROS install):
it reads single key presses (the terminal in cbreak mode, restored on exit) and publishes the
task's action vector on `refine/teleop_action` while a motion key is held (`refine_ros.teleop.maps`:
a key keeps its value for `hold_time` after its last auto-repeat, so letting go stops), and
nothing otherwise, so the safety node's watchdog stops the robot. Control keys: space stops
moving, `x` asserts the e-stop (`refine/estop` true), `u` releases it and calls
`safety/rearm`, the recording keys (`refine_ros.teleop.maps.CONTROL_KEYS`: `1` start, `2` stop,
`k` keep, `j` discard, `b` re-record, `+` / `-` label the take a success / failure, `0` end the
session) call the demo recorder's services (with no recorder running, `+` / `-` label the last
live episode through `logger/label_episode`), `q` quits. What the demo recorder says
(`demo/status`) is printed as it changes.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import threading
import time
import tty
from typing import Any

from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_core.tasks.registry import get_task, task_names
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.teleop.maps import (
    CONTROL_HELP,
    DEMO_CONTROLS,
    EPISODE_LABEL,
    KeyboardState,
    keymap_for,
    label_service,
)
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_vector, unpack_json

PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())}): the actions and their keys"),
    "rate": Param(50.0, "Hz of refine/teleop_action while a key is held", (1.0, 500.0)),
    "hold_time": Param(0.6, "seconds a motion key keeps its value after its last press (longer than the "
                       "terminal's auto-repeat delay)", (0.05, 5.0)),
    "scale": Param(0.5, "factor on motion keys' values (1 = the action's full range)", (0.0, 1.0)),
}


class KeyboardTeleop(Node):
    def __init__(self, *, input_fd: int | None = None, **kwargs: Any) -> None:
        super().__init__("keyboard_teleop", **kwargs)
        declare_parameters(self, PARAMETERS)
        self.fd = sys.stdin.fileno() if input_fd is None else input_fd
        with refusing(self):
            p = values(self, PARAMETERS)
            try:
                self.keys = keymap_for(get_task(str(p["task"])).spec)
            except ValueError as exc:  # an unknown task, or one without keys
                raise StartRefused(f"keyboard_teleop: {exc}") from None
            if not os.isatty(self.fd):
                raise StartRefused("keyboard_teleop needs a terminal: run it in a terminal of its own (not under "
                                   "ros2 launch), e.g. ros2 run refine_ros keyboard_teleop --ros-args -p task:=...")
        self.spec = get_task(str(p["task"])).spec
        self.state = KeyboardState(self.spec, self.keys, float(p["hold_time"]), float(p["scale"]))
        self.quit = threading.Event()
        self.step = 0
        self._lock = threading.Lock()
        self._demo_line = ""
        self.pub_teleop = self.create_publisher(Float64MultiArray, "refine/teleop_action", qos.COMMAND)
        self.pub_estop = self.create_publisher(Bool, "refine/estop", qos.COMMAND)
        self.create_subscription(String, "demo/status", self._on_demo_status, qos.LATCHED)
        self._calls = {service: self.create_client(Trigger if value is None else SetBool, service)
                       for service, value in DEMO_CONTROLS.values()}
        self._calls["safety/rearm"] = self.create_client(Trigger, "safety/rearm")
        self._calls[EPISODE_LABEL] = self.create_client(SetBool, EPISODE_LABEL)
        self.create_timer(1.0 / float(p["rate"]), self._tick)
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)  # single keys, no echo; Ctrl-C still interrupts
        self._reader = threading.Thread(target=self._read_keys, name="keyboard", daemon=True)
        self._reader.start()
        self._say(f"keyboard teleop for {self.spec.name} on refine/teleop_action\n  {self.keys.help}\n  {CONTROL_HELP}")

    def _say(self, text: str) -> None:
        print(text, flush=True)

    def _read_keys(self) -> None:
        while not self.quit.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            data = os.read(self.fd, 32)
            if not data:  # the terminal went away
                self.quit.set()
                return
            for key in data.decode("utf-8", "ignore"):
                self._on_key(key)

    def _on_key(self, key: str) -> None:
        with self._lock:
            action = self.state.press(key, time.monotonic())
        if action is None or action == "halt":
            return
        if action == "quit":
            self.quit.set()
        elif action == "estop":
            self.pub_estop.publish(Bool(data=True))
            self._say("E-STOP asserted (u: release and re-arm)")
        elif action == "rearm":
            self.pub_estop.publish(Bool(data=False))
            self._call("safety/rearm", Trigger.Request())
        elif action in DEMO_CONTROLS:
            service, value = DEMO_CONTROLS[action]
            self._call(label_service(service, self._calls[service].service_is_ready()), Trigger.Request() if value is None else SetBool.Request(data=value))

    def _call(self, name: str, request: Any) -> None:
        client = self._calls[name]
        if not client.service_is_ready():
            self._say(f"{client.srv_name} is not available")
            return
        client.call_async(request).add_done_callback(
            lambda f, n=client.srv_name: self._say(f"{n}: {f.result().message if f.exception() is None else f.exception()}"))

    def _on_demo_status(self, msg: String) -> None:
        try:
            status = unpack_json(msg)
            line = f"[demo {status['state']}] {status['message']}"
        except (ValueError, KeyError, TypeError):
            return
        if line != self._demo_line:  # a recording take repeats its status each second (its step count)
            self._demo_line = line
            self._say(line)

    def _tick(self) -> None:
        with self._lock:
            command = self.state.command(time.monotonic())
        if command is None:
            return
        self.pub_teleop.publish(pack_vector(0, self.step, command.tolist()))
        self.step += 1

    def destroy_node(self) -> None:
        self.quit.set()
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(1.0)
        saved = getattr(self, "_saved", None)
        if saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, saved)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(KeyboardTeleop, args, until=lambda node: node.quit.is_set())


if __name__ == "__main__":
    main()
