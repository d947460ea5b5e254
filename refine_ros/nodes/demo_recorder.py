"""Demo recorder: records teleoperated demonstration takes into the run database.

The operator drives the robot (or a simulator) through the safety node with
`refine/teleop_action` (joy_teleop, keyboard_teleop or any publisher), so clamps, rate limits,
the workspace box, the watchdog and the e-stop hold while they do. This node listens to what
actually happened: the observations the bridge (or the sim node) publishes and the commands
the safety node sent (`refine/safe_action`), and pairs them (`refine_ros.teleop.recording`).

A session records several takes, as robot-learning recorders do. Operator services (std_srvs
Trigger unless said): `demo/start` begins a take (with a simulator it first resets it through
`reset_service` and records its new episode, which ends by itself); `demo/stop` ends it and
holds it in memory; then `demo/keep` stores the held take as the run's next take (one
transaction), `demo/discard` drops it, and `demo/rerecord` drops the take being recorded (or
held) and records it again. `demo/label` (SetBool) is the success label of the current take
and nothing else: true = it succeeded, false = it failed (stored with the take; unlabelled
takes store success NaN). After a keep, a discard or a re-record comes the reset phase:
`reset_time` seconds, announced on `demo/status` (state `reset`), in which the operator puts
the scene back; then the next take starts by itself (`auto_start`, always after a re-record)
or waits for `demo/start`. The session ends once `takes` takes are kept (0: until
`demo/finish`), and then `finished` is set, which ends `refine up <profile>_record_demo`.
On a robot `demo/start` refuses, saying why, until the bridge's observations and the safety
node's commands flow (the columns come at start-up, the first observation only once the
driver's sensors do, and either may be heard late by a process started beside them).

Releasing the dead-man button pauses: those steps are left out of the take, not recorded as
stop actions. A brief sensor dropout is kept and marked in the take's summary (`gaps`); one
longer than `max_gap` refuses the take. An e-stop (`refine/estop`, or a latched e-stop on
`safety/status`) during a take aborts it and nothing is written. `demo/status` (latched
JSON) says what the recorder is doing.

Why a node of its own: the recording must see exactly what the robot was sent, after the
safety rules, and nothing else; the learner and the logger are not running while
demonstrations are recorded.
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
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, Required, StartRefused, declare_parameters, refusing, values
from refine_ros.safety import stop_label
from refine_ros.teleop.recording import Take, build_demonstration, save_take, take_problem
from refine_ros.teleop.take_bag import TakeBag, message_class, parse_topics
from refine_ros.wire import qos
from refine_ros.wire.messages import pack_json, unpack_json, unpack_vector
from refine_ros_interfaces.msg import Step

PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())})"),
    "run_dir": Param("runs/ros", "run directory; the takes go into <run_dir>/run.db"),
    "robot": Param(Required("string"), "the robot (or simulator profile) driven: the demonstration's source is "
                   "'teleop (<robot>)', and a robot's learner fits only that source"),
    "action_topic": Param("refine/safe_action", "the commands the robot executed (the safety node's output)"),
    "teleop_topic": Param("refine/teleop_action", "the operator's commands (silent while the dead-man button is "
                          "released: those steps are pauses, left out); '' = no pauses"),
    "pause_after": Param(0.25, "seconds without an operator command after which a step is a pause", (0.01, 10.0),
                         read_only=False),
    "reset_service": Param("", "Trigger service that starts a simulator episode at demo/start ('' = a robot: the "
                           "take starts at once)"),
    "label": Param("", "the operator's note stored with the next kept take", read_only=False),
    "min_steps": Param(10, "fewest steps a take needs to be kept", (2, 1_000_000), read_only=False),
    "max_gap": Param(1.0, "seconds the observations may pause inside a take (a brief sensor dropout is kept and "
                     "marked in the take's summary; a longer one refuses the take)", (0.01, 60.0), read_only=False),
    "takes": Param(1, "takes to keep before the session ends (0 = until demo/finish)", (0, 10_000)),
    "reset_time": Param(5.0, "seconds of the reset phase after a take is kept, discarded or re-recorded",
                        (0.0, 3600.0), read_only=False),
    "bag_topics": Param([""], "driver topics stored per kept take in <run_dir>/takes/take_<n>.mcap, each "
                        "'TOPIC:PACKAGE/msg/TYPE' (e.g. /joint_states:sensor_msgs/msg/JointState); [''] = none"),
    "auto_start": Param(True, "start the next take by itself when the reset phase ends (a re-record always does)",
                        read_only=False),
}

STATES = ("idle", "starting", "recording", "stopped", "reset", "finished", "aborted")


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
        self.takes_wanted = int(p["takes"])
        self.finished = threading.Event()
        """Set once the session is over (`refine up` then ends)."""
        self.outcome = "no demonstration stored yet"
        self._lock = threading.Lock()
        self.state = "idle"
        self.take: Take | None = None
        self.held: Take | None = None
        self.kept: list[tuple[int, int]] = []
        """(take number, steps) of every take kept this session."""
        self.columns: tuple[str, ...] | None = None
        self.seed = -1
        self._episode_seen: int | None = None
        self._observed_at: float | None = None
        self._commanded_at: float | None = None
        """When the newest observation and executed command arrived (monotonic s), in any state."""
        self._start_after: int | None = None
        self._estop = False
        self._reset_timer = None
        self._restart_after_reset = False

        self.pub_status = self.create_publisher(String, "demo/status", qos.LATCHED)
        self.create_subscription(Step, "refine/observation", self._on_observation, qos.LOG)
        self.create_subscription(String, "refine/observation_columns", self._on_columns, qos.LATCHED)
        self.action_topic_name = str(p["action_topic"])
        self.create_subscription(Float64MultiArray, self.action_topic_name, self._on_action, qos.LOG)
        teleop = str(p["teleop_topic"]).strip()
        self.pauses = bool(teleop)
        if teleop:
            self.create_subscription(Float64MultiArray, teleop, self._on_teleop, qos.LOG)
        self.create_subscription(Step, "refine/reward", self._on_reward, qos.LOG)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        self.create_subscription(Bool, "refine/estop", self._on_estop, qos.COMMAND)
        self.create_subscription(DiagnosticArray, "safety/status", self._on_safety_status, qos.STATE)
        try:
            self.bag_topics = parse_topics(list(p["bag_topics"]))
            for topic, datatype in self.bag_topics:
                self.create_subscription(message_class(datatype), topic,
                                         lambda data, t=topic: self._on_bag_message(t, data), qos.SENSOR, raw=True)
        except (ValueError, ImportError, AttributeError) as exc:
            with refusing(self):
                raise StartRefused(f"demo_recorder: bag_topics: {exc}") from None
        self.bag: TakeBag | None = None
        reset = str(p["reset_service"]).strip()
        self.reset_client = self.create_client(Trigger, reset) if reset else None
        for name, handler in (("start", self._start), ("stop", self._stop_request), ("keep", self._keep),
                              ("discard", self._discard), ("rerecord", self._rerecord), ("finish", self._finish)):
            self.create_service(Trigger, f"demo/{name}", self._trigger(name, handler))
        self.create_service(SetBool, "demo/label", self._on_label)
        self.create_timer(1.0, self._report_progress)
        session = f"{self.takes_wanted} take(s)" if self.takes_wanted else "takes until demo/finish"
        self._publish("idle", f"ready: call demo/start to record a {self.spec.name} demonstration ({self.source}, "
                              f"{session})")

    # -- operator services ------------------------------------------------------------------------
    def _trigger(self, name: str, handler):
        def serve(_request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
            with self._lock:
                response.success, response.message = handler()
            self.get_logger().info(f"demo/{name}: {response.message}")
            return response
        return serve

    def _start(self) -> tuple[bool, str]:
        if self.finished.is_set():
            return False, "the session is over"
        if self.state in ("starting", "recording"):
            return False, "already recording; call demo/stop first"
        if self.held is not None:
            return False, f"a stopped take of {len(self.held)} steps waits: call demo/keep or demo/discard first"
        if self.state == "reset":
            return False, "the reset phase is running; the next take starts when it ends"
        if self._estop:
            return False, "the e-stop is latched: release it and call safety/rearm first"
        if self.columns is None:
            return False, "no refine/observation_columns yet: is the bridge (or sim node) running?"
        if self.columns != tuple(self.spec.observation_columns):
            return False, (f"the observation columns on refine/observation_columns are not {self.spec.name}'s "
                           "(another task, or another order)")
        silent = self._silent_input(time.monotonic()) if self.reset_client is None else None
        if silent is not None:
            return False, silent
        self.take = Take(axes=len(self.spec.actions),
                         pause_after=float(self._p("pause_after")) if self.pauses else 0.0)
        self.bag = TakeBag(self.bag_topics) if self.bag_topics else None
        number = len(self.kept)
        if self.reset_client is None:
            self._set("recording", f"recording take {number}: drive on refine/teleop_action (releasing the dead-man "
                                   "button pauses), then call demo/stop")
            return True, self.last_message
        if not self.reset_client.service_is_ready():
            self.take = None
            return False, f"the simulator's {self.reset_client.srv_name} service is not available"
        self._start_after = self._episode_seen
        self.reset_client.call_async(Trigger.Request()).add_done_callback(self._on_reset_answer)
        self._set("starting", f"resetting the simulator; take {number} records its next episode")
        return True, self.last_message

    def _silent_input(self, now: float) -> str | None:
        """Why a take on a robot cannot start now, or None while both of its inputs flow: the
        bridge's observations and the safety node's commands (a stop every tick until the
        operator drives). The bridge announces its columns at start-up, before the driver's
        sensors give it an observation, and a process started beside others may hear them
        seconds later (DDS discovery under load): a take begun then records the operator's
        first moves, and a pause in them, as nothing at all."""
        limit = float(self._p("max_gap"))
        for heard, what, hint in (
                (self._observed_at, "no observation from the robot",
                 "its columns are there, but are the driver's sensors publishing (joint states, TF, the tag or camera)?"),
                (self._commanded_at, f"no command on {self.action_topic_name}",
                 "is the safety node running? (it sends a stop every tick until the operator drives)")):
            if heard is None:
                return f"{what} yet: {hint}"
            if now - heard > limit:
                return f"{what} for {now - heard:.1f} s: {hint}"
        return None

    def _on_reset_answer(self, future) -> None:
        result = future.result() if future.exception() is None else None
        if result is not None and result.success:
            return
        with self._lock:
            if self.state == "starting":
                self.take = None
                why = future.exception() or (result.message if result is not None else "no answer")
                self._set("idle", f"the simulator did not reset: {why}")

    def _stop_request(self) -> tuple[bool, str]:
        if self.state not in ("starting", "recording"):
            return False, f"not recording (state {self.state})"
        return self._stop("stopped by the operator")

    def _stop(self, why: str) -> tuple[bool, str]:
        take, self.take = self.take, None
        take.finish()
        problem = take_problem(take, min_steps=int(self._p("min_steps")), max_gap_s=float(self._p("max_gap")))
        if problem:
            self._set("idle", f"{why}; the take cannot be kept: {problem}")
            return False, self.last_message
        self.held = take
        gaps = take.gaps()
        marks = (f", {len(gaps)} brief sensor gap(s) marked (longest {max(s for _, s in gaps):.2f} s)" if gaps else "")
        paused = f", {take.paused_steps} paused steps left out" if take.paused_steps else ""
        self._set("stopped", f"{why}: {len(take)} steps{paused}{marks}; call demo/keep (store it), demo/discard or "
                             "demo/rerecord; demo/label true/false labels it a success/failure")
        return True, self.last_message

    def _on_label(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        with self._lock:
            take = self.take if self.take is not None else self.held
            if take is None:
                response.success, response.message = False, f"no take to label (state {self.state})"
            else:
                take.success = 1.0 if request.data else 0.0
                response.success = True
                response.message = f"the take is labelled a {'success' if request.data else 'failure'}"
                self._publish(self.state, self.last_message)
        self.get_logger().info(f"demo/label: {response.message}")
        return response

    def _keep(self) -> tuple[bool, str]:
        take = self.held
        if take is None:
            return False, f"no stopped take to keep (state {self.state})"
        note = str(self._p("label")).strip() or None
        try:
            demo = build_demonstration(self.task, take, source=self.source, columns=self.columns, seed=self.seed,
                                       label=note)
            with RunDatabase(self.run_dir) as db:
                run_id, number = save_take(db, demo)
                where = db.path
        except (DemonstrationError, RunDatabaseError, OSError, ValueError) as exc:
            return False, f"the take was not stored (it is still held): {exc}"
        self.held = None
        self.kept.append((number, demo.steps))
        bag, self.bag = self.bag, None
        if bag is not None:
            try:
                path = bag.write(self.run_dir / "takes" / f"take_{number}.mcap",
                                 {"run_id": str(run_id), "take": str(number), "source": self.source})
                counts = ", ".join(f"{n} on {t}" for t, n in bag.counts().items()) or "no messages"
                where = f"{where}; driver topics in {path} ({counts})"
            except Exception as exc:  # noqa: BLE001 - the take is stored; say what went wrong with its bag
                where = f"{where}; its driver topics could not be written: {exc}"
        self.outcome = (f"stored {len(self.kept)} take(s) ({sum(n for _, n in self.kept)} steps) of {self.source} as "
                        f"run {run_id}'s demonstration in {where}")
        kept = f"kept take {number} ({demo.steps} steps) in {where}"
        if self.takes_wanted and len(self.kept) >= self.takes_wanted:
            self._end_session(kept)
        else:
            self._reset_phase(kept, restart=bool(self._p("auto_start")))
        return True, kept

    def _discard(self) -> tuple[bool, str]:
        take = self.held
        if take is None:
            return False, f"no stopped take to discard (state {self.state}; demo/rerecord drops a running one)"
        self.held = self.bag = None
        message = f"discarded the take of {len(take)} steps; nothing was written"
        self._reset_phase(message, restart=bool(self._p("auto_start")))
        return True, message

    def _rerecord(self) -> tuple[bool, str]:
        take = self.take if self.take is not None else self.held
        if take is None:
            return False, f"no take to record again (state {self.state})"
        self.take = self.held = self.bag = None
        message = f"dropped the take ({len(take)} steps, nothing written); recording it again"
        self._reset_phase(message, restart=True)
        return True, message

    def _finish(self) -> tuple[bool, str]:
        if self.state in ("starting", "recording") or self.held is not None:
            return False, "a take is running or held: stop it and keep or discard it first"
        self._end_session("the operator ended the session")
        return True, self.last_message

    def _end_session(self, why: str) -> None:
        self._cancel_reset()
        self.finished.set()
        self._set("finished", f"{why}; {self.outcome}")

    def _reset_phase(self, why: str, *, restart: bool) -> None:
        """The timed pause between takes in which the operator puts the scene back."""
        self._cancel_reset()
        seconds = float(self._p("reset_time"))
        self._restart_after_reset = restart
        then = "the next take starts by itself" if restart else "then call demo/start"
        self._set("reset", f"{why}; reset the scene: {seconds:g} s, {then}", reset_s=seconds)
        self._reset_timer = self.create_timer(max(seconds, 1e-3), self._on_reset_over)

    def _cancel_reset(self) -> None:
        if self._reset_timer is not None:
            self._reset_timer.cancel()
            self.destroy_timer(self._reset_timer)
            self._reset_timer = None

    def _on_reset_over(self) -> None:
        with self._lock:
            self._cancel_reset()
            if self.state != "reset":
                return
            self._set("idle", "the reset phase is over")
            if self._restart_after_reset:
                ok, message = self._start()
                if not ok:
                    self._set("idle", f"the reset phase is over; the next take did not start: {message}")
            else:
                self._set("idle", "the reset phase is over: call demo/start for the next take")
        self.get_logger().info(self.last_message)

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
            self._observed_at = now
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

    def _on_bag_message(self, topic: str, data: bytes) -> None:
        now = self.get_clock().now().nanoseconds
        with self._lock:
            if self.bag is not None and self.state == "recording":
                self.bag.add(topic, now, data)

    def _on_teleop(self, _msg: Float64MultiArray) -> None:
        now = time.monotonic()
        with self._lock:
            if self.take is not None:
                self.take.on_teleop(now)

    def _on_action(self, msg: Float64MultiArray) -> None:
        try:
            vec = unpack_vector(msg)
        except ValueError:
            return
        with self._lock:
            self._commanded_at = time.monotonic()
            if self.state == "recording" and self.take is not None:
                self.take.on_action(vec.values, stop=stop_label(msg.layout.dim[0].label if msg.layout.dim else ""))

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

    def _report_progress(self) -> None:
        """A take's length is its steps, not its seconds: a driver or an executor held up for a
        moment gives a take of a few seconds only a handful. Once a second while a take records,
        the status goes out again with its step count, so the operator (or a script driving the
        recorder) holds on until the take is long enough instead of for a guessed time."""
        with self._lock:
            if self.state == "recording" and self.take is not None:
                self._publish(self.state, self.last_message)

    # -- helpers ----------------------------------------------------------------------------------
    def _p(self, name: str) -> Any:
        return self.get_parameter(name).value

    def _set(self, state: str, message: str, **extra: Any) -> None:
        self._publish(state, message, **extra)

    def _publish(self, state: str, message: str, **extra: Any) -> None:
        self.state, self.last_message = state, message
        take = self.take if self.take is not None else self.held
        self.pub_status.publish(pack_json({
            "state": state, "message": message, "steps": 0 if take is None else len(take),
            "paused_steps": 0 if take is None else take.paused_steps,
            "success": None if take is None or take.success != take.success else take.success,
            "kept": [number for number, _ in self.kept], "source": self.source, "task": self.spec.name, **extra}))


def main(args: list[str] | None = None) -> None:
    """Ends once the session is over (as `refine up` does), so `ros2 launch` of a record_demo
    profile ends with it; the linger lets the latched demo/status reach late readers."""
    run_node(DemoRecorder, args, until=lambda node: node.finished.is_set(), linger=1.0)


if __name__ == "__main__":
    main()
