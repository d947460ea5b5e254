"""Learner node: fits each new program on the demonstration and drives the round's episodes.

Why it is built this way:
- The control path is one subscription callback in its own callback group: observation in,
  one forward pass, action and policy step out. Nothing else runs in it (no fitting, no
  database, no waiting), so the action latency is the forward pass plus DDS.
- The round is orchestrated by a plain thread that blocks on events and service futures (set
  the sim's `seed`, call `sim/reset`, wait for the episode's last reward). Executor callbacks
  never block, so the executor keeps serving the control path while a round is in flight.
- Fitting runs in the same orchestration thread through `stages.fit_once` (static check, fit
  in the sandbox, rebuild here), the very function `refine run` uses; the result goes to the
  analysis node on `refine/fit_result` (weights as a base64 npz bundle, never a pickle).
- The learner numbers the episodes: before each reset it sets the sim node's `seed`,
  `episode` (a counter unique within the run, so the logger can never merge two episodes
  whose messages are still in flight) and `max_steps` parameters, and announces the episode on
  `refine/episode_events` with its round, kind, seed and `index` (its number within the kind,
  the `episode` column `refine run` writes). The episode ends with the sim's done flag on
  `refine/reward`; on a real robot (`reset_service: ''`) after `max_steps` actions.
- Control-path messages of an episode other than the current one, or older than its last
  step, are dropped: a late message can never produce an action.
- On a robot (`wait_for_confirmation: true`) each episode begins only once the safety node
  reports a pending operator confirmation (`confirm_pending` in its `safety/status`
  diagnostics, set by `safety/confirm_episode`): the learner blocks on an event the status
  callback sets, so no step of the budget is spent while the safety node holds the robot.
  Only statuses received after the wait began count, so the confirmation the previous episode
  consumed never starts the next one.

Topics and QoS: docs/ROS_INTERFACES.md (plus `refine/fit_result`, LATCHED, and, with
`wait_for_confirmation`, a `safety/status` subscription, STATE).
"""

from __future__ import annotations

import json
import queue
import threading
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import (
    Parameter as ParameterMsg,
)
from rcl_interfaces.msg import ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from refine_core import stages
from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.contract import validate_policy
from refine_core.rollout.demo import Demonstration
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task
from refine_ros import qos
from refine_ros.adapters import observation_from_values
from refine_ros.messages import pack_json, pack_vector, unpack_vector
from refine_ros.nodes._main import run_node
from refine_ros.params import Bounds, declare_parameters
from refine_ros.round_protocol import (
    EpisodeLog,
    PlannedEpisode,
    PolicyRunner,
    ProtocolError,
    decode_bundle,
    episode_plan,
    fit_payload,
    parse_program,
    round_counter_base,
    round_payload,
)

PARAMETERS: dict[str, tuple[Any, str, Bounds]] = {
    "task": ("door_open", "task name (door_open | car_racing)", None),
    "run_dir": ("runs/ros", "run directory; the demonstration is read from <run_dir>/run.db", None),
    "rounds": (6, "refinement rounds (informational: the analysis node decides when to stop)", (1, 1000)),
    "episodes": (2, "diagnostic episodes per round (the table the diagnostics read)", (0, 100)),
    "selection_episodes": (3, "selection episodes per round (pick the best round)", (0, 100)),
    "eval_episodes": (10, "evaluation episodes per round (reported only)", (0, 100)),
    "action_mode": ("mean", "mean: execute the Gaussian's mean; sample: draw from it", None),
    "max_steps": (0, "cap on episode length; 0 = the task's episode length", (0, 100000)),
    "fit_timeout": (600.0, "seconds one sandboxed fit may take", (1.0, 86400.0)),
    "episode_timeout": (300.0, "seconds one episode may take before it is recorded as failed", (1.0, 86400.0)),
    "sim_node": ("sim_node", "node whose seed/episode/max_steps parameters are set before each reset; "
                 "'' = none (real robot)", None),
    "reset_service": ("sim/reset", "Trigger service that starts an episode; '' = none (real robot: the episode "
                      "starts with its start event and ends after max_steps actions)", None),
    "wait_for_confirmation": (False, "before each episode wait until safety/status reports the operator's "
                              "safety/confirm_episode (real robots)", None),
    "confirmation_timeout": (600.0, "seconds to wait for the operator's confirmation before the episode is "
                             "recorded as failed", (1.0, 86400.0)),
}
ACTION_MODES = ("mean", "sample")


@dataclass
class _Active:
    """The episode being driven; touched by the control callbacks and, after its events fire,
    by the orchestration thread."""

    planned: PlannedEpisode
    round: int
    run_id: int
    limit: int
    log: EpisodeLog
    counter: int
    last_step: int = -1
    rewarded: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    last_reward_step: int | None = None


class LearnerNode(Node):
    """Holds the current program and its fitted weights; runs them at the control rate."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("learner_node", **kwargs)
        declare_parameters(self, PARAMETERS, read_only=True)
        value = lambda name: self.get_parameter(name).value  # noqa: E731
        self.task = get_task(str(value("task")))
        self.spec = self.task.spec
        mode = str(value("action_mode"))
        if mode not in ACTION_MODES:
            raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {mode!r}")
        self.run_dir = Path(str(value("run_dir")))
        max_steps = int(value("max_steps"))
        self.limit = min(max_steps, self.spec.episode_steps) if max_steps > 0 else self.spec.episode_steps
        self.config = stages.LoopConfig(
            diagnostic_episodes=int(value("episodes")), selection_episodes=int(value("selection_episodes")),
            eval_episodes=int(value("eval_episodes")), action_mode=mode,
            fit_timeout_s=float(value("fit_timeout")), max_steps=self.limit, verbose=False,
        )
        self.episode_timeout = float(value("episode_timeout"))
        self.plan = episode_plan(self.spec, self.config.diagnostic_episodes, self.config.selection_episodes,
                                 self.config.eval_episodes)

        # control path: its own group, so nothing else ever waits in line before it
        control = MutuallyExclusiveCallbackGroup()
        other = ReentrantCallbackGroup()
        self.pub_action = self.create_publisher(Float64MultiArray, "refine/action", qos.COMMAND)
        self.pub_step = self.create_publisher(Float64MultiArray, "refine/policy_step", qos.STATE)
        self.pub_columns = self.create_publisher(String, "refine/policy_step_columns", qos.LATCHED)
        self.pub_events = self.create_publisher(String, "refine/episode_events", qos.LATCHED)
        self.pub_round = self.create_publisher(String, "refine/round_complete", qos.LATCHED)
        self.pub_fit = self.create_publisher(String, "refine/fit_result", qos.LATCHED)
        self.create_subscription(Float64MultiArray, "refine/observation", self._on_observation, qos.STATE,
                                 callback_group=control)
        self.create_subscription(Float64MultiArray, "refine/reward", self._on_reward, qos.LOG,
                                 callback_group=control)
        self.create_subscription(String, "refine/program", self._on_program, qos.LATCHED, callback_group=other)
        reset, sim = str(value("reset_service")).strip(), str(value("sim_node")).strip("/")
        self.reset_client = self.create_client(Trigger, reset, callback_group=other) if reset else None
        self.param_client = (self.create_client(SetParameters, f"{sim}/set_parameters", callback_group=other)
                             if sim else None)

        self.wait_for_confirmation = bool(value("wait_for_confirmation"))
        self.confirmation_timeout = float(value("confirmation_timeout"))
        self._confirmed = threading.Event()
        self._watching_status = False  # set by the orchestration thread when a wait begins
        self.safety_state = "no safety/status received yet"
        if self.wait_for_confirmation:
            self.create_subscription(DiagnosticArray, "safety/status", self._on_safety_status, qos.STATE,
                                     callback_group=other)

        self.runner: PolicyRunner | None = None
        self.control_ms: list[float] = []
        """Observation callback entry -> action published, per step of the current round."""
        self.active: _Active | None = None
        self.rounds_done = 0
        self.stopped = threading.Event()
        """Set when the analysis node said stop; the learner drives no more rounds."""
        self.bad_messages = 0
        self._programs: queue.SimpleQueue = queue.SimpleQueue()
        self._seen: set[tuple[int, int]] = set()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._orchestrate, name="learner-rounds", daemon=True)
        self._thread.start()
        self.get_logger().info(
            f"learner for {self.spec.name}: {len(self.plan)} episodes per round, {self.limit} steps each, "
            f"action mode {mode}"
        )

    # -- control path (control callback group) --------------------------------------------------
    def _on_observation(self, msg: Float64MultiArray) -> None:
        started = time.perf_counter()
        active, runner = self.active, self.runner
        if active is None or runner is None or active.finished.is_set():
            return
        try:
            vec = unpack_vector(msg)
            obs = observation_from_values(self.spec, vec.values)
        except ValueError:
            self.bad_messages += 1
            return
        if vec.episode != active.counter or vec.step <= active.last_step:
            return
        active.last_step = vec.step
        active.log.observations.append(obs)
        if vec.step >= active.limit or active.rewarded.is_set():
            if active.rewarded.is_set():
                active.finished.set()  # the terminal observation: nothing to act on
            return
        try:
            act, values = runner.act(obs)
        except Exception as exc:  # an untrusted program failing is a result, not a crash
            active.log.error = f"step {vec.step}: {type(exc).__name__}: {exc}"
            active.rewarded.set()
            active.finished.set()
            return
        self.pub_action.publish(pack_vector(vec.episode, vec.step, act.tolist(), "action"))
        active.log.actions += 1
        self.control_ms.append((time.perf_counter() - started) * 1000.0)
        self.pub_step.publish(pack_vector(vec.episode, vec.step, values, "policy_step"))
        if self.reset_client is None and vec.step >= active.limit - 1:
            active.rewarded.set()  # no simulator to say done: the step budget ends the episode
            active.finished.set()

    def _on_reward(self, msg: Float64MultiArray) -> None:
        active = self.active
        if active is None:
            return
        try:
            vec = unpack_vector(msg)
        except ValueError:
            self.bad_messages += 1
            return
        if vec.episode != active.counter or not vec.values or active.rewarded.is_set():
            return
        reward = vec.values[0]
        done = len(vec.values) > 1 and vec.values[1] > 0.5
        success = vec.values[2] if len(vec.values) > 2 else 0.0
        active.log.rewards.append(float(reward))
        active.log.infos.append({"success": float(success)})
        if done or vec.step >= active.limit - 1:
            active.last_reward_step = vec.step
            active.rewarded.set()
            if active.last_step > vec.step:
                active.finished.set()

    def _on_safety_status(self, msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if "confirm_pending" not in values:
                continue
            self.safety_state = values.get("state", status.message)
            if self._watching_status and values["confirm_pending"] == "True":
                self._confirmed.set()

    # -- programs (other callback group; never blocks) -------------------------------------------
    def _on_program(self, msg: String) -> None:
        try:
            program = parse_program(json.loads(msg.data))
        except (ValueError, ProtocolError) as exc:
            self.get_logger().error(f"ignored a malformed refine/program message: {exc}")
            return
        self._programs.put(program)

    # -- orchestration thread ----------------------------------------------------------------------
    def _orchestrate(self) -> None:
        try:
            while not self._closing.is_set():
                try:
                    program = self._programs.get(timeout=0.5)
                except queue.Empty:
                    continue
                if program["kind"] == "stop":
                    self.get_logger().info(f"analysis node said stop: {program.get('reason', '')}")
                    self.stopped.set()
                    return
                key = (int(program["round"]), int(program["attempt"]))
                if key in self._seen:
                    continue  # a latched copy of a program already handled
                self._seen.add(key)
                if self._fit(program):
                    self._round(program)
        except Exception:  # keep the node alive and say exactly what broke
            self.get_logger().error(f"learner orchestration failed:\n{traceback.format_exc()}")
        finally:
            self.active = None

    def _fit(self, program: dict) -> bool:
        rnd, attempt, run_id = int(program["round"]), int(program["attempt"]), int(program["run_id"])
        outcome = self._fitted(program) if program.get("bundle_b64") else None
        if outcome is None:
            self.get_logger().info(f"round {rnd}: fitting program (attempt {attempt}) on the demonstration")
            try:
                with RunDatabase(self.run_dir) as db:
                    demo = Demonstration.load(db, run_id)
                outcome = stages.fit_once(self.task, program["source"], demo, self.config)
            except Exception as exc:  # noqa: BLE001 - a missing demo or sandbox failure is reported
                outcome = stages.FitOutcome(program=program["source"], error=f"{type(exc).__name__}: {exc}")
        if not outcome.failed:
            try:
                self.use_policy(outcome.bundle, outcome.info_schema.keys)
            except Exception as exc:  # noqa: BLE001 - e.g. weights that do not fit the program
                outcome = stages.FitOutcome(program=program["source"], error=f"{type(exc).__name__}: {exc}")
        info = None
        if outcome.info_schema is not None:
            info = {"weights": list(outcome.info_schema.weights), "latents": list(outcome.info_schema.latents),
                    "warnings": list(outcome.info_schema.warnings)}
        payload = fit_payload(rnd, attempt, run_id=run_id, error=outcome.error, report=outcome.report,
                              info_schema=info, bundle=outcome.bundle)
        if outcome.failed:
            self.get_logger().warning(f"round {rnd}: fit failed: {outcome.error}")
        self.pub_fit.publish(pack_json(payload))
        return not outcome.failed

    def _fitted(self, program: dict) -> stages.FitOutcome:
        """A program that arrives with its weights (e.g. a committed round's policy sent to a
        robot) is checked and built, never refitted."""
        try:
            bundle = decode_bundle(program["bundle_b64"])
            if bundle.source != program["source"]:
                raise ProtocolError("the bundle's source is not the program's source")
            module = bundle.build(self.spec)
            return stages.FitOutcome(program=bundle.source, bundle=bundle, report={"fitted": "given"},
                                     info_schema=validate_policy(module, self.spec))
        except Exception as exc:  # noqa: BLE001 - any refusal becomes the fit's error
            return stages.FitOutcome(program=program["source"], error=f"{type(exc).__name__}: {exc}")

    def use_policy(self, bundle: PolicyBundle, info_keys: tuple[str, ...]) -> None:
        """Swap in a fitted policy and announce its policy-step columns (latched)."""
        self.runner = PolicyRunner(self.task, bundle, info_keys, mode=self.config.action_mode)
        self.pub_columns.publish(pack_json(self.runner.columns))

    def _round(self, program: dict) -> None:
        rnd, run_id = int(program["round"]), int(program["run_id"])
        logs: list[EpisodeLog] = []
        self.control_ms = []
        base = round_counter_base(rnd, len(self.plan))
        for planned in self.plan:
            if self._closing.is_set():
                return
            logs.append(self._episode(replace(planned, counter=base + planned.counter), rnd, run_id))
        metrics, episodes, errors = {}, [], []
        for kind in ("diagnostic", "selection", "eval"):
            group = [log for log in logs if log.planned.kind == kind]
            if not group:
                continue
            summaries = [log.summary(self.task) for log in group]
            metrics[kind] = stages.summarise(summaries)
            for log, summary in zip(group, summaries, strict=True):
                episodes.append({"kind": kind, "index": log.planned.index, "episode": log.planned.index,
                                 "counter": log.counter, "seed": log.planned.seed, "steps": log.steps, "summary": summary})
                if log.error:
                    errors.append(f"{kind} seed {log.planned.seed}: {log.error}")
        self.rounds_done += 1
        payload = round_payload(rnd, run_id=run_id, metrics=metrics, episodes=episodes, errors=errors)
        if self.control_ms:
            ms = np.asarray(self.control_ms)
            payload["control_ms"] = {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
                                     "max": float(ms.max()), "steps": int(ms.size)}
        self.pub_round.publish(pack_json(payload))
        sel = metrics.get("selection", metrics.get("diagnostic", {}))
        self.get_logger().info(f"round {rnd} complete: metric {sel.get('metric_mean', float('nan')):.4g}")

    def _episode(self, planned: PlannedEpisode, rnd: int, run_id: int) -> EpisodeLog:
        log = EpisodeLog(planned, counter=planned.counter)
        active = _Active(planned, rnd, run_id, self.limit, log, counter=planned.counter)
        error = self._await_confirmation(planned, rnd)
        if error is not None:  # never started: announce and close it so the database has its row
            self._event("start", active)
            log.error = error
            self._event("end", active, summary=log.summary(self.task), complete=False)
            self.get_logger().error(f"{planned.kind} episode (seed {planned.seed}) not run: {error}")
            return log
        error = self._set_sim_parameters(planned)
        if error is None:
            self.runner.new_episode(planned.seed)
            self.active = active  # first: the sim publishes step 0 before it answers the reset
            self._event("start", active)  # (a hardware bridge starts counting at this event)
            error = self._reset()
        if error is None and not active.rewarded.wait(self.episode_timeout):
            error = f"no end of episode within {self.episode_timeout:g} s ({active.last_step + 1} steps seen)"
        if error is None:
            active.finished.wait(1.0)  # the terminal observation, for the episode summary
        self.active = None
        if error and not log.error:
            log.error = error
        summary = log.summary(self.task)
        self._event("end", active, summary=summary, complete=log.error is None)
        if log.error:
            self.get_logger().error(f"{planned.kind} episode (seed {planned.seed}) failed: {log.error}")
        return log

    def _await_confirmation(self, planned: PlannedEpisode, rnd: int) -> str | None:
        """Block this (orchestration) thread until the operator confirms the episode."""
        if not self.wait_for_confirmation:
            return None
        self._confirmed.clear()
        self._watching_status = True
        try:
            self.get_logger().info(
                f"round {rnd}: waiting for the operator to confirm {planned.kind} episode {planned.index} "
                f"(seed {planned.seed}): reset the scene, then call safety/confirm_episode "
                f"(std_srvs/Trigger); safety state: {self.safety_state}"
            )
            deadline = time.monotonic() + self.confirmation_timeout
            while not self._confirmed.is_set():
                left = deadline - time.monotonic()
                if self._closing.is_set():
                    return "the learner is shutting down"
                if left <= 0:
                    return (f"the operator did not confirm within {self.confirmation_timeout:g} s "
                            f"(safety state: {self.safety_state})")
                # the event wakes this at once; the bounded wait only notices shutdown and reminds
                if not self._confirmed.wait(min(left, 30.0)) and left > 30.0:
                    self.get_logger().info(f"still waiting for safety/confirm_episode "
                                           f"(safety state: {self.safety_state})")
            if self._closing.is_set():
                return "the learner is shutting down"
            self.get_logger().info(f"round {rnd}: {planned.kind} episode {planned.index} confirmed; starting")
            return None
        finally:
            self._watching_status = False

    def _event(self, kind: str, active: _Active, **extra: Any) -> None:
        payload = {"event": kind, "episode": active.counter, "round": active.round, "run_id": active.run_id,
                   "kind": active.planned.kind, "seed": active.planned.seed, "index": active.planned.index,
                   **extra}
        self.pub_events.publish(String(data=json.dumps(payload, default=float)))

    def _call(self, client, request, what: str) -> tuple[Any, str | None]:
        if not client.wait_for_service(timeout_sec=10.0):
            return None, f"{what}: service {client.srv_name} not available"
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        if not done.wait(30.0):
            return None, f"{what}: no answer from {client.srv_name} within 30 s"
        if future.exception() is not None:
            return None, f"{what}: {future.exception()}"
        return future.result(), None

    def _set_sim_parameters(self, planned: PlannedEpisode) -> str | None:
        """Seed, episode counter and episode length of the next reset, in one request."""
        if self.param_client is None:
            return None
        request = SetParameters.Request()
        request.parameters = [
            ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=v))
            for name, v in (("seed", planned.seed), ("episode", planned.counter), ("max_steps", self.limit))
        ]
        result, error = self._call(self.param_client, request, "set the sim parameters")
        if error:
            return error
        refused = [f"{p.name}: {r.reason}" for p, r in zip(request.parameters, result.results, strict=False)
                   if not r.successful]
        return f"the sim node refused {', '.join(refused)}" if refused else None

    def _reset(self) -> str | None:
        if self.reset_client is None:
            return None  # a real robot: the start event opens the episode at the bridge
        result, error = self._call(self.reset_client, Trigger.Request(), "reset the sim")
        if error:
            return error
        return None if result.success else f"sim/reset failed: {result.message}"

    # -- shutdown ------------------------------------------------------------------------------------
    def destroy_node(self) -> None:
        self._closing.set()
        self._confirmed.set()
        active = self.active
        if active is not None:
            active.rewarded.set()
            active.finished.set()
        self._thread.join(5.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    # two threads: the control path keeps running while a service call or a fit is in flight
    run_node(LearnerNode, args, executor=lambda: MultiThreadedExecutor(num_threads=2))


if __name__ == "__main__":
    main()
