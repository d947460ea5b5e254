"""Demo recorder: records one teleoperated demonstration into the run database.

The operator drives the robot (or a simulator) through the safety node with
`refine/teleop_action` (joy_teleop, keyboard_teleop or any publisher), so clamps, rate limits,
the workspace box, the watchdog and the e-stop hold while they do. This node listens to what
actually happened: the observations the bridge (or the sim node) publishes and the commands
the safety node sent (`refine/safe_action`), and pairs them (`refine_ros.recording`).

Operator services (std_srvs): `demo/start` (Trigger) begins a take (with a simulator it first
resets it through `reset_service` and records its new episode, which ends by itself);
`demo/stop` (Trigger) ends it and holds it in memory; `demo/label` (SetBool) labels the held
take: true = a success, stored as the run's demonstration with its source
`teleop (<robot>)` and the `label` parameter as the operator's note, in one transaction;
false = a failure, discarded. An e-stop (`refine/estop`, or a latched e-stop on
`safety/status`) during a take aborts it and nothing is written. `demo/status` (latched JSON)
says what the recorder is doing; `finished` is set once a demonstration is stored, which ends
`refine up <profile>_record_demo`.

Why a node of its own: the recording must see exactly what the robot was sent, after the
safety rules, and nothing else; the learner and the logger are not running while a
demonstration is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_core.rollout.demo import DemonstrationError, teleop_source
from refine_core.store.db import RunDatabase, RunDatabaseError
from refine_core.tasks.registry import get_task, task_names
from refine_ros import qos
from refine_ros.messages import pack_json, unpack_json, unpack_vector
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values
from refine_ros.recording import Take, build_demonstration, save_take, take_problem
from refine_ros_interfaces.msg import Step

PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())})"),
    "run_dir": Param("runs/ros", "run directory; the demonstration goes into <run_dir>/run.db"),
    "robot": Param(Required("string"), "the robot (or simulator profile) driven: the demonstration's source is "
                   "'teleop (<robot>)', and a robot's learner fits only that source"),
    "action_topic": Param("refine/safe_action", "the commands the robot executed (the safety node's output)"),
    "reset_service": Param("", "Trigger service that starts a simulator episode at demo/start ('' = a robot: the "
                           "take starts at once)"),
    "label": Param("", "the operator's note stored with the next saved demonstration", read_only=False),
    "min_steps": Param(10, "fewest steps a take needs to be kept", (2, 1_000_000), read_only=False),
    "max_gap": Param(0.5, "seconds the observations may pause inside a take (longer: a sensor dropped out and the "
                     "take is refused)", (0.01, 60.0), read_only=False),
}

STATES = ("idle", "starting", "recording", "stopped", "saved", "aborted")


class DemoRecorder(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("demo_recorder", **kwargs)
        declare_parameters(self, PARAMETERS)
        with refusing(self):
            p = values(self, PARAMETERS)
            if str(p["task"]) not in task_names():
                raise StartRefused(f"demo_recorder: unknown task {p['task']!r}; choose one of {', '.join(task_names())}")
            if not str(p["robot"]).strip():
                raise StartRefused("demo_recorder: robot must name the robot (or simulator profile) being driven")
        self.task = get_task(str(p["task"]))
        self.spec = self.task.spec
        self.run_dir = Path(str(p["run_dir"]))
        self.source = teleop_source(str(p["robot"]))
        self.finished = threading.Event()
        """Set once a demonstration is stored (`refine up` then ends)."""
        self.outcome = "no demonstration stored yet"
        self._lock = threading.Lock()
        self.state = "idle"
        self.take: Take | None = None
        self.held: Take | None = None
        self.columns: tuple[str, ...] | None = None
        self.seed = -1
        self._episode_seen: int | None = None
        self._start_after: int | None = None
        self._estop = False

        self.pub_status = self.create_publisher(String, "demo/status", qos.LATCHED)
        self.create_subscription(Step, "refine/observation", self._on_observation, qos.LOG)
        self.create_subscription(String, "refine/observation_columns", self._on_columns, qos.LATCHED)
        self.create_subscription(Float64MultiArray, str(p["action_topic"]), self._on_action, qos.LOG)
        self.create_subscription(Step, "refine/reward", self._on_reward, qos.LOG)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        self.create_subscription(Bool, "refine/estop", self._on_estop, qos.COMMAND)
        self.create_subscription(DiagnosticArray, "safety/status", self._on_safety_status, qos.STATE)
        reset = str(p["reset_service"]).strip()
        self.reset_client = self.create_client(Trigger, reset) if reset else None
        self.create_service(Trigger, "demo/start", self._on_start)
        self.create_service(Trigger, "demo/stop", self._on_stop)
        self.create_service(SetBool, "demo/label", self._on_label)
        self._publish("idle", f"ready: call demo/start to record a {self.spec.name} demonstration ({self.source})")

    # -- operator services ------------------------------------------------------------------------
    def _on_start(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            response.success, response.message = self._start()
        self.get_logger().info(f"demo/start: {response.message}")
        return response

    def _start(self) -> tuple[bool, str]:
        if self.state in ("starting", "recording"):
            return False, "already recording; call demo/stop first"
        if self._estop:
            return False, "the e-stop is latched: release it and call safety/rearm first"
        if self.columns is None:
            return False, "no refine/observation_columns yet: is the bridge (or sim node) running?"
        if self.columns != tuple(self.spec.observation_columns):
            return False, (f"the observation columns on refine/observation_columns are not {self.spec.name}'s "
                           "(another task, or another order)")
        dropped = f" (the unlabelled take of {len(self.held)} steps was discarded)" if self.held else ""
        self.held = None
        self.take = Take(axes=len(self.spec.actions))
        if self.reset_client is None:
            self._set("recording", f"recording{dropped}: drive on refine/teleop_action, then call demo/stop")
            return True, self.last_message
        if not self.reset_client.service_is_ready():
            self.take = None
            return False, f"the simulator's {self.reset_client.srv_name} service is not available"
        self._start_after = self._episode_seen
        self.reset_client.call_async(Trigger.Request()).add_done_callback(self._on_reset_answer)
        self._set("starting", f"resetting the simulator; recording its next episode{dropped}")
        return True, self.last_message

    def _on_reset_answer(self, future) -> None:
        result = future.result() if future.exception() is None else None
        if result is not None and result.success:
            return
        with self._lock:
            if self.state == "starting":
                self.take = None
                why = future.exception() or (result.message if result is not None else "no answer")
                self._set("idle", f"the simulator did not reset: {why}")

    def _on_stop(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        with self._lock:
            if self.state not in ("starting", "recording"):
                response.success, response.message = False, f"not recording (state {self.state})"
            else:
                response.success, response.message = self._stop("stopped by the operator")
        self.get_logger().info(f"demo/stop: {response.message}")
        return response

    def _stop(self, why: str) -> tuple[bool, str]:
        take, self.take = self.take, None
        take.finish()
        problem = take_problem(take, min_steps=int(self._p("min_steps")), max_gap_s=float(self._p("max_gap")))
        if problem:
            self._set("idle", f"{why}; the take cannot be kept: {problem}")
            return False, self.last_message
        self.held = take
        self._set("stopped", f"{why}: {len(take)} steps; call demo/label (true: keep it as the demonstration, "
                             "false: discard it)")
        return True, self.last_message

    def _on_label(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self._lock:
            response.success, response.message = self._label(bool(request.data))
        self.get_logger().info(f"demo/label: {response.message}")
        return response

    def _label(self, success: bool) -> tuple[bool, str]:
        take = self.held
        if take is None:
            return False, f"no stopped take to label (state {self.state})"
        self.held = None
        if not success:
            self._set("idle", f"discarded the take of {len(take)} steps (labelled a failure); nothing was written")
            return True, self.last_message
        note = str(self._p("label")).strip() or None
        try:
            demo = build_demonstration(self.task, take, source=self.source, columns=self.columns, seed=self.seed,
                                       label=note, success=True)
            with RunDatabase(self.run_dir) as db:
                run_id, replaced = save_take(db, demo)
                where = db.path
        except (DemonstrationError, RunDatabaseError, OSError, ValueError) as exc:
            self._set("idle", f"the take was not stored: {exc}")
            return False, self.last_message
        self.outcome = (f"stored a {demo.steps}-step {self.source} demonstration as run {run_id}'s"
                        f"{' (replacing the earlier one)' if replaced else ''} in {where}")
        self._set("saved", self.outcome)
        self.finished.set()
        return True, self.last_message

    # -- what happened on the robot -----------------------------------------------------------------
    def _on_columns(self, msg: String) -> None:
        try:
            columns = unpack_json(msg)
        except ValueError:
            return
        if isinstance(columns, list):
            self.columns = tuple(str(c) for c in columns)

    def _on_observation(self, msg: Step) -> None:
        try:
            vec = unpack_vector(msg)
        except ValueError:
            return
        now = time.monotonic()
        with self._lock:
            if self.state == "starting" and vec.episode != self._start_after:
                self.take.episode = vec.episode  # the simulator's new episode: the take begins
                self._set("recording", f"recording simulator episode {vec.episode}: drive on refine/teleop_action")
            self._episode_seen = vec.episode
            take = self.take
            if self.state != "recording" or take is None:
                return
            if take.episode is not None and vec.episode != take.episode:
                return
            if len(vec.values) != len(self.spec.observation_columns):
                return
            take.on_observation(vec.values, vec.step, now)

    def _on_action(self, msg: Float64MultiArray) -> None:
        try:
            vec = unpack_vector(msg)
        except ValueError:
            return
        with self._lock:
            if self.state == "recording" and self.take is not None:
                self.take.on_action(vec.values)

    def _on_reward(self, msg: Step) -> None:
        try:
            vec = unpack_vector(msg)
        except ValueError:
            return
        with self._lock:
            take = self.take
            if self.state != "recording" or take is None or vec.episode != take.episode or len(vec.values) < 3:
                return
            take.on_reward(vec.step, vec.values[0], vec.values[1] > 0.5, vec.values[2])
            if take.done:
                self._stop(f"the simulator ended episode {vec.episode}")

    def _on_event(self, msg: String) -> None:
        try:
            event = json.loads(msg.data)
        except ValueError:
            return
        if not isinstance(event, dict) or event.get("source") != "sim":
            return
        with self._lock:
            if event.get("event") == "reset" and self.state in ("starting", "recording"):
                self.seed = int(event.get("seed", -1))
            take = self.take
            if event.get("event") == "end" and take is not None and event.get("episode") == take.episode:
                take.summary = {k: float(event[k]) for k in ("return", "metric", "success") if k in event}

    def _on_estop(self, msg: Bool) -> None:
        if msg.data:
            self._abort("e-stop pressed")

    def _on_safety_status(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            fields = {kv.key: kv.value for kv in status.values}
            if "estop_latched" in fields:
                self._estop = fields["estop_latched"] == "True"
                if self._estop:
                    self._abort("the safety node reports a latched e-stop")

    def _abort(self, why: str) -> None:
        with self._lock:
            self._estop = True
            if self.state not in ("starting", "recording") or self.take is None:
                return
            steps, self.take = len(self.take), None
            self._set("aborted", f"{why} during the take: recording aborted, {steps} steps discarded, nothing written")
        self.get_logger().error(self.last_message)

    # -- helpers ----------------------------------------------------------------------------------
    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _set(self, state: str, message: str) -> None:
        self.state, self.last_message = state, message
        self._publish(state, message)

    def _publish(self, state: str, message: str) -> None:
        self.state, self.last_message = state, message
        take = self.take if self.take is not None else self.held
        self.pub_status.publish(pack_json({"state": state, "message": message,
                                           "steps": 0 if take is None else len(take),
                                           "source": self.source, "task": self.spec.name}))


def main(args: list[str] | None = None) -> None:
    """Ends once the demonstration is stored (as `refine up` does), so `ros2 launch` of a
    record_demo profile ends with it; the linger lets the latched demo/status reach late readers."""
    run_node(DemoRecorder, args, until=lambda node: node.finished.is_set(), linger=1.0)


if __name__ == "__main__":
    main()
