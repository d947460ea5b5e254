"""Analysis node: the analyst's side of the loop, driven by round events over DDS.

Why it is built this way:
- It owns the run's bookkeeping (run, demonstration, rounds, LLM calls, analyses) and uses the
  stage functions of `refine_core.stages` for every step of the method, so a run through the
  node graph leaves the same rows as `refine run`; only episodes and steps come from the
  rollout logger, which saw them on DDS.
- Subscription callbacks only queue the payloads; one worker thread runs the analyst, the
  sandboxed diagnostics and the commits in order. Analyst calls may take minutes (an LLM) and
  must never stall an executor.
- After `refine/round_complete` it waits until the logger has committed the round's
  diagnostic episodes (the `logger/flush` Trigger service when the logger offers it, then the
  episodes' `complete` flags and step counts in the database), so the diagnostics read the
  whole table, never a partial one.

Round protocol: `refine_ros.round_protocol`; topics: docs/ROS_INTERFACES.md.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from std_msgs.msg import String
from std_srvs.srv import Trigger

from refine_core import stages
from refine_core.analyst.factory import ANALYST_NAMES, make_analyst
from refine_core.policy.contract import InfoSchema
from refine_core.store.db import RunDatabase
from refine_core.tasks.registry import get_task
from refine_ros import qos
from refine_ros.messages import pack_json
from refine_ros.nodes._main import run_node
from refine_ros.params import Bounds, declare_parameters
from refine_ros.round_protocol import (
    ProtocolError,
    decode_bundle,
    parse_fit,
    parse_round,
    program_payload,
)

PARAMETERS: dict[str, tuple[Any, str, Bounds]] = {
    "task": ("door_open", "task name (door_open | car_racing)", None),
    "run_dir": ("runs/ros", "run directory; the database is <run_dir>/run.db", None),
    "analyst": ("offline", f"who writes programs and diagnostics: {' | '.join(ANALYST_NAMES)}", None),
    "transcript": ("", "JSONL transcript for the record / replay analysts", None),
    "rounds": (6, "most refinement rounds (a resumed run counts its committed rounds)", (1, 1000)),
    "max_attempts": (5, "build/fit attempts per round before the round fails", (1, 100)),
    "max_test_requests": (2, "'more tests' answers executed per round", (0, 100)),
    "sandbox_timeout": (120.0, "seconds one diagnostics script may run", (1.0, 86400.0)),
    "flush_timeout": (30.0, "seconds to wait for the logger to commit a round's episodes", (0.0, 3600.0)),
}


class _NodeReporter(stages.Reporter):
    """The loop's progress lines, sent to the node's logger instead of stdout."""

    def __init__(self, node: Node) -> None:
        super().__init__(verbose=True)
        self._logger = node.get_logger()

    def say(self, message: str) -> None:
        self._logger.info(message)


class AnalysisNode(Node):
    """Publishes programs on `refine/program`, reads fit results and finished rounds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("analysis_node", **kwargs)
        declare_parameters(self, PARAMETERS, read_only=True)
        value = lambda name: self.get_parameter(name).value  # noqa: E731
        self.task = get_task(str(value("task")))
        self.spec = self.task.spec
        self.run_dir = Path(str(value("run_dir")))
        self.analyst_name = str(value("analyst"))
        transcript = str(value("transcript")) or None
        self.analyst = make_analyst(self.analyst_name, transcript=transcript, task=self.task)
        self.config = stages.LoopConfig(
            max_rounds=int(value("rounds")), max_attempts=int(value("max_attempts")),
            max_test_requests=int(value("max_test_requests")),
            sandbox_timeout_s=float(value("sandbox_timeout")), verbose=True,
        )
        self.flush_timeout = float(value("flush_timeout"))

        group = ReentrantCallbackGroup()
        self.pub_program = self.create_publisher(String, "refine/program", qos.LATCHED)
        self.create_subscription(String, "refine/fit_result", lambda m: self._inbox.put(("fit", m)),
                                 qos.LATCHED, callback_group=group)
        self.create_subscription(String, "refine/round_complete", lambda m: self._inbox.put(("round", m)),
                                 qos.LATCHED, callback_group=group)
        self.flush_client = self.create_client(Trigger, "logger/flush", callback_group=group)

        self.finished = threading.Event()
        """Set once the run is over and the stop has been published."""
        self.stop_reason = ""
        self.best: stages.RoundRecord | None = None
        self.rounds: list[stages.RoundRecord] = []
        self.run_id: int | None = None
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._closing = threading.Event()
        kind = "an LLM" if getattr(self.analyst, "is_llm", False) else "rule-based, not an LLM"
        self.get_logger().info(f"analyst: {self.analyst.name} ({kind})")
        self._thread = threading.Thread(target=self._work, name="analysis-worker", daemon=True)
        self._thread.start()

    # -- worker thread ------------------------------------------------------------------------
    def _work(self) -> None:
        self.db: RunDatabase | None = None
        try:
            self.db = RunDatabase(self.run_dir)
            if self._start():
                self._serve()
        except Exception:  # a broken run is reported and ends the run, never hangs it
            self.get_logger().error(f"analysis node failed:\n{traceback.format_exc()}")
            self._stop(f"analysis node failed: {traceback.format_exc(limit=1).strip().splitlines()[-1]}")
        finally:
            if self.db is not None:
                self.db.close()

    def _start(self) -> bool:
        db, spec = self.db, self.spec
        self.log = _NodeReporter(self)
        self.run_id = int(stages.open_run(db, self.task, self.analyst, self.config, resume=True))
        self.demo = stages.demonstration(db, self.run_id, self.task, self.log)
        state = stages.resume_state(db, self.run_id, spec)
        self.rounds, self.best = list(state.rounds), state.best
        if state.finished:
            self._stop(f"run {self.run_id} already finished: {state.stop_reason}", finish=False)
            return False
        if state.next_round >= self.config.max_rounds:
            self._stop(f"reached max_rounds={self.config.max_rounds}")
            return False
        self.pending = stages.PendingCalls()
        self.round = state.next_round
        program = state.next_program
        if program is None:
            answer = self.analyst.generate(spec)
            self.pending.add(answer.calls, role="generate")
            program = answer.program or ""
            self.log.say(f"round {self.round}: {self.analyst.name} wrote the zero-shot program")
        elif state.rounds:
            self.log.say(f"resuming run {self.run_id} at round {self.round}")
        self._begin_round(program)
        return True

    def _begin_round(self, program: str) -> None:
        self.timer = stages.StageTimer()
        self.attempts: list[dict] = []
        self.fit: stages.FitOutcome | None = None
        self.diagnostics = None
        self._publish_program(program, attempt=1)

    def _publish_program(self, program: str, attempt: int) -> None:
        self.program, self.attempt = program, attempt
        self._fit_started = time.perf_counter()
        self.pub_program.publish(pack_json(program_payload(
            self.round, "program", program, reason=f"round {self.round}, attempt {attempt}",
            attempt=attempt, run_id=self.run_id)))

    def _serve(self) -> None:
        while not self._closing.is_set() and not self.finished.is_set():
            try:
                kind, msg = self._inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                payload = json.loads(msg.data)
                if kind == "fit":
                    self._on_fit(parse_fit(payload))
                else:
                    self._on_round(parse_round(payload))
            except (ValueError, ProtocolError) as exc:
                self.get_logger().error(f"ignored a malformed {kind} message: {exc}")

    def _on_fit(self, fit: dict) -> None:
        if (fit["round"], fit["attempt"]) != (self.round, self.attempt) or self.fit is not None:
            return  # a latched copy from earlier, or not the program we are waiting for
        self.timer.seconds["fit"] = self.timer.seconds.get("fit", 0.0) + time.perf_counter() - self._fit_started
        error = fit.get("error") if not fit["ok"] else None
        self.attempts.append({"attempt": self.attempt, "error": error})
        if error is not None:
            self.log.say(f"fit attempt {self.attempt}/{self.config.max_attempts} failed: {error}")
            if self.attempt >= self.config.max_attempts:
                failed = stages.FitOutcome(program=self.program, attempts=self.attempts, error=error)
                record = stages.failed_round(self.run_id, self.round, failed, self.timer, self.pending)
                stages.commit_round(self.db, record, self.pending)
                self.rounds.append(record)
                self._stop(f"round {self.round}: no program could be fitted ({error})")
                return
            answer = self.analyst.generate(self.spec, failed_program=self.program, error=error)
            self.pending.add(answer.calls, role="regenerate")
            if not answer.ok:
                self.attempts[-1]["regenerate_error"] = answer.error
            self._publish_program(answer.program or "", self.attempt + 1)
            return
        info = fit.get("info_schema") or {}
        self.fit = stages.FitOutcome(
            program=self.program, bundle=decode_bundle(fit["bundle_b64"]), report=fit.get("report"),
            info_schema=InfoSchema(tuple(info.get("weights", ())), tuple(info.get("latents", ())),
                                   tuple(info.get("warnings", ()))),
            attempts=self.attempts,
        )
        # the diagnostics see names only, so they are written while the episodes run
        schema = stages.table_schema(self.spec, self.fit.info_schema)
        with self.timer("diagnose"):
            self.diagnostics = self.analyst.diagnose(self.spec, self.program, schema)
        self.pending.add(self.diagnostics.calls, role="diagnose")
        self._rollout_started = time.perf_counter()

    def _on_round(self, done: dict) -> None:
        if done["round"] != self.round or self.fit is None or self.diagnostics is None:
            return
        self.timer.seconds["rollout"] = time.perf_counter() - self._rollout_started
        control = done.get("control_ms") or {}
        if control:
            self.log.say(f"round {self.round}: learner control callback p50 {control.get('p50', 0):.2f} ms, "
                         f"p99 {control.get('p99', 0):.2f} ms over {control.get('steps', 0)} steps")
        wanted = [e for e in done["episodes"] if e.get("kind") == "diagnostic"]
        self._wait_for_logger(wanted)
        table = self.db.load_steps(self.run_id, self.round, kind="diagnostic")
        if len(table) == 0 and wanted:
            self.log.say(f"round {self.round}: the logger wrote no diagnostic steps")
        rollouts = stages.Rollouts(diagnostic=table, episodes=[], metrics=done["metrics"],
                                   errors=list(done.get("errors", [])))
        with self.timer("analysis"):
            inner = stages.inner_loop(self.analyst, self.spec, self.program, self.diagnostics, rollouts,
                                      self.demo, self.config, self.pending, self.log)
        record = stages.committed_round(self.run_id, self.round, self.fit, self.diagnostics, rollouts, inner,
                                        self.timer)
        stages.commit_round(self.db, record, self.pending)  # episodes and steps: the logger's rows
        self.rounds.append(record)
        if stages.is_better(self.spec, record, self.best):
            self.best = record
        self.log.round_summary(record, self.best)
        if inner.decision.kind != "program":
            self._stop(inner.stop_reason or f"round {self.round} decided {inner.decision.kind}")
        elif self.round + 1 >= self.config.max_rounds:
            self._stop(f"reached max_rounds={self.config.max_rounds}")
        else:
            self.round += 1
            self._begin_round(inner.decision.program or "")

    def _wait_for_logger(self, wanted: list[dict]) -> None:
        """Until every diagnostic episode the learner drove is closed in the database with all
        its steps, or `flush_timeout` passes (then the analysis reads what is there)."""
        deadline = time.monotonic() + self.flush_timeout
        if self.flush_client.wait_for_service(timeout_sec=0.5):
            done = threading.Event()
            self.flush_client.call_async(Trigger.Request()).add_done_callback(lambda _f: done.set())
            done.wait(max(0.0, deadline - time.monotonic()))
        pause = threading.Event()
        while True:
            missing = self._unlogged(wanted)
            if not missing or time.monotonic() >= deadline:
                break
            pause.wait(0.05)  # no flush service: the logger commits within its join timeout
        if missing:
            text = ", ".join(missing)
            self.log.say(f"round {self.round}: the logger has not committed {text} after {self.flush_timeout:g} s")
            self.db.log_event(self.run_id, self.round, "logger_incomplete", text)

    def _unlogged(self, wanted: list[dict]) -> list[str]:
        missing = []
        for ep in wanted:
            row = self.db.conn.execute(
                "SELECT complete, steps FROM episodes WHERE run_id = ? AND round = ? AND kind = ? AND episode = ?",
                (self.run_id, self.round, ep["kind"], ep["episode"]),
            ).fetchone()
            if row is None or row[0] is None or int(row[1] or 0) < int(ep.get("steps", 0)):
                missing.append(f"{ep['kind']} episode {ep['episode']}")
        return missing

    def _stop(self, reason: str, finish: bool = True) -> None:
        self.stop_reason = reason
        if finish and self.db is not None and self.run_id is not None:
            try:
                stages.finish_run(self.db, self.run_id, self.best, reason)
            except Exception:  # the stop must still be published
                self.get_logger().error(f"could not record the end of the run:\n{traceback.format_exc()}")
        self.get_logger().info(f"stopped: {reason}")
        self.pub_program.publish(pack_json(program_payload(
            getattr(self, "round", 0), "stop", reason=reason, run_id=self.run_id or 0)))
        self.finished.set()

    def destroy_node(self) -> None:
        self._closing.set()
        self._thread.join(10.0)
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    """Runs until the run is over (then lingers briefly so the latched stop reaches the
    learner before this process and its transient-local history go away)."""
    run_node(AnalysisNode, args, until=lambda node: node.finished.is_set(), linger=2.0)


if __name__ == "__main__":
    main()
