"""The learner and analysis nodes over real rclpy/DDS: they start, declare their parameters,
speak the two actions of the round protocol and shut down cleanly. Each test owns an rclpy
context."""

from __future__ import annotations

import json
import threading

import pytest
import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient, ActionServer
from rclpy.node import Node
from rclpy.parameter import Parameter
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger

from refine_core.policy.bundle import PolicyBundle
from refine_core.policy.programs import starter_program
from refine_core.rollout.plan import PlannedEpisode
from refine_core.store.db import RunDatabase
from refine_ros.bench import wait_for
from refine_ros.bringup import resolve_profile
from refine_ros.bringup.spin import NodeSpinner, action_client, destroy_actions
from refine_ros.nodes.analysis_node import PARAMETERS as ANALYSIS_PARAMETERS
from refine_ros.nodes.analysis_node import AnalysisNode
from refine_ros.nodes.learner_node import PARAMETERS as LEARNER_PARAMETERS
from refine_ros.nodes.learner_node import LearnerNode
from refine_ros.params import StartRefused
from refine_ros.wire import protocol, qos
from refine_ros.wire.messages import pack_step
from refine_ros_interfaces.action import FitProgram, RunRollout
from refine_ros_interfaces.msg import RunStatus, Step

pytestmark = [pytest.mark.ros, pytest.mark.timeout(180)]


class Spin(NodeSpinner):
    """Spins nodes on their own executor threads, as `refine up` does; `stop()` ends every
    executor before the test destroys a node."""

    def __init__(self, context, *nodes: Node) -> None:
        super().__init__(nodes, context)
        self.start()


class Client(Node):
    """Sends goals to the learner's actions as the analysis node (or `ros2 action`) does."""

    def __init__(self, context, name: str = "lifecycle_client") -> None:
        super().__init__(name, context=context)
        self.fit = action_client(self, FitProgram, protocol.FIT_ACTION)
        self.rollout = action_client(self, RunRollout, protocol.ROLLOUT_ACTION)
        self.feedback: list = []

    def send(self, client: ActionClient, goal, timeout: float = 120.0):
        """(status, result) of `goal`; feedback messages are kept in `self.feedback`."""
        assert client.wait_for_server(timeout_sec=30.0), "no action server"
        sent = client.send_goal_async(goal, feedback_callback=lambda m: self.feedback.append(m.feedback))
        assert wait_for(sent.done, 30.0) and sent.result().accepted, "goal not accepted"
        result = sent.result().get_result_async()
        assert wait_for(result.done, timeout), "no result"
        return result.result().status, result.result().result


def _declared(node: Node, names) -> None:
    for name in names:
        assert node.has_parameter(name), name
        descriptor = node.describe_parameter(name)
        assert descriptor.description, f"{name} has no description"


def _record_demo(run_dir) -> int:
    from refine_core.rollout.demo import record_demonstration
    from refine_core.tasks.registry import get_task

    with RunDatabase(run_dir) as db:
        run_id = db.create_run("door_open")
        record_demonstration(get_task("door_open"), max_steps=60).save(db, run_id)
    return run_id


def test_learner_declares_parameters_and_shuts_down(context, run_dir):
    node = LearnerNode(context=context, parameter_overrides=[Parameter("run_dir", value=str(run_dir))])
    try:
        assert set(LEARNER_PARAMETERS) == {"task", "run_dir", "fit_timeout", "episode_timeout", "sim_node",
                                           "reset_service", "wait_for_confirmation", "confirmation_timeout",
                                           "robot", "fit_validation_timeout", "observation_timeout",
                                           "episode_steps", "listeners", "listener_timeout"}
        _declared(node, LEARNER_PARAMETERS)
        assert node.describe_parameter("fit_timeout").floating_point_range
        assert node.describe_parameter("task").read_only
    finally:
        node.destroy_node()
    assert not node._thread.is_alive()


def test_destroyed_learner_and_analysis_nodes_leave_the_graph(context, run_dir):
    """rclpy's `destroy_node` leaves a node's action servers and clients alive, and the node
    with them, until the garbage collector frees them; a client started later then finds the
    dead `learner/run_rl` at once and sends its goal there, where nothing answers (after an
    in-process `refine up` the RL goal tests lost theirs so). Both nodes stay referenced here,
    as a reference cycle keeps them, and must still be gone from another participant's graph.
    They live in a namespace of their own: a node process of an earlier test that was killed
    stays in the graph until its lease runs out, under the same names."""
    import os

    namespace = f"/gone_{os.getpid()}"
    _record_demo(run_dir)
    other = rclpy.Context()
    rclpy.init(context=other)
    watcher = Node("graph_watcher", context=other)
    learner = LearnerNode(context=context, namespace=namespace,
                          parameter_overrides=[Parameter("run_dir", value=str(run_dir))])
    analysis = AnalysisNode(context=context, namespace=namespace, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("max_rounds", value=1)])

    def seen() -> tuple[set, bool]:
        nodes = {name for name, ns in watcher.get_node_names_and_namespaces() if ns == namespace}
        rl = any(name.startswith(f"{namespace}/{protocol.RL_ACTION}/")
                 for name, _t in watcher.get_service_names_and_types())
        return nodes, rl

    try:
        assert wait_for(lambda: seen() == ({"learner_node", "analysis_node"}, True), 30.0), seen()
        analysis.destroy_node()
        learner.destroy_node()
        assert wait_for(lambda: seen() == (set(), False), 10.0), f"still in the graph: {seen()}"
    finally:
        watcher.destroy_node()
        rclpy.try_shutdown(context=other)


def test_analysis_node_refuses_a_bad_action_mode(context, run_dir):
    with pytest.raises(ValueError, match="action_mode"):
        AnalysisNode(context=context, parameter_overrides=[
            Parameter("run_dir", value=str(run_dir)), Parameter("action_mode", value="greedy")])


@pytest.mark.parametrize("robot, mode", [("", "sample"), ("arm_real", "mean")])
def test_the_door_runs_sampled_in_simulation_and_its_mean_on_a_robot(context, run_dir, robot, mode):
    """The door's published results were verified with sampled actions, and a simulated run
    keeps that; a robot runs the task's deployed mode, the mean action (sampled noise would be
    jitter sent to the hardware), unless the profile or a replay says otherwise."""
    node = AnalysisNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("task", value="door_open"), Parameter("robot", value=robot)])
    try:
        assert node.config.action_mode == mode
    finally:
        node.destroy_node()


def test_learner_fits_what_it_is_asked_and_survives_garbage(context, run_dir):
    """A program that breaks the contract comes back as a failed fit with the error text; a
    malformed rollout goal is aborted with the reason; the starter is then fitted on the run's
    demonstration, with a feedback message per epoch."""
    run_id = _record_demo(run_dir)
    learner = LearnerNode(context=context, parameter_overrides=[Parameter("run_dir", value=str(run_dir))])
    client = Client(context)
    spin = Spin(context, learner, client)
    try:
        status, bad = client.send(client.fit, protocol.fit_goal(run_id, "import os\nclass OpenDoorPolicy:\n    pass\n"))
        assert status == GoalStatus.STATUS_SUCCEEDED and "os" in bad.error and not bad.bundle_npz
        garbage = RunRollout.Goal(run_id=run_id, mode="greedy", bundle_npz=b"not an npz")
        status, _ = client.send(client.rollout, garbage)
        assert status == GoalStatus.STATUS_ABORTED
        client.feedback.clear()
        status, good = client.send(client.fit, protocol.fit_goal(run_id, starter_program("door_open")))
        bundle, report, info, error = protocol.read_fit_result(good)
        assert status == GoalStatus.STATUS_SUCCEEDED and error is None and report["epochs"] > 0
        assert info.latents, "the starter program's latents are reported"
        assert bundle.weights, "the fitted weights travel as arrays"
        epochs = [f.epoch for f in client.feedback]  # feedback is best effort: a few may drop
        assert epochs == sorted(set(epochs)) and set(epochs) <= set(range(1, report["epochs"] + 1))
        assert len(epochs) >= 0.8 * report["epochs"], "about one feedback per finished epoch"
    finally:
        spin.stop()
        learner.destroy_node()
        client.destroy_node()


def test_a_cancelled_fit_stops_within_seconds_and_the_learner_serves_the_next_goal(context, run_dir):
    import time

    from programs.slow import slow_door_program

    run_id = _record_demo(run_dir)
    learner = LearnerNode(context=context, parameter_overrides=[Parameter("run_dir", value=str(run_dir))])
    client = Client(context)
    spin = Spin(context, learner, client)
    try:
        assert client.fit.wait_for_server(timeout_sec=30.0)
        sent = client.fit.send_goal_async(protocol.fit_goal(run_id, slow_door_program()),
                                          feedback_callback=lambda m: client.feedback.append(m.feedback))
        assert wait_for(sent.done, 30.0) and sent.result().accepted
        assert wait_for(lambda: len(client.feedback) >= 2, 60.0), "no epoch feedback"
        cancelled_at = time.monotonic()
        sent.result().cancel_goal_async()
        result = sent.result().get_result_async()
        assert wait_for(result.done, 30.0)
        assert result.result().status == GoalStatus.STATUS_CANCELED
        assert "cancelled by the caller" in result.result().result.error
        assert time.monotonic() - cancelled_at < 10.0
        assert client.feedback[-1].epoch < client.feedback[-1].max_epochs, "the fit did not run on"
        status, again = client.send(client.fit, protocol.fit_goal(run_id, starter_program("door_open")))
        assert status == GoalStatus.STATUS_SUCCEEDED and again.bundle_npz
    finally:
        spin.stop()
        learner.destroy_node()
        client.destroy_node()


class FitGoalRecorder(Node):
    """A learner that takes fit goals and never finishes them: what the analysis node asked."""

    def __init__(self, context) -> None:
        super().__init__("learner_node", context=context)
        self.goals: list = []
        self.server = ActionServer(self, FitProgram, protocol.FIT_ACTION, execute_callback=lambda h: None,
                                   handle_accepted_callback=lambda h: self.goals.append(h.request))

    def destroy_node(self) -> None:
        destroy_actions(self)  # a stand-in learner left in the graph would take later tests' goals
        super().destroy_node()


def test_analysis_node_runs_refine_and_asks_the_learner_to_fit_the_zero_shot_program(context, run_dir):
    node = AnalysisNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("max_rounds", value=2)])
    learner = FitGoalRecorder(context)
    spin = Spin(context, node, learner)
    try:
        expected = {"task", "run_dir", "analyst", "transcript", "max_rounds", "max_attempts", "max_test_requests",
                    "diagnostic_episodes", "selection_episodes", "eval_episodes", "max_steps", "expert_labels"}
        assert expected <= set(ANALYSIS_PARAMETERS)
        _declared(node, ANALYSIS_PARAMETERS)
        assert node.describe_parameter("max_test_requests").integer_range[0].from_value == 0
        assert wait_for(lambda: learner.goals, 120.0), "no fit goal"
        goal = learner.goals[-1]
        assert "OpenDoorPolicy" in goal.program
        with RunDatabase(run_dir) as db:
            assert db.latest_run()["id"] == goal.run_id
            assert db.load_demonstration(goal.run_id) is not None
    finally:
        spin.stop()
        node.destroy_node()
        learner.destroy_node()
    assert not node._thread.is_alive()
    assert node.finished.is_set() and "shutting down" in node.stop_reason


def test_old_parameter_names_still_set_the_new_ones_with_a_warning(context):
    """rounds / episodes / sandbox_timeout became the RefineConfig field names (analysis_node
    declares them as `aliases`); a launch line or parameters file written for the old names
    still sets the value, and leaving them unset changes nothing."""
    from refine_ros.params import Param, declare_parameters, values

    table = {"max_rounds": Param(6, "most rounds", (1, 1000), aliases=("rounds",)),
             "sandbox_timeout_s": Param(60.0, "seconds", aliases=("sandbox_timeout",))}
    old = Node("aliases_old", context=context,
               parameter_overrides=[Parameter("rounds", value=2), Parameter("sandbox_timeout", value=7.5)])
    new = Node("aliases_new", context=context)
    try:
        declare_parameters(old, table)
        declare_parameters(new, table)
        assert values(old, table) == {"max_rounds": 2, "sandbox_timeout_s": 7.5}
        assert values(new, table) == {"max_rounds": 6, "sandbox_timeout_s": 60.0}
        assert old.describe_parameter("rounds").description == "deprecated: use max_rounds"
        assert old.describe_parameter("rounds").integer_range[0].to_value == 1000, "the same range"
        assert {a for p in ANALYSIS_PARAMETERS.values() for a in p.aliases} == {"rounds", "episodes",
                                                                                "sandbox_timeout"}
    finally:
        old.destroy_node()
        new.destroy_node()


class FailingLearner(Node):
    """Answers every fit goal with an error, as a learner whose sandbox refuses a program."""

    def __init__(self, context) -> None:
        super().__init__("learner_node", context=context)
        self.requests: list = []
        self.statuses: list[RunStatus] = []
        self.server = ActionServer(self, FitProgram, protocol.FIT_ACTION, execute_callback=self._fit)
        self.create_subscription(RunStatus, protocol.RUN_STATUS, self.statuses.append, qos.LATCHED)

    def destroy_node(self) -> None:
        destroy_actions(self)
        super().destroy_node()

    def _fit(self, handle):
        self.requests.append(handle.request)
        handle.succeed()
        return protocol.fit_result(error=f"boom {len(self.requests)}")


@pytest.mark.parametrize("max_attempts", [1, 2])
def test_analysis_node_regenerates_after_a_failed_fit_then_gives_up(context, run_dir, max_attempts):
    """refine() sends a failed fit back to the analyst (a new attempt of the same round); when
    the attempts are used up the round is recorded as failed and the node finishes."""
    node = AnalysisNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("max_attempts", value=max_attempts)])
    learner = FailingLearner(context)
    spin = Spin(context, node, learner)
    try:
        assert node.finished.wait(180), "the run did not end"
        assert len(learner.requests) == max_attempts
        with RunDatabase(run_dir) as db:
            run_id = db.latest_run()["id"]
            rounds = db.rounds(run_id)
            assert [(r["round"], r["status"]) for r in rounds] == [(0, "failed")]
            assert f"boom {max_attempts}" in rounds[0]["error"]
            assert len(rounds[0]["fit_report"]["attempts"]) == max_attempts
            assert db.run(run_id)["status"] == "finished"
        assert "no program could be fitted" in node.stop_reason
        # the typed status a person reads with `ros2 topic echo /refine/run_status`
        assert wait_for(lambda: learner.statuses and learner.statuses[-1].state == RunStatus.FINISHED, 10.0)
        assert learner.statuses[0].state == RunStatus.RUNNING and learner.statuses[0].reason == ""
        final = learner.statuses[-1]
        assert "no program could be fitted" in final.reason and final.task == "door_open"
        assert (final.rounds_done, final.last_round, final.run_dir) == (0, -1, str(run_dir))
    finally:
        spin.stop()
        node.destroy_node()
        learner.destroy_node()


def test_analysis_node_refuses_an_unknown_analyst(context, run_dir):
    with pytest.raises(ValueError, match="analyst"):
        AnalysisNode(context=context, parameter_overrides=[
            Parameter("run_dir", value=str(run_dir)), Parameter("analyst", value="oracle")])


@pytest.mark.parametrize(("rl", "said"), [
    ({"rl": '{"group_sise": 2}'}, "group_sise not RLConfig fields"),
    ({"rl": "group_size: 2"}, "not JSON"),
    ({"rl_preset": "fast"}, "preset must be one of"),
    ({"rl_resets": 10}, "reset_budget >= group_size"),
])
def test_analysis_node_refuses_rl_settings_before_the_run(context, run_dir, rl, said):
    """RL runs on a robot too (a learner goal, tests in test_ros_rl.py); settings RLConfig
    refuses stop the node at its start, not after the run's rounds."""
    with pytest.raises(StartRefused, match=said):
        AnalysisNode(context=context, parameter_overrides=[
            Parameter("run_dir", value=str(run_dir)), Parameter("demonstration", value="recorded"),
            *(Parameter(name, value=value) for name, value in {"rl_resets": 40, **rl}.items())])


# ------------------------------------------------------------------------- the protocol, no DDS
def test_rollout_goals_and_results_round_trip_and_are_validated():
    import math

    from refine_core.rollout.plan import PlannedEpisode

    plan = [PlannedEpisode("diagnostic", 0, 200), PlannedEpisode("selection", 0, 100)]
    bundle = PolicyBundle("src", {})
    goal = protocol.read_rollout_goal(protocol.rollout_goal(2, 3, bundle, plan, mode="mean", max_steps=None))
    assert goal["plan"] == plan and goal["max_steps"] == 0 and goal["expert_labels"] is False
    assert (goal["run_id"], goal["round"]) == (2, 3) and protocol.decode_bundle(goal["bundle"]).source == "src"
    with pytest.raises(protocol.ProtocolError, match="mode"):
        protocol.read_rollout_goal(protocol.rollout_goal(2, 3, bundle, plan, mode="greedy", max_steps=5))

    entries = [{"kind": "diagnostic", "index": 0, "seed": 200, "counter": 3001, "steps": 40, "error": None,
                "summary": {"return": 1.5, "metric": 0.2, "success": 1.0, "note": "text is dropped"}},
               {"kind": "selection", "index": 0, "seed": 100, "steps": 0, "error": "no confirmation",
                "summary": {"return": 0.0, "metric": float("nan"), "success": 0.0}}]
    back = protocol.read_rollout_result(protocol.rollout_result(entries, {"p50": 1.0, "p99": 2.0, "max": 3.0,
                                                                          "steps": 40}))
    first, second = back["episodes"]
    assert first["summary"] == {"return": 1.5, "metric": 0.2, "success": 1.0} and first["error"] is None
    assert (first["counter"], first["steps"]) == (3001, 40)
    assert second["error"] == "no confirmation" and math.isnan(second["summary"]["metric"])
    assert back["control_ms"] == {"p50": 1.0, "p99": 2.0, "max": 3.0, "steps": 40}
    assert protocol.read_rollout_result(protocol.rollout_result([]))["control_ms"] == {}


def test_fit_results_carry_weights_as_plain_arrays():
    import numpy as np

    from refine_core.policy.contract import InfoSchema

    bundle = PolicyBundle("src", {"w": np.arange(3.0)})
    result = protocol.fit_result(error=None, bundle=bundle, report={"epochs": 4},
                                 info=InfoSchema(("weight_w",), ("latent_z",), ()))
    back, report, info, error = protocol.read_fit_result(result)
    assert error is None and back.source == "src" and back.weights["w"].tolist() == [0.0, 1.0, 2.0]
    assert report == {"epochs": 4} and info.latents == ("latent_z",)
    assert protocol.read_fit_result(protocol.fit_result(error="boom"))[3] == "boom"
    assert "no policy" in protocol.read_fit_result(protocol.fit_result(error=None))[3]
    broken = FitProgram.Result(bundle_npz=b"not an archive", report_json="{}")
    assert "malformed" in protocol.read_fit_result(broken)[3]


def test_episode_counters_never_repeat_across_rounds_and_are_never_zero():
    counters = [protocol.episode_counter(r, i) for r in range(4) for i in range(15)]
    assert len(set(counters)) == len(counters) and min(counters) >= 1


# ------------------------------------------------------------------------- a real robot: operator confirmation
class FakeArm(Node):
    """Stands in for the arm bridge and its hardware: counted door observations at 50 Hz that
    restart their step counter at each episode start event (as the bridge does), and a count
    of what the policy and the safety node send."""

    def __init__(self, context) -> None:
        super().__init__("fake_arm", context=context)
        from refine_core.tasks.registry import get_task

        self.columns = get_task("door_open").spec.observation_columns
        self.width = len(self.columns)
        self.episode, self.step = 0, 0
        self.actions: list[tuple[int, int]] = []  # (episode, step) of refine/action
        self.safe_policy = 0
        self.lock = threading.Lock()
        self.starts: list[dict] = []
        self.round_done = threading.Event()
        self.pub_obs = self.create_publisher(Step, "refine/observation", qos.CONTROL)
        self.rollout = action_client(self, RunRollout, protocol.ROLLOUT_ACTION)
        self.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        self.create_subscription(Float64MultiArray, "refine/action", self._on_action, qos.CONTROL)
        self.results: list[dict] = []
        self.phases: list[int] = []
        self.confirm = self.create_client(Trigger, "safety/confirm_episode")
        self.create_timer(0.02, self._tick)

    def _on_event(self, msg: String) -> None:
        event = json.loads(msg.data)
        if event.get("event") == "start":
            with self.lock:
                self.starts.append(event)
                self.episode, self.step = int(event["episode"]), 0

    def _on_action(self, msg: Float64MultiArray) -> None:
        with self.lock:
            self.actions.append((int(msg.data[0]), int(msg.data[1])))

    def _on_result(self, future) -> None:
        self.results.append(protocol.read_rollout_result(future.result().result))
        self.round_done.set()

    def request_round(self, steps: int, kinds: tuple[str, ...]) -> None:
        from refine_core.rollout.plan import PlannedEpisode

        source = starter_program("door_open")
        plan = [PlannedEpisode(kind, 0, 200 + i) for i, kind in enumerate(kinds)]
        assert self.rollout.wait_for_server(timeout_sec=30.0)
        sent = self.rollout.send_goal_async(protocol.rollout_goal(1, 0, PolicyBundle(source, {}), plan, mode="mean",
                                                                  max_steps=steps),
                                            feedback_callback=lambda m: self.phases.append(m.feedback.phase))
        sent.add_done_callback(lambda f: f.result().get_result_async().add_done_callback(self._on_result))

    def _tick(self) -> None:
        obs = [0.0] * self.width
        obs[0], obs[1], obs[2] = 0.0, 0.6, 0.2  # the gripper inside the workspace box
        with self.lock:
            episode, step = self.episode, self.step
            self.step += 1
        self.pub_obs.publish(pack_step(episode, step, self.columns, obs))

    def count(self) -> int:
        with self.lock:
            return len(self.actions)


def _confirm(arm: FakeArm) -> None:
    assert arm.confirm.wait_for_service(timeout_sec=10.0)
    done = threading.Event()
    future = arm.confirm.call_async(Trigger.Request())
    future.add_done_callback(lambda _f: done.set())
    assert done.wait(10.0) and future.result().success, "safety/confirm_episode refused"


def test_a_real_robot_episode_waits_for_the_operators_confirmation(context, run_dir):
    """No simulator, the real safety node: the learner publishes no action for an episode until
    safety/confirm_episode is called, then runs it for max_steps actions; the next episode
    waits for a confirmation of its own."""
    import time

    from refine_ros.nodes.safety_node import SafetyNode

    steps = 8
    learner = LearnerNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("sim_node", value=""),
        Parameter("reset_service", value=""), Parameter("wait_for_confirmation", value=True),
        Parameter("confirmation_timeout", value=60.0),
    ])
    limits = {**resolve_profile("arm_real", check_modules=False).node("safety_node").parameters, "dry_run": True}
    safety = SafetyNode(context=context, parameter_overrides=[Parameter(k, value=v) for k, v in limits.items()])
    arm = FakeArm(context)
    spin = Spin(context, learner, safety, arm)
    try:
        assert learner.param_client is None and learner.reset_client is None, "no sim services on a robot"
        arm.request_round(steps, ("diagnostic", "selection"))
        time.sleep(3.0)  # the request arrived, observations flow, the safety node holds: no action yet
        assert arm.count() == 0 and not arm.starts, "acted before the operator confirmed"
        # no policy command yet: the safety node holds the arm (its watchdog reports "stale")
        assert learner.safety_state in ("stale", "unconfirmed"), learner.safety_state

        _confirm(arm)
        deadline = time.monotonic() + 20
        while arm.count() < steps and time.monotonic() < deadline:
            time.sleep(0.02)
        first = arm.starts[0]
        assert (first["kind"], first["index"]) == ("diagnostic", 0) and first["episode"] != 0
        assert [s for e, s in arm.actions if e == first["episode"]] == list(range(steps))
        assert safety.filter.counters.passed > 0 and safety.filter.confirmed_episode == first["episode"]

        time.sleep(1.0)  # the selection episode needs its own confirmation
        assert arm.count() == steps and len(arm.starts) == 1, "the next episode started unconfirmed"
        _confirm(arm)
        assert arm.round_done.wait(20), "the round did not complete after the second confirmation"
        assert [e["steps"] for e in arm.results[-1]["episodes"]] == [steps, steps]
        waiting, running = RunRollout.Feedback.WAITING_FOR_OPERATOR, RunRollout.Feedback.RUNNING
        assert [p for p in arm.phases if p in (waiting, running)] == [waiting, running] * 2, arm.phases
        second = arm.starts[1]
        assert (second["kind"], second["index"]) == ("selection", 0)
        assert [s for e, s in arm.actions if e == second["episode"]] == list(range(steps))
    finally:
        spin.stop()
        learner.destroy_node()
        safety.destroy_node()
        arm.destroy_node()
    assert not learner._thread.is_alive()


def test_a_confirmation_that_never_comes_fails_the_episode_and_shutdown_ends_the_wait(context, run_dir):
    learner = LearnerNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("sim_node", value=""),
        Parameter("reset_service", value=""), Parameter("wait_for_confirmation", value=True),
        Parameter("confirmation_timeout", value=1.0),
    ])
    arm = FakeArm(context)
    spin = Spin(context, learner, arm)
    try:
        _declared(learner, ["wait_for_confirmation", "confirmation_timeout"])
        arm.request_round(5, ("diagnostic",))
        assert arm.round_done.wait(60), "a missing confirmation must end the episode, not hang the round"
        assert arm.count() == 0
        (episode,) = arm.results[-1]["episodes"]
        assert "did not confirm" in episode["error"] and episode["steps"] == 0
        assert learner.safety_state.startswith("no safety/status"), "no safety node ran"
    finally:
        spin.stop()
        learner.destroy_node()
        arm.destroy_node()
    assert not learner._thread.is_alive()


def test_a_cancelled_rollout_ends_its_wait_and_reports_every_planned_episode(context, run_dir):
    """Cancelled while the first episode waits for the operator: the goal ends CANCELED within
    seconds, with one outcome per planned episode, none of them run."""
    import time

    learner = LearnerNode(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("sim_node", value=""),
        Parameter("reset_service", value=""), Parameter("wait_for_confirmation", value=True),
        Parameter("confirmation_timeout", value=120.0),
    ])
    arm = FakeArm(context)
    spin = Spin(context, learner, arm)
    try:
        assert arm.rollout.wait_for_server(timeout_sec=30.0)
        plan = [PlannedEpisode("diagnostic", 0, 200), PlannedEpisode("selection", 0, 201)]
        sent = arm.rollout.send_goal_async(
            protocol.rollout_goal(1, 0, PolicyBundle(starter_program("door_open"), {}), plan, mode="mean",
                                  max_steps=5), feedback_callback=lambda m: arm.phases.append(m.feedback.phase))
        assert wait_for(lambda: RunRollout.Feedback.WAITING_FOR_OPERATOR in arm.phases, 30.0), arm.phases
        cancelled_at = time.monotonic()
        sent.result().cancel_goal_async()
        result = sent.result().get_result_async()
        assert wait_for(result.done, 30.0) and time.monotonic() - cancelled_at < 10.0
        assert result.result().status == GoalStatus.STATUS_CANCELED
        episodes = protocol.read_rollout_result(result.result().result)["episodes"]
        assert [(e["kind"], e["steps"]) for e in episodes] == [("diagnostic", 0), ("selection", 0)]
        assert "cancelled" in episodes[0]["error"] and "cancelled" in episodes[1]["error"]
        assert arm.count() == 0, "a cancelled rollout sent an action"
    finally:
        spin.stop()
        learner.destroy_node()
        arm.destroy_node()


# ------------------------------------------------------------------------- `refine up arm_real`, dry run
@pytest.mark.alone  # a live arm graph judged at the profile's own timeouts (TF 0.15 s, watchdog 0.1 s)
@pytest.mark.slow
@pytest.mark.timeout(420)
def test_refine_up_arm_real_dry_run_with_fake_sensors(context, run_dir, monkeypatch):
    """The real-arm flow from docs/ROBOT_CHECKLIST.md with fake drivers: a demonstration is
    teleoperated on the arm (`refine up arm_real_record_demo --live` in its own process, a
    gamepad through joy_teleop and the safety node), fitted, and then the whole arm_real
    profile runs in one process, dry run, with its own episode counts (one diagnostic, one
    selection, no eval episode): it waits for the operator before each episode, logs both with
    NaN safe_* columns (nothing was sent), finishes the round with no eval metrics and the
    report still renders; nothing reaches the hardware topics in the dry run, and the
    simulated expert is never touched."""
    import time

    import numpy as np
    from fake_robots import FakeArmDriver, record_arm_demonstration

    from refine_core import loop
    from refine_core.backends import LocalFitter
    from refine_core.report import build_report
    from refine_core.rollout import demo as demo_module
    from refine_core.rollout.demo import Demonstration
    from refine_core.tasks.door_open.task import DoorOpenTask
    from refine_core.tasks.registry import get_task
    from refine_ros.bringup.up import EXIT_STOPPED, UpOptions, plan_profile, run_profile

    def never(*_args, **_kwargs):
        raise AssertionError("the simulated expert was asked for on a robot")

    for target, name in ((loop, "record_demonstration"), (demo_module, "record_demonstration"),
                         (DoorOpenTask, "expert")):
        monkeypatch.setattr(target, name, never)

    driver = FakeArmDriver(context)
    spin = Spin(context, driver)
    stop, runner = threading.Event(), None
    try:
        start_y = driver.position()[1]
        output = record_arm_demonstration(context, run_dir, seconds=2.0, forward=0.6, steps=50)
        assert "stored 1 take(s)" in output and "teleop (arm_real)" in output, output
        assert driver.position()[1] > start_y + 0.05, "the teleoperated arm moved forward"
        moved = driver.hardware_commands
        with RunDatabase(run_dir) as db:
            demo = Demonstration.load(db, db.latest_run()["id"])
        assert demo.source == "teleop (arm_real)" and demo.seed == -1 and demo.steps >= 50
        assert np.median(demo.actions[:, 1]) == pytest.approx(0.6), "the stick's dy, through the safety node"
        assert np.abs(demo.actions[:, [0, 2]]).max() == 0.0 and (demo.actions[:, 3] == 1.0).all()
        gripper_y = demo.inputs["features"][:, 1]
        assert gripper_y[-1] > gripper_y[0] + 0.05, "the observations follow the arm"
        fit = LocalFitter(get_task("door_open"), source="teleop (arm_real)").fit(starter_program("door_open"), demo)
        assert not fit.failed, fit.error

        options = UpOptions(run_dir=run_dir, analyst="offline", max_rounds=1, diagnostic_episodes=1, max_steps=10,
                            timeout_s=200, stop=stop)
        analysis = plan_profile("arm_real", options).node("analysis_node").parameters
        assert (analysis["diagnostic_episodes"], analysis["selection_episodes"], analysis["eval_episodes"]) == (1, 1, 0)
        result: list[int] = []
        runner = threading.Thread(target=lambda: result.append(run_profile("arm_real", options)), daemon=True)
        runner.start()

        def confirm_until(actions: int, timeout: float = 120.0) -> None:
            """Confirm, and again whenever the safety node revoked it meanwhile (a stale sensor,
            e.g. while the fit loads this machine), until the learner has sent `actions` actions:
            what an operator watching the arm does. Not again while it still holds one: an episode
            merely slow to start (ciL, beside one other test) would then take the second press as
            the next episode's confirmation, as the safety node rightly does."""
            deadline = time.monotonic() + timeout
            first = True
            while driver.actions < actions and time.monotonic() < deadline:
                if first or not driver.confirmation_held():
                    done = threading.Event()
                    driver.confirm.call_async(Trigger.Request()).add_done_callback(lambda _f, d=done: d.set())
                    assert done.wait(10.0)
                first = False
                wait_end = time.monotonic() + 3.0
                while driver.actions < actions and time.monotonic() < wait_end:
                    time.sleep(0.05)

        assert driver.confirm.wait_for_service(timeout_sec=60.0), "the safety node never came up"
        time.sleep(3.0)
        assert driver.actions == 0, "the learner acted before the operator confirmed"
        confirm_until(10)  # the diagnostic episode
        time.sleep(1.0)
        assert driver.actions == 10, "the selection episode waits for its own confirmation"
        confirm_until(20)
        runner.join(240)
        assert result == [EXIT_STOPPED], f"refine up arm_real ended with {result}"
    finally:
        stop.set()  # a failed step must not leave the profile's nodes running
        if runner is not None:
            runner.join(30)
        spin.stop()
        driver.destroy_node()
    assert driver.actions == 20, "each confirmed episode runs max_steps actions"
    assert driver.hardware_commands == moved, "dry run: nothing on the servo or gripper topics"
    with RunDatabase(run_dir) as db:
        run_id = db.latest_run()["id"]
        assert db.load_demonstration(run_id)["source"] == "teleop (arm_real)", "the demonstration stayed"
        episodes = db.episodes(run_id, 0)
        assert sorted(zip(episodes["kind"], episodes["episode"], episodes["steps"], strict=True)) == [
            ("diagnostic", 0, 10), ("selection", 0, 10)]
        steps = db.load_steps(run_id, 0)
        assert sorted(steps["kind"].unique()) == ["diagnostic", "selection"], "real profiles keep every kind"
        assert list(steps[steps["kind"] == "diagnostic"]["step"]) == list(range(10))
        safe = steps[[f"safe_{a}" for a in ("dx", "dy", "dz", "gripper")]]
        assert safe.isna().all().all(), "dry run: no safe command was sent for any step"
        assert steps["act_dx"].notna().all()
        assert not db.conn.execute("SELECT COUNT(*) FROM steps WHERE run_id = ? AND round IS NULL "
                                   "AND kind != 'demo'", (run_id,)).fetchone()[0], "bridge noise was logged"
        (committed,) = db.rounds(run_id)
        assert committed["status"] == "committed" and "eval" not in committed["metrics"]
        assert committed["metrics"]["selection"]["episodes"] == 1
        report = committed["fit_report"]
        assert report["n_train"] + report["n_val"] == demo.steps, "the round was fitted on the teleop demonstration"
        out, summary = build_report(db, run_dir / "report.html", run_id)
    assert out.is_file() and "round 0: selection" in summary


def test_rollout_logger_declares_its_parameters_and_shuts_down(context, run_dir):
    from refine_ros.nodes.rollout_logger import PARAMETERS as LOGGER_PARAMETERS
    from refine_ros.nodes.rollout_logger import RolloutLogger

    node = RolloutLogger(context=context, parameter_overrides=[
        Parameter("run_dir", value=str(run_dir)), Parameter("task", value="door_open")])
    try:
        assert {"store_step_kinds", "flush_timeout", "log_unannounced"} <= set(LOGGER_PARAMETERS)
        _declared(node, LOGGER_PARAMETERS)
        assert node.writer.store_step_kinds == frozenset({"diagnostic"}), "refine run stores diagnostic steps only"
        assert node.writer.alive
    finally:
        node.destroy_node()
    assert not node.writer.alive


def test_run_node_stops_when_done_then_lingers_and_shuts_down():
    """The shared main: `until` ends the spin, `linger` keeps serving a little longer (the
    analysis node's latched stop), any executor works (the learner's two threads), and the
    node is destroyed and the context shut down at the end."""
    import time

    from rclpy.executors import MultiThreadedExecutor

    from refine_ros.nodes._main import run_node

    made: list[Node] = []

    class Ticker(Node):
        def __init__(self) -> None:
            super().__init__("run_node_probe")
            self.ticks = 0
            self.create_timer(0.05, self._tick)
            made.append(self)

        def _tick(self) -> None:
            self.ticks += 1

    started = time.monotonic()
    run_node(Ticker, [], until=lambda node: node.ticks >= 3, linger=1.0,
             executor=lambda: MultiThreadedExecutor(num_threads=2))
    took = time.monotonic() - started
    (node,) = made
    assert took >= 1.0, "it lingers after `until` is true"
    assert node.ticks >= 3 + 5, "callbacks are still served while it lingers"
    assert not rclpy.ok(), "the default context is shut down"


HANGING_TEARDOWN = """
import sys, threading
from rclpy.node import Node
from refine_ros.nodes._main import run_node

class Stuck(Node):
    def __init__(self):
        super().__init__("teardown_probe")
        self.create_timer(0.05, self._tick)

    def _tick(self):
        print("spinning", flush=True)

    def destroy_node(self):  # a teardown that never returns, as a wait inside the middleware
        threading.Event().wait()

run_node(Stuck, sys.argv[1:], teardown_s=1.0)
"""


def test_a_node_whose_teardown_hangs_still_ends_after_sigint_with_its_stacks_on_the_log(tmp_path):
    """A teardown that never returns (one, inside rcl's destruction of the node, stayed there
    for good) must not leave a node that ignores the next Ctrl-C: past its teardown time the
    process prints every thread's stack and ends with status 1."""
    import signal
    import subprocess
    import sys

    log = tmp_path / "node.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-u", "-c", HANGING_TEARDOWN], stdout=out, stderr=subprocess.STDOUT)
        try:
            assert wait_for(lambda: "spinning" in log.read_text(), 30.0), log.read_text()
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=20.0)  # 1 s of teardown time, and the interpreter's exit
        finally:
            if proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert code == 1, text
    assert "Timeout (0:00:01)!" in text and "in destroy_node" in text and "in run_node" in text, text


def test_an_action_client_reaches_the_node_with_its_lock_already_made(context):
    """An executor spinning the node in another thread takes the client's lock as soon as the
    node holds the client; rclpy's constructor makes the lock after handing the client over
    (a full run lost a test's spin thread to that gap), `action_client` before."""
    node = Node("action_client_probe", context=context)
    seen = []
    hand_over = node.add_waitable

    def add_waitable(waitable):
        seen.append(hasattr(waitable, "_lock"))
        hand_over(waitable)

    node.add_waitable = add_waitable
    try:
        client = action_client(node, RunRollout, protocol.ROLLOUT_ACTION)
        assert seen == [True]
        assert client.get_num_entities() is not None and client in node.waitables
    finally:
        destroy_actions(node)
        node.destroy_node()
