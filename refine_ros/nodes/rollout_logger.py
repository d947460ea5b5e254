"""Rollout logger node: every step seen on DDS becomes a row of the run database's `steps` table.

A thin node, like the ros2/demos: it declares its parameters, subscribes to every step stream
with the deep LOG QoS (so a slow disk never makes a control-loop publisher drop or wait) and
hands each message to the writer thread (`refine_ros.logger.writer.LogWriter`), which joins the
streams into rows (`refine_ros.logger.rows`), keeps the episodes' books
(`refine_ros.logger.episodes`) and writes through `refine_core.store` only.

Services: `logger/flush` (std_srvs/Trigger) answers once every message queued before the call
is committed; `logger/label_episode` (std_srvs/SetBool) stores an operator's success/failure
label for the episode that ended last (settled or not). Topics and QoS: docs/ROS_INTERFACES.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool, Trigger

from refine_ros.logger.writer import FLUSH_TIMEOUT_S, LogWriter
from refine_ros.nodes._bridge import RESULT_TOPIC
from refine_ros.nodes._main import TEARDOWN_S, run_node
from refine_ros.params import Param, declare_parameters, values
from refine_ros.wire import qos
from refine_ros_interfaces.msg import Step

__all__ = ["PARAMETERS", "LogWriter", "RolloutLogger", "main"]

TOPICS = {
    "observation": "refine/observation",
    "policy_step": "refine/policy_step",
    "action": "refine/action",
    "reward": "refine/reward",
    "expert": "refine/expert_action",
}
COMMAND_STREAMS = ("action",)
"""Streams on the command path's counted Float64MultiArray; the others are Step messages that
carry their column names (refine_ros/wire/messages.py says why)."""
SAFE_TOPIC = "refine/safe_action"  # with log_safe_action: what the safety node sent the robot
COLUMN_TOPICS = {
    "observation": "refine/observation_columns",
    "policy_step": "refine/policy_step_columns",
}

PARAMETERS: dict[str, Param] = {
    "run_dir": Param("runs/ros", "run directory; the database is <run_dir>/run.db"),
    "task": Param("", "task name (a registered task): action and observation columns"),
    "run_id": Param(0, "run to log into; 0 = from episode events, else the latest run (or a new one)", (0, 2**31 - 1)),
    "round": Param(-1, "round for steps of unannounced episodes (-1: none)", (-1, 100000)),
    "kind": Param("diagnostic", "episode kind for steps of unannounced episodes"),
    "batch_size": Param(500, "rows per INSERT batch", (1, 100000)),
    "flush_period": Param(0.2, "seconds between transactions", (0.01, 10.0)),
    "join_timeout": Param(0.5, "seconds a row waits for its other streams before it is written", (0.01, 10.0)),
    "store_step_kinds": Param(["diagnostic"], "episode kinds whose steps are stored (as `refine run`: diagnostic); "
                         "['all'] = every kind; every episode still gets its episodes row"),
    "log_unannounced": Param(True, "log steps of episodes no start event announced under `round`/`kind` (false on "
                        "robots: their bridge publishes observations between episodes)"),
    "flush_timeout": Param(30.0, "seconds logger/flush waits for announced episode ends to be committed", (0.1, 3600.0)),
    "log_safe_action": Param(False, "also log the safety node's refine/safe_action as safe_<action> columns (what the "
                        "robot was sent; a row waits up to 5 join timeouts for it, then gets NaN: no safe "
                        "command for that step, e.g. dry run or a command the safety node skipped for a newer one) "
                        "and the bridge's refine/command_result as halted / rejected (a stop went out instead; "
                        "the driver refused the command)"),
}


class RolloutLogger(Node):
    """Subscribes to every step stream with the LOG QoS and hands messages to a `LogWriter`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("rollout_logger", **kwargs)
        declare_parameters(self, PARAMETERS)
        p = values(self, PARAMETERS)
        action_names: tuple[str, ...] = ()
        observation_columns: tuple[str, ...] = ()
        if p["task"]:
            from refine_core.tasks import get_task

            spec = get_task(str(p["task"])).spec
            action_names, observation_columns = spec.action_names, spec.observation_columns
        kinds = tuple(str(k) for k in (p["store_step_kinds"] or ()))
        self.flush_timeout = float(p["flush_timeout"])
        self.writer = LogWriter(
            Path(str(p["run_dir"])),
            task=str(p["task"]),
            run_id=int(p["run_id"]),
            round=None if int(p["round"]) < 0 else int(p["round"]),
            kind=str(p["kind"]),
            action_names=action_names,
            observation_columns=observation_columns,
            batch_size=int(p["batch_size"]),
            flush_period=float(p["flush_period"]),
            join_timeout=float(p["join_timeout"]),
            store_step_kinds=None if "all" in kinds else kinds,
            log_unannounced=bool(p["log_unannounced"]),
            log_safe_action=bool(p["log_safe_action"]),
            log=lambda text: self.get_logger().info(text),
        )
        self.writer.start()

        put = self.writer.put
        for stream, topic in TOPICS.items():
            kind = Float64MultiArray if stream in COMMAND_STREAMS else Step
            self.create_subscription(kind, topic, lambda msg, s=stream: put(s, msg), qos.LOG)
        for stream, topic in COLUMN_TOPICS.items():
            self.create_subscription(
                String, topic, lambda msg, s=stream: put(s + "_columns", msg), qos.LATCHED
            )
        if self.writer.log_safe_action:
            self.create_subscription(Float64MultiArray, SAFE_TOPIC, lambda msg: put("safe", msg), qos.LOG)
            self.create_subscription(Float64MultiArray, RESULT_TOPIC, lambda msg: put("result", msg), qos.LOG)
        self.create_subscription(
            String, "refine/episode_events", lambda msg: put("events", msg), qos.LATCHED
        )
        self.create_service(SetBool, "logger/label_episode", self._on_label)
        self.create_service(Trigger, "logger/flush", self._on_flush)
        stored = "every kind" if self.writer.store_step_kinds is None else ", ".join(sorted(kinds)) or "no kind"
        self.get_logger().info(f"logging to {self.writer.db_path}; steps stored for {stored}")

    def _on_label(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.success, response.message = self.writer.label(bool(request.data))
        return response

    def _on_flush(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.writer.flush(self.flush_timeout)
        return response

    def destroy_node(self) -> None:
        self.writer.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(RolloutLogger, args, teardown_s=FLUSH_TIMEOUT_S + TEARDOWN_S)  # a backlog may still be flushing


if __name__ == "__main__":
    main()
