"""Learner node: fits the programs the analysis node sends, and runs fitted policies at the
control rate for the episodes it asks for.

Why it is built this way:
- The control path (`refine_ros.loop.control_path`) is two subscription callbacks: observation in,
  one forward pass, action and policy step out; a reward in. They never wait.
- Work arrives as three actions (`learner/fit_program`, `learner/run_rollout`, `learner/run_rl`,
  see `refine_ros.wire.protocol`), so a person can send, watch and cancel it with `ros2 action`.
  Accepted goals are queued and handled one at a time on a worker thread: fitting (in the
  sandbox, `refine_core.backends.LocalFitter`, the very fitter `refine run` uses) and driving
  episodes (`refine_ros.loop.round_driver`) both block, and must never stall the executor. The
  worker publishes feedback (fit epochs; rollout phase and episodes done) and, when the work
  is over, hands the result to the action server's execute callback, which only reports it.
  A goal is ACCEPTED while it waits and while it runs, EXECUTING only for that hand-over.
- Cancelling a fit kills its sandbox within a quarter second; cancelling a rollout ends the
  running episode (recorded as incomplete) and skips the rest; cancelling RL does the same to
  its running episode and ends the run before its next update.
- RL (`learner/run_rl`) drives its episodes through the same round driver and control path as
  a rollout (`refine_ros.loop.rl_episodes`): on a robot every one of them waits for the
  operator's confirmation, so RL's resets are operator resets; its updates run on the worker
  thread between episodes, never on the control path. Feedback after every episode and update.
  A robot publishes no reward: RL there learns from the task's metric when the task measures it
  from its observations (the door), and is refused before the first operator reset otherwise.
- One single-threaded executor spins the node: nothing busy-waits (an async execute callback
  awaiting the worker would be re-polled on every spin), so the control callbacks never queue
  behind a spinning thread for the GIL.
- Episode counters are unique within the run (`protocol.episode_counter`), so the logger never
  joins two episodes whose messages are still in flight, and a late message can never produce
  an action for the wrong episode. A round may take several goals (RL's episodes, then the
  rollout that evaluates its result): each goal's episodes continue the positions of the
  round's earlier ones.
- On a robot (`reset_service: ''`) an episode starts with its start event and ends after its
  step budget; with `wait_for_confirmation` it begins only once the safety node reports the
  operator's `safety/confirm_episode` (statuses received after the wait began count).
- An episode with no observations for `observation_timeout` fails; on a robot its error says
  which input the bridge withheld them for (the bridge's latest `bridge/status`).
- A robot's learner (`robot` set) never fits a demonstration it was not given on that robot:
  it refuses to start without a `teleop (<robot>)` demonstration in the run directory, and its
  fitter refuses any other source (the simulated expert above all).

Topics and QoS: docs/ROS_INTERFACES.md.
"""

from __future__ import annotations

import dataclasses
import json
import queue
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter as ParameterMsg
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from refine_core.backends import LocalFitter, check_demonstration
from refine_core.policy.contract import validate_policy
from refine_core.rollout.demo import Demonstration, DemonstrationError, teleop_source
from refine_core.rollout.plan import PlannedEpisode
from refine_core.sandbox.fit import FIT_VALIDATION_S
from refine_core.store.db import RunDatabase, RunDatabaseError
from refine_core.tasks.registry import get_task, task_names
from refine_ros.bringup.spin import destroy_actions, wait_for_listeners
from refine_ros.loop.control_path import ActiveEpisode, PolicyRunner
from refine_ros.loop.round_driver import RoundDriver
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.teleop.recording import how_to_record
from refine_ros.wire import protocol, qos
from refine_ros.wire.adapters import observation_from_values
from refine_ros.wire.messages import pack_json, pack_step, pack_vector, unpack_vector
from refine_ros_interfaces.action import FitProgram, RunRl, RunRollout
from refine_ros_interfaces.msg import Step

SHUTDOWN_WAIT_S = 2.0
"""How long destroy_node waits for the request thread (`ros2 launch` escalates after 5 s)."""

PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())})"),
    "run_dir": Param("runs/ros", "run directory; the demonstration is read from <run_dir>/run.db"),
    "fit_timeout": Param(600.0, "seconds one sandboxed fit may take", (1.0, 86400.0)),
    "episode_timeout": Param(300.0, "seconds one episode may take before it is recorded as failed",
                             (1.0, 86400.0)),
    "observation_timeout": Param(0.0, "seconds without an observation after which a running episode is "
                                 "recorded as failed (a robot's sensor went silent); 0: off", (0.0, 86400.0)),
    "episode_steps": Param(0, "steps of a live episode on a robot, as its owner sets it (0: the task's own length, "
                           "the simulator's); a step cap (max_steps) still shortens it", (0, 1_000_000)),
    "sim_node": Param("sim_node", "node whose seed/episode/max_steps parameters are set before each reset; "
                      "'' = none (real robot)"),
    "reset_service": Param("sim/reset", "Trigger service that starts an episode; '' = none (real robot: the "
                           "episode starts with its start event and ends after its step budget)"),
    "wait_for_confirmation": Param(False, "before each episode wait until safety/status reports the operator's "
                                   "safety/confirm_episode (real robots)"),
    "confirmation_timeout": Param(600.0, "seconds to wait for the operator's confirmation before the episode "
                                  "is recorded as failed", (1.0, 86400.0)),
    "robot": Param("", "the robot this learner drives ('' = a simulator: any demonstration); a robot's learner "
                   "fits only a demonstration teleoperated on it and refuses to start without one"),
    "listeners": Param(["rollout_logger"], "nodes that must hear every action and policy step: before a round or "
                       "an RL goal the learner waits (up to listener_timeout, then warns and goes on) until each "
                       "has a matched subscription, since a message sent earlier is lost to it; [''] = none"),
    "listener_timeout": Param(10.0, "seconds to wait for the listeners before a round", (0.0, 3600.0)),
    "fit_validation_timeout": Param(FIT_VALIDATION_S, "CPU seconds a fit's validation phase (build, contract "
                                    "check, first epochs) may use, and six times as many by the clock: a forward "
                                    "that never returns is refused within it",
                                    (1.0, 3600.0)),
}


class LearnerNode(Node):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("learner_node", **kwargs)
        declare_parameters(self, PARAMETERS)
        p = values(self, PARAMETERS)
        self.task = get_task(str(p["task"]))
        self.spec = self.task.spec
        self.run_dir = Path(str(p["run_dir"]))
        self.robot = str(p["robot"]).strip()
        source = teleop_source(self.robot) if self.robot else None
        if source is not None:
            with refusing(self):
                self._require_demonstration(source)
        self.fitter = LocalFitter(self.task, timeout_s=float(p["fit_timeout"]),
                                  validation_s=float(p["fit_validation_timeout"]), source=source)
        self.confirmation_timeout = float(p["confirmation_timeout"])
        self.wait_for_confirmation = bool(p["wait_for_confirmation"])
        self.listeners = [name.strip() for name in p["listeners"] if name.strip()]
        self.listener_timeout = float(p["listener_timeout"])
        reset, sim = str(p["reset_service"]).strip(), str(p["sim_node"]).strip("/")

        group = ReentrantCallbackGroup()  # service futures complete while a control callback runs
        self.pub_action = self.create_publisher(Float64MultiArray, "refine/action", qos.CONTROL)
        self.pub_step = self.create_publisher(Step, "refine/policy_step", qos.CONTROL)
        self.pub_columns = self.create_publisher(String, "refine/policy_step_columns", qos.LATCHED)
        self.pub_events = self.create_publisher(String, "refine/episode_events", qos.LATCHED)
        self.create_subscription(Step, "refine/observation", self._on_observation, qos.CONTROL)
        self.create_subscription(Step, "refine/reward", self._on_reward, qos.CONTROL)
        self._actions = [
            ActionServer(self, action, name, execute_callback=self._report, goal_callback=self._on_goal,
                         handle_accepted_callback=lambda handle, kind=kind: self._inbox.put((kind, handle)),
                         cancel_callback=self._on_cancel, callback_group=group)
            for kind, action, name in (("fit", FitProgram, protocol.FIT_ACTION),
                                       ("rollout", RunRollout, protocol.ROLLOUT_ACTION),
                                       ("rl", RunRl, protocol.RL_ACTION))]
        self.reset_client = self.create_client(Trigger, reset, callback_group=group) if reset else None
        self.param_client = (self.create_client(SetParameters, f"{sim}/set_parameters", callback_group=group)
                             if sim else None)
        self._confirmed = threading.Event()
        self._watching_status = False
        self.safety_state = "no safety/status received yet"
        if self.wait_for_confirmation:
            self.create_subscription(DiagnosticArray, "safety/status", self._on_safety_status, qos.STATE)
        self.bridge_withholds: str | None = None
        """What the robot's bridge last said keeps its observations back (None: they flow)."""
        if not reset:
            self.create_subscription(DiagnosticArray, "bridge/status", self._on_bridge_status, qos.LATCHED)

        self.driver = RoundDriver(self.task, self, float(p["episode_timeout"]), step_budget_ends=reset == "",
                                  observation_timeout_s=float(p["observation_timeout"]),
                                  episode_steps=int(p["episode_steps"]), log=self.get_logger().info)
        self.active: ActiveEpisode | None = None
        self.bad_messages = 0
        self._positions: dict[tuple[int, int], int] = {}
        """Per (run, round), the next episode position: where that round's next goal starts."""
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._cancels: dict[bytes, threading.Event] = {}
        self._results: dict[bytes, tuple[Any, str]] = {}
        self._progress = _no_progress
        self._current_goal = b""
        self._closing = threading.Event()
        self._stop: Any = self._closing
        """What ends the work in hand: the node's shutdown, or during a rollout that or its cancel."""
        self._thread = threading.Thread(target=self._work, name="learner-requests", daemon=True)
        self._thread.start()
        self.get_logger().info(f"learner for {self.spec.name} ready; waiting for {protocol.FIT_ACTION} goals")

    def _require_demonstration(self, source: str) -> None:
        """A robot is only ever fitted to a demonstration recorded on it: without one in the run
        directory the learner does not start, and says how to record one."""
        how = f"record one first: {how_to_record(self.robot, self.run_dir)}"
        try:
            with RunDatabase(self.run_dir, create=False) as db:
                run = db.latest_run()
                demo = None if run is None else Demonstration.load(db, int(run["id"]))
        except (RunDatabaseError, DemonstrationError):
            demo = None
        if demo is None:
            raise StartRefused(f"learner_node: no demonstration recorded on {self.robot} in {self.run_dir}; {how}")
        problem = check_demonstration(self.task, demo, source)
        if problem:
            raise StartRefused(f"learner_node: {problem} ({self.run_dir}); {how}")

    # -- control path ---------------------------------------------------------------------------
    def _on_observation(self, msg: Step) -> None:
        active = self.active
        if active is None:
            return
        try:
            vec = unpack_vector(msg)
            obs = observation_from_values(self.spec, vec.values)
        except ValueError:
            self.bad_messages += 1
            return
        answer = active.on_observation(vec.episode, vec.step, obs)
        if answer is None:
            return
        act, step_values = answer
        self.pub_action.publish(pack_vector(vec.episode, vec.step, act.tolist(), "action"))
        self.pub_step.publish(pack_step(vec.episode, vec.step, active.runner.columns, step_values,
                                        self.get_clock().now().to_msg()))

    def _on_reward(self, msg: Step) -> None:
        active = self.active
        if active is None:
            return
        try:
            vec = unpack_vector(msg)
        except ValueError:
            self.bad_messages += 1
            return
        active.on_reward(vec.episode, vec.step, vec.values)

    def _on_safety_status(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            fields = {kv.key: kv.value for kv in status.values}
            if "confirm_pending" not in fields:
                continue
            self.safety_state = fields.get("state", status.message)
            if self._watching_status and fields["confirm_pending"] == "True":
                self._confirmed.set()

    def _on_bridge_status(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            self.bridge_withholds = status.message if status.level != status.OK else None

    def why_silent(self) -> str | None:
        return self.bridge_withholds

    # -- goals: accepted and cancelled on the executor, worked on the worker thread ----------------
    def _on_goal(self, _goal: Any) -> GoalResponse:
        return GoalResponse.REJECT if self._closing.is_set() else GoalResponse.ACCEPT

    def _on_cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        """Cancelling sets the goal's event: the sandboxed fit is killed, the running episode
        ends as incomplete, the rest of the plan is skipped; a queued goal never starts."""
        self._cancel_event(handle).set()
        if self._current_goal == bytes(handle.goal_id.uuid):
            self._confirmed.set()  # an operator wait ends too
            active = self.active
            if active is not None:
                active.fail("the rollout goal was cancelled")
        return CancelResponse.ACCEPT

    def _cancel_event(self, handle: ServerGoalHandle) -> threading.Event:
        return self._cancels.setdefault(bytes(handle.goal_id.uuid), threading.Event())

    def _report(self, handle: ServerGoalHandle) -> Any:
        """The execute callback: the worker has done the work; set the final state, return it."""
        result, state = self._results.pop(bytes(handle.goal_id.uuid))
        if state == "canceled" and handle.is_cancel_requested:
            handle.canceled()
        elif state == "abort":
            handle.abort()
        else:
            handle.succeed()
        return result

    def _work(self) -> None:
        while not self._closing.is_set():
            try:
                kind, handle = self._inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            key, cancel = bytes(handle.goal_id.uuid), self._cancel_event(handle)
            try:
                if cancel.is_set():
                    result = _refused(kind, "cancelled before it started")
                else:
                    work = {"fit": self._fit, "rollout": self._rollout, "rl": self._rl}[kind]
                    result = work(handle, cancel)
                # a fit that finished before its cancel took effect is kept (CANCELING -> SUCCEEDED)
                state = "canceled" if cancel.is_set() and (kind != "fit" or result.error) else "succeed"
            except protocol.ProtocolError as exc:
                self.get_logger().error(f"refused a malformed {kind} goal: {exc}")
                result, state = _refused(kind, f"malformed goal: {exc}"), "abort"
            except Exception:  # keep serving; say exactly what broke
                if self._closing.is_set():
                    return  # the node is gone under this thread: nothing to answer, nobody to tell
                self.get_logger().error(f"{kind} goal failed:\n{traceback.format_exc()}")
                result, state = _refused(kind, traceback.format_exc(limit=-1).strip()), "abort"
            if result is None or self._closing.is_set():  # an interrupted round has no answer: the run resumes it
                return
            self._results[key] = (result, state)
            self._cancels.pop(key, None)
            handle.execute()  # the action server calls _report on the executor

    def _fit(self, handle: ServerGoalHandle, cancel: threading.Event) -> Any:
        goal, started = handle.request, time.monotonic()
        self.get_logger().info(f"fitting a program on run {goal.run_id}'s demonstration")

        def feedback(epoch: int, most: int) -> None:
            handle.publish_feedback(FitProgram.Feedback(epoch=epoch, max_epochs=most,
                                                        elapsed=time.monotonic() - started))

        try:
            with RunDatabase(self.run_dir) as db:
                demo = Demonstration.load(db, int(goal.run_id))
            outcome = self.fitter.fit(goal.program, demo, on_epoch=feedback, cancel=cancel)
        except Exception as exc:  # noqa: BLE001 - a missing demonstration or a sandbox failure is an answer
            return protocol.fit_result(error=f"{type(exc).__name__}: {exc}")
        if outcome.failed:
            self.get_logger().warning(f"fit failed: {outcome.error}")
        return protocol.fit_result(error=outcome.error, bundle=outcome.bundle, report=outcome.report,
                                   info=outcome.info_schema)

    def _rollout(self, handle: ServerGoalHandle, cancel: threading.Event) -> Any:
        request = protocol.read_rollout_goal(handle.request)
        plan = request["plan"]
        try:
            bundle = protocol.decode_bundle(request["bundle"])
            keys = validate_policy(bundle.build(self.spec), self.spec).keys  # the source is checked again here
            runner = PolicyRunner(self.task, bundle, keys, mode=request["mode"])
        except Exception as exc:  # noqa: BLE001 - every planned episode fails with the reason
            error = f"the policy could not be built here: {type(exc).__name__}: {exc}"
            return protocol.rollout_result([_never_ran(p, error) for p in plan])
        self.pub_columns.publish(pack_json(runner.columns))
        self._await_listeners(f"round {request['round']}")
        self.get_logger().info(f"round {request['round']}: {len(plan)} episodes")
        done_so_far = [0]

        def feedback(phase: str, done: int | None, planned: PlannedEpisode) -> None:
            done_so_far[0] = done_so_far[0] if done is None else done
            handle.publish_feedback(RunRollout.Feedback(
                phase=protocol.PHASES.index(phase), episodes_done=done_so_far[0], episodes_planned=len(plan),
                current=protocol.planned_message(planned)))

        self._progress, self._current_goal = feedback, bytes(handle.goal_id.uuid)
        self._stop = _AnyOf(cancel, self._closing)
        where = (request["run_id"], request["round"])
        request["first_position"] = self._positions.get(where, 0)
        try:
            episodes, control = self.driver.run(request, runner, self._activate, self._stop, progress=feedback)
        finally:
            self._progress, self._current_goal, self._stop = _no_progress, b"", self._closing
        self._positions[where] = request["first_position"] + len(episodes)
        if self._closing.is_set():
            self.get_logger().info(f"round {request['round']} interrupted; not answered")
            return None
        skipped = [_never_ran(p, "skipped: the rollout goal was cancelled") for p in plan[len(episodes):]]
        return protocol.rollout_result(episodes + skipped, control)

    def _rl(self, handle: ServerGoalHandle, cancel: threading.Event) -> Any:
        """Post-refinement RL with this learner's episodes (`refine_ros.loop.rl_episodes`);
        the result holds the kept weights, also when cancelled."""
        from refine_core.learn.rl import train_rl
        from refine_core.policy.bundle import PolicyBundle
        from refine_ros.loop.rl_episodes import (
            DriverSampler,
            DriverScorer,
            EpisodeSource,
            RlEpisodeError,
        )

        request = protocol.read_rl_goal(handle.request, self.spec.rl_settings)
        config = request["config"]
        if self.reset_client is None and not self.task.metric_from_observations:  # said before any operator reset
            return protocol.rl_result(error=f"RL needs a reward: a robot publishes none, and {self.spec.name}'s "
                                            f"metric ({self.spec.metric.name}) is not measured from its observations")
        if config.max_steps is None and self.driver.episode_steps:  # RL's episodes are this robot's episodes
            config = dataclasses.replace(config, max_steps=self.driver.episode_steps)
        try:
            bundle = protocol.decode_bundle(request["bundle"])
            policy = bundle.build(self.spec)
            validate_policy(policy, self.spec)
        except Exception as exc:  # noqa: BLE001 - a policy that cannot be built is an answer
            return protocol.rl_result(error=f"the policy could not be built here: {type(exc).__name__}: {exc}")
        planned = config.reset_budget // config.group_size * config.group_size + config.planned_selection_resets
        state = {"phase": "sampling", "update": 0, "record": ""}
        started = time.monotonic()

        def publish(phase: str | None = None) -> None:
            handle.publish_feedback(RunRl.Feedback(
                phase=protocol.RL_PHASES.index(phase or state["phase"]), update=state["update"],
                updates_planned=config.total_updates, resets_done=source.position - first, resets_planned=planned,
                record_json=state["record"]))

        def episode_phase(phase: str, _done: int | None, _planned: PlannedEpisode) -> None:
            publish("waiting_for_operator" if phase == "waiting_for_operator" else None)

        self._await_listeners("RL")
        stop = _AnyOf(cancel, self._closing)
        where = (request["run_id"], request["round"])
        first = self._positions.get(where, 0)
        source = EpisodeSource(self.task, self.driver, self._activate, stop, *where, progress=episode_phase,
                               position=first)
        sample, score = DriverSampler(source), DriverScorer(source)

        def sampler(*args: Any) -> Any:
            state["phase"] = "sampling"
            group = sample(*args)
            state["phase"] = "updating"
            publish()
            return group

        def scorer(*args: Any) -> dict:
            state["phase"] = "selecting"
            publish()
            return score(*args)

        def on_update(record: dict) -> None:
            state["update"] = int(record["update"])
            state["record"] = json.dumps({k: v for k, v in record.items() if k != "params"}, default=float)
            publish()

        self.get_logger().info(f"RL on run {request['run_id']}: {config.reset_budget} resets, "
                               f"{config.preset_name(self.spec.rl_settings)} settings ({'; '.join(config.departures()) or 'as published'})")
        self._progress, self._current_goal, self._stop = episode_phase, bytes(handle.goal_id.uuid), stop
        try:
            report = train_rl(self.task, policy, config, progress=False, on_update=on_update, sampler=sampler,
                              scorer=scorer, stop=stop)
        except RlEpisodeError as exc:
            return protocol.rl_result(error=str(exc))
        finally:
            self._progress, self._current_goal, self._stop = _no_progress, b"", self._closing
            self._positions[where] = source.position
        if self._closing.is_set():
            return None
        self.get_logger().info(f"RL done in {time.monotonic() - started:.0f} s: {report.resets} training and "
                               f"{report.selection_resets} selection episodes; {report.describe_checkpoint()}")
        return protocol.rl_result(error=None, report=report.to_dict(),
                                  bundle=PolicyBundle.from_module(bundle.source, policy))

    def _await_listeners(self, what: str) -> None:
        """The logger must hear a round's first action: a volatile message sent before its
        subscription matched ours is lost to it, and the run database would show a gap."""
        if not self.listeners:
            return
        missing = wait_for_listeners(self, (self.pub_action, self.pub_step), self.listeners,
                                     self.listener_timeout, self._closing)
        if missing:
            self.get_logger().warning(f"{what}: going on after {self.listener_timeout:g} s without every "
                                      f"listener ({missing}); the logger records what it misses as gaps")

    def _activate(self, episode: ActiveEpisode | None) -> None:
        self.active = episode

    # -- the Robot interface the round driver uses ---------------------------------------------------
    def await_confirmation(self, planned: PlannedEpisode, round_: int) -> str | None:
        if not self.wait_for_confirmation:
            return None
        self._confirmed.clear()
        self._watching_status = True
        self._progress("waiting_for_operator", None, planned)
        try:
            self.get_logger().info(
                f"round {round_}: waiting for the operator to confirm {planned.kind} episode {planned.index} "
                f"(seed {planned.seed}): reset the scene, then call safety/confirm_episode "
                f"(std_srvs/Trigger); safety state: {self.safety_state}")
            deadline = time.monotonic() + self.confirmation_timeout
            while not self._confirmed.is_set():
                left = deadline - time.monotonic()
                if self._closing.is_set():
                    return "the learner is shutting down"
                if self._stop.is_set():
                    return "the rollout goal was cancelled"
                if left <= 0:
                    return (f"the operator did not confirm within {self.confirmation_timeout:g} s "
                            f"(safety state: {self.safety_state})")
                if not self._confirmed.wait(min(left, 30.0)) and left > 30.0:
                    self.get_logger().info(f"still waiting for safety/confirm_episode ({self.safety_state})")
            if self._closing.is_set():
                return "the learner is shutting down"
            return "the rollout goal was cancelled" if self._stop.is_set() else None
        finally:
            self._watching_status = False

    def prepare(self, planned: PlannedEpisode, counter: int, limit: int, expert_labels: bool) -> str | None:
        """Seed, episode counter, episode length and whether the sim relabels states with its
        expert, for the next reset, in one request."""
        if self.param_client is None:
            return None
        request = SetParameters.Request()
        request.parameters = [
            ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=v))
            for name, v in (("seed", planned.seed), ("episode", counter), ("max_steps", limit))]
        request.parameters.append(ParameterMsg(name="publish_expert", value=ParameterValue(
            type=ParameterType.PARAMETER_BOOL, bool_value=bool(expert_labels))))
        result, error = self._call(self.param_client, request, "set the sim parameters")
        if error:
            return error
        refused = [f"{p.name}: {r.reason}" for p, r in zip(request.parameters, result.results, strict=False)
                   if not r.successful]
        return f"the sim node refused {', '.join(refused)}" if refused else None

    def start(self) -> str | None:
        if self.reset_client is None:
            return None  # a robot: the start event opens the episode at the bridge
        result, error = self._call(self.reset_client, Trigger.Request(), "reset the sim")
        if error:
            return error
        return None if result.success else f"sim/reset failed: {result.message}"

    def announce(self, event: dict[str, Any]) -> None:
        self.pub_events.publish(String(data=json.dumps(event, default=float)))

    def _call(self, client, request, what: str) -> tuple[Any, str | None]:
        if not client.wait_for_service(timeout_sec=10.0):
            self.get_logger().warning(f"{what}: service {client.srv_name} not available within 10 s")
            return None, f"{what}: service {client.srv_name} not available"
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(30.0):
            self.get_logger().warning(f"{what}: no answer from {client.srv_name} within 30 s")
            return None, f"{what}: no answer from {client.srv_name} within 30 s"
        if future.exception() is not None:
            return None, f"{what}: {future.exception()}"
        return future.result(), None

    # -- shutdown --------------------------------------------------------------------------------------
    def destroy_node(self) -> None:
        self._closing.set()
        self._confirmed.set()
        for cancel in list(self._cancels.values()):
            cancel.set()
        active = self.active
        if active is not None:
            active.fail("the learner is shutting down")
        self._thread.join(SHUTDOWN_WAIT_S)  # a sandboxed fit is left to die with this process
        destroy_actions(self)
        super().destroy_node()


def _never_ran(planned: PlannedEpisode, error: str) -> dict:
    return {"kind": planned.kind, "index": planned.index, "seed": planned.seed, "steps": 0, "error": error,
            "summary": {"return": 0.0, "metric": float("nan"), "success": 0.0}}


def _refused(kind: str, why: str) -> Any:
    """The result of a goal that was not worked on: a fit carries the reason (the analyst reads
    it); a rollout has no episodes, and its ABORTED status says enough."""
    if kind == "rl":
        return protocol.rl_result(error=why)
    return protocol.fit_result(error=why) if kind == "fit" else RunRollout.Result()


def _no_progress(phase: str, done: int | None, planned: PlannedEpisode) -> None:
    pass


class _AnyOf:
    """Set when any of its events is set: what the round driver checks between episodes."""

    def __init__(self, *events: threading.Event) -> None:
        self.events = events

    def is_set(self) -> bool:
        return any(event.is_set() for event in self.events)


def main(args: list[str] | None = None) -> None:
    run_node(LearnerNode, args)


if __name__ == "__main__":
    main()
