"""Analysis node: runs the refinement method, `refine_core.loop.refine`, over the node graph.

Why it is built this way:
- There is one implementation of the method. This node runs the very same `refine()` as
  `refine run`, with the two seams implemented over DDS (`refine_ros.loop.graph`): the learner node
  fits each program and drives the episodes, the rollout logger commits every step. So a run
  through the graph leaves the rows a local run leaves, by construction.
- `refine()` runs on a worker thread: an LLM answer can take minutes and must never stall the
  executor that delivers the learner's answers. The executor only queues; the worker waits.
- When the method is over the node says so on `refine/run_status` (a latched, typed
  `refine_ros_interfaces/RunStatus`, also published at start and after every round) and its process
  ends, so `ros2 launch` can end the whole launch (see the launch files' `keep_alive`). A run
  that failed ends the process with exit status 1 (`EXIT_FAILED`) and its reason as the last
  error line, so the launch, `refine up` and a script can tell it from a finished run.
- A foreseeable mistake of the operator (no demonstration recorded yet) is one error line that
  says what to run, never a traceback; a traceback is kept for what is a bug.

Topics: docs/ROS_INTERFACES.md; the request/answer shapes: `refine_ros.wire.protocol`.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path
from typing import Any

from rclpy.node import Node

from refine_core.analyst.factory import ANALYST_NAMES, make_analyst
from refine_core.analyst.labels import describe_analyst
from refine_core.analyst.transcript import REPLAY_MODES, start_transcript
from refine_core.loop import (
    DEMONSTRATION_SOURCES,
    RefineConfig,
    RefineResult,
    refine,
    resolve_defaults,
)
from refine_core.rollout.demo import DemonstrationError
from refine_core.run_setup import (
    recorded_settings,
    recorded_start,
    recording_settings,
    start_from_file,
)
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task, task_names
from refine_core.tasks.spec import DESCRIPTION_VARIANTS
from refine_ros.bringup.spin import destroy_actions
from refine_ros.loop.graph import GraphEpisodes, GraphError, GraphFitter, GraphPolisher, LearnerLink
from refine_ros.nodes._main import run_node
from refine_ros.params import Param, StartRefused, declare_parameters, refusing, values
from refine_ros.teleop.recording import how_to_record
from refine_ros.wire import protocol, qos
from refine_ros_interfaces.msg import RunStatus

_DEFAULT = RefineConfig()  # the method's defaults live in refine_core, once
SHUTDOWN_WAIT_S = 2.0
"""How long destroy_node waits for the method's thread (`ros2 launch` escalates after 5 s)."""
EXIT_FAILED = 1
"""The process's exit status when the run failed (0: it finished)."""

# A setting of the method is named as its RefineConfig field (and so as its `refine run` flag);
# the older names still work, with a warning (test/test_node_registry.py checks the names).
PARAMETERS: dict[str, Param] = {
    "task": Param("door_open", f"task name ({' | '.join(task_names())})"),
    "run_dir": Param("runs/ros", "run directory; the database is <run_dir>/run.db"),
    "analyst": Param("offline", f"who writes programs and diagnostics: {' | '.join(ANALYST_NAMES)}"),
    "transcript": Param("", "JSONL transcript: openai / record write it, replay answers from it"),
    "replay_mode": Param("exact", f"replay: {' | '.join(REPLAY_MODES)} (sequential answers each role in recorded "
                         "order and records every request that differs)"),
    "task_description": Param("", f"what the analyst is told: {' | '.join(DESCRIPTION_VARIANTS)}; '' = the "
                              "replayed transcript's, else the task's default (published)"),
    "start_program": Param("", "a program file the run begins from instead of a zero-shot one; '' = the replayed "
                           "transcript's start, else ask the analyst"),
    "max_rounds": Param(_DEFAULT.max_rounds, "most refinement rounds (a resumed run counts its committed ones)",
                        (1, 1000), aliases=("rounds",)),
    "max_attempts": Param(_DEFAULT.max_attempts, "build/fit attempts per round before the round fails", (1, 100)),
    "max_test_requests": Param(_DEFAULT.max_test_requests, "'more tests' answers executed per round", (0, 100)),
    "diagnostic_episodes": Param(_DEFAULT.diagnostic_episodes, "diagnostic episodes per round (the table the "
                                 "analyst's code reads)", (0, 100), aliases=("episodes",)),
    "selection_episodes": Param(_DEFAULT.selection_episodes, "selection episodes per round (choose the best "
                                "round)", (0, 100)),
    "eval_episodes": Param(_DEFAULT.eval_episodes, "evaluation episodes per round (reported only)", (0, 1000)),
    "max_steps": Param(0, "cap on episode length; 0 = the task's episode length", (0, 1_000_000)),
    "action_mode": Param("", "mean: execute the Gaussian's mean; sample: draw from it (seeded by the episode's "
                         "seed); '' = the replayed transcript's, else on a robot (`robot` set) the task's deployed mode "
                         "(the mean action), else the mode the task's published results were verified in (car "
                         "mean, door sample)"),
    "diagnostics_see_demo": Param("", "'true': the analysis code also reads the demonstration table (a departure "
                                  "from the published method); 'false': the rollout table only; '' = the replayed "
                                  "transcript's, else off for a language model and on for the offline analyst"),
    "expert_labels": Param(_DEFAULT.expert_labels, "relabel rollout states with the scripted expert "
                           "(privileged; simulation only)"),
    "demonstration": Param(_DEFAULT.demonstration, f"{' | '.join(DEMONSTRATION_SOURCES)}: 'expert' records the "
                           "simulated expert if the run has no demonstration; 'recorded' (robots) never does"),
    "best_round_by": Param(_DEFAULT.best_round_by, "what chooses the best round: metric (a simulator's reward) | "
                           "operator (the operator's logger/label_episode verdicts on live episodes) | signal (each "
                           "episode's measured success); when it tells no rounds apart the earliest is kept, and "
                           "the run says so"),
    "demo_takes": Param(_DEFAULT.demo_takes, "the recorded takes every fit uses: '' = all the run's takes, "
                        "concatenated take after take; '0,2' = those takes"),
    "rl_resets": Param(_DEFAULT.rl_resets, "training episodes of post-refinement RL on the best round, driven by the "
                       "learner (learner/run_rl) on the sim node or the robot, where each is an operator reset "
                       "(0 = none)", (0, 1_000_000)),
    "rl_preset": Param(_DEFAULT.rl_preset, "that RL's named settings: ours (the default: trust region, checkpoints "
                       "accepted in the deployed mode) | published (METHOD.md exactly)"),
    "rl": Param("", "RLConfig fields over the preset, as a JSON object ('' = none), e.g. "
                '{"group_size": 10}'),
    "sandbox_timeout_s": Param(_DEFAULT.sandbox_timeout_s, "seconds one diagnostics script may run", (1.0, 86400.0),
                               aliases=("sandbox_timeout",)),
    "robot": Param("", "the robot profile this run drives ('' = a simulator): a run without its demonstration "
                   "says how to record one on it"),
    "flush_timeout": Param(30.0, "seconds to wait for the logger to commit a round's episodes", (0.0, 3600.0)),
}


def _switch(text: str, recorded: bool | None) -> bool | None:
    """A '' / 'true' / 'false' parameter: '' leaves it to `recorded` (None: the default)."""
    word = text.strip().lower()
    if word in ("", "default"):
        return recorded
    if word in ("true", "1", "on", "yes"):
        return True
    if word in ("false", "0", "off", "no"):
        return False
    raise ValueError(f"diagnostics_see_demo must be 'true', 'false' or '', got {text!r}")


class AnalysisNode(Node):
    """Runs `refine()` once, on a worker thread; `finished` is set when it is over."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("analysis_node", **kwargs)
        declare_parameters(self, PARAMETERS)
        p = values(self, PARAMETERS)
        analyst, transcript = str(p["analyst"]), str(p["transcript"]) or None
        replayed = recorded_settings(transcript) if analyst == "replay" and transcript else None
        description = str(p["task_description"]) or (replayed or {}).get("task_description")
        self.task = get_task(str(p["task"]), description)
        self.start = (start_from_file(str(p["start_program"])) if str(p["start_program"])
                      else recorded_start(replayed))
        self.run_dir = Path(str(p["run_dir"]))
        with refusing(self):
            rl = _rl_settings(str(p["rl_preset"]), str(p["rl"]), int(p["rl_resets"]))
        self.config = RefineConfig(
            max_rounds=int(p["max_rounds"]), max_attempts=int(p["max_attempts"]),
            max_test_requests=int(p["max_test_requests"]), diagnostic_episodes=int(p["diagnostic_episodes"]),
            selection_episodes=int(p["selection_episodes"]), eval_episodes=int(p["eval_episodes"]),
            max_steps=int(p["max_steps"]) or None,
            # a robot runs its task's deployed mode (the mean action: no sampled jitter on hardware)
            action_mode=str(p["action_mode"]) or (replayed or {}).get("action_mode")
            or (self.task.spec.deployed_mode if str(p["robot"]).strip() else None),
            diagnostics_see_demo=_switch(str(p["diagnostics_see_demo"]), (replayed or {}).get("diagnostics_see_demo")),
            expert_labels=bool(p["expert_labels"]), demonstration=str(p["demonstration"]),
            demo_takes=str(p["demo_takes"]), best_round_by=str(p["best_round_by"]),
            rl_resets=int(p["rl_resets"]), rl_preset=str(p["rl_preset"]), rl=rl,
            sandbox_timeout_s=float(p["sandbox_timeout_s"]))
        self.analyst = make_analyst(analyst, transcript=transcript,
                                    max_test_requests=self.config.max_test_requests, replay_mode=str(p["replay_mode"]))
        self.config = resolve_defaults(self.config, self.task.spec, self.analyst)
        if transcript and analyst in ("openai", "record"):  # the analyst carries the settings a replay needs
            start_transcript(transcript, recording_settings(self.task.spec.name, self.task.spec.description_variant,
                                                            self.config, self.analyst, self.start,
                                                            self.analyst.backend.model), resume=True)
        self.flush_timeout = float(p["flush_timeout"])

        self.pub_status = self.create_publisher(RunStatus, protocol.RUN_STATUS, qos.LATCHED)
        self.closing = threading.Event()
        self.finished = threading.Event()
        """Set when `refine()` returned (or failed) and the status is published."""
        self.result: RefineResult | None = None
        self.rounds_done = 0
        """Rounds committed by this node's run so far (progress for `refine up`)."""
        self.stop_reason = ""
        self.failed = False
        """The run ended without finishing: the process exits with EXIT_FAILED."""
        self.robot = str(p["robot"]).strip()
        self.link = LearnerLink(self, self.closing)
        self.get_logger().info(f"{describe_analyst(self.analyst)} Task {self.task.spec.name}, description "
                               f"{self.task.spec.description_variant}, run directory {self.run_dir}")
        self._publish_status(RunStatus.RUNNING)
        self._thread = threading.Thread(target=self._work, name="refine", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        db = None
        try:
            db = RunDatabase(self.run_dir)
            # refine() opens (or resumes) the directory's latest run before it fits anything
            fitter = GraphFitter(self.link, run_id=lambda: int(db.latest_run()["id"]), log=self.get_logger().info)
            episodes = GraphEpisodes(self.link, db, self.config.action_mode, self.config.max_steps,
                                     self.config.expert_labels, self.flush_timeout, log=self.get_logger().info)
            polisher = GraphPolisher(self.link, self.config.rl_preset, log=self.get_logger().info)
            self.result = refine(self.task, self.analyst, db, self.config, fitter=fitter, episodes=episodes,
                                 polisher=polisher, resume=True, on_round=self._on_round, start=self.start)
            self.stop_reason = self.result.stop_reason
            self._record_replay(db)
        except DemonstrationError as exc:  # the operator has not recorded one yet: say what to run
            how = f": {how_to_record(self.robot, self.run_dir)}" if self.robot else ""
            self._fail(f"{exc}{how}", db)
        except GraphError as exc:
            if self.closing.is_set():  # shut down (Ctrl-C, the launch ending): interrupted, not failed
                self.stop_reason = f"interrupted: {exc}"
                self._record_failure(db)
            else:
                self._fail(f"the node graph could not continue: {exc}", db)
        except Exception as exc:  # a broken run is reported and recorded, never a hang
            self.get_logger().error(f"the refinement run failed:\n{traceback.format_exc()}")
            self._fail(f"analysis node failed: {type(exc).__name__}: {exc}", db)
        finally:
            if db is not None:
                db.close()
            if self.failed:
                self.get_logger().error(f"the run failed: {self.stop_reason}")
            else:
                self.get_logger().info(f"stopped: {self.stop_reason}")
            self._publish_status(RunStatus.FINISHED)
            self.finished.set()

    def _fail(self, reason: str, db: RunDatabase | None) -> None:
        self.failed, self.stop_reason = True, reason
        self._record_failure(db)

    def _record_replay(self, db: RunDatabase) -> None:
        """How a replay went (divergences from the recording), in the run's events."""
        report = getattr(self.analyst, "replay_report", None)
        if report is None or db.latest_run() is None:
            return
        data = report()
        message = (f"{data['mode']} replay of {data['transcript']} (model {data['model']}): "
                   f"{len(data['divergences'])} of {data['requests']} requests differed from the recording")
        db.log_event(db.latest_run()["id"], None, "replay", message, data=data)
        self.get_logger().info(message)

    def _on_round(self, record) -> None:
        self.rounds_done += 1
        self._publish_status(RunStatus.RUNNING, last_round=record.round, decision=record.decision or "")

    def _record_failure(self, db: RunDatabase | None) -> None:
        """An event, not the end of the run: the committed rounds stay, and starting the graph
        again resumes from the last one."""
        if db is None or db.latest_run() is None:
            return
        try:
            db.log_event(db.latest_run()["id"], None, "run_interrupted", self.stop_reason)
        except Exception:  # noqa: BLE001 - the status must still go out
            self.get_logger().error(f"could not record the interruption:\n{traceback.format_exc()}")

    def _publish_status(self, state: int, last_round: int = -1, decision: str = "") -> None:
        """A typed refine_ros_interfaces/RunStatus: `ros2 topic echo /refine/run_status` reads it."""
        status = RunStatus(state=state, task=self.task.spec.name, run_dir=str(self.run_dir),
                           reason=self.stop_reason if state == RunStatus.FINISHED else "",
                           rounds_done=self.rounds_done, last_round=int(last_round), decision=decision)
        try:
            self.pub_status.publish(status)
        except Exception:  # noqa: BLE001 - after destroy_node (a shutdown that outlasted the wait) nobody listens
            if not self.closing.is_set():
                raise

    def destroy_node(self) -> None:
        """Ends a waiting `refine()` (its wait raises GraphError); an analyst call or sandbox
        run still going after SHUTDOWN_WAIT_S dies with the process, its round uncommitted."""
        self.closing.set()
        self._thread.join(SHUTDOWN_WAIT_S)
        destroy_actions(self)
        super().destroy_node()


def _rl_settings(preset: str, text: str, resets: int) -> dict:
    """The `rl` parameter as RLConfig fields, checked with `rl_preset` and `rl_resets`
    now, so that a setting RLConfig refuses stops the node before the run, not after its rounds."""
    try:
        settings = protocol.rl_settings(text)
        protocol.rl_config(preset, {**({"reset_budget": resets} if resets else {}), **settings})
    except protocol.ProtocolError as exc:
        raise StartRefused(f"analysis_node: rl_preset / rl / rl_resets: {exc}") from None
    return settings


def main(args: list[str] | None = None) -> None:
    """Runs until the method is over, then lingers briefly so the latched status reaches late
    readers before this process (and its transient-local history) goes away; exits with
    EXIT_FAILED when the run failed."""
    run_node(AnalysisNode, args, until=lambda node: node.finished.is_set(), linger=2.0,
             exit_code=lambda node: EXIT_FAILED if node.failed else 0)


if __name__ == "__main__":
    main()
