"""The README's twin rehearsal at full size, with this script as the operator and the gamepad.

What a person does at the robot, done by a script so that the whole workflow can be measured:
`refine up <profile>_record_demo --twin --processes` records `--takes` takes (the gamepad's stick
held with the dead-man button down, demo/start, demo/stop, demo/label true, demo/keep; the
twin put back between takes as a person resets the scene), then `refine up <profile> --twin
--processes` fits them and runs `--rounds` refinement rounds whose episodes run live on the
twin, each confirmed by the operator, the twin reset after each (and, with `--rl-resets`,
post-refinement RL's episodes the same way). Every node is its own process;
the gamepad (sensor_msgs/Joy on /joy) and the operator's service calls are this process.

    python tools/rehearse_twin.py --robot arm --run runs/arm_twin
    python tools/rehearse_twin.py --robot car --run runs/car_twin

Any registered robot works (refine_ros/robots/registry.py): its descriptor gives the profile,
the twin node, the task and the stick a take holds.

Prints a JSON summary from the run database: the takes, the fit, the rounds and their
episodes, and how many steps reached the driver through the safety node. The short version of
this runs in CI (test/test_ros_twin_rehearsal.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from refine_ros.bench.faults import Harness as FaultHarness
from refine_ros.robots.registry import get_robot, robot_names
from refine_ros.teleop.maps import AXES, BUTTON_LEFT_SHOULDER


def rehearsal(robot: str) -> tuple[str, str, dict[int, float], str]:
    """The robot's profile, its twin node, the stick a take holds (axis index -> value) and its
    task, from its descriptor."""
    described = get_robot(robot)
    stick = {AXES[axis]: value for axis, value in described.take_stick.items()}
    return described.profile, described.twin, stick, described.task


def pad_buttons(robot: str) -> tuple[int, dict[int, int]]:
    """The teleop's dead-man (the record profile's joy_teleop enable_button) and the buttons
    held while the policy drives (the descriptor's twin_pad: F1TENTH's RB)."""
    from refine_ros.bringup import resolve_profile

    described = get_robot(robot)
    teleop = resolve_profile(described.record_profile, check_modules=False).node("joy_teleop").parameters
    return int(teleop.get("enable_button", BUTTON_LEFT_SHOULDER)), dict(described.twin_pad)


def _up(profile: str, run_dir: Path, log: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "refine_core.cli", "up", profile, "--twin", "--processes", "--run", str(run_dir),
           *extra]  # fmt: skip
    print("$", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    return subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


class Operator:
    """The gamepad and the person at the robot, as one rclpy node spun on a thread."""

    def __init__(self, twin: str, deadman: int = BUTTON_LEFT_SHOULDER, autonomy: dict[int, int] | None = None) -> None:
        self.deadman, self.autonomy = deadman, dict(autonomy or {})
        import rclpy
        from rclpy.node import Node
        from sensor_msgs.msg import Joy
        from std_msgs.msg import String
        from std_srvs.srv import SetBool, Trigger

        from refine_ros.bringup.spin import NodeSpinner
        from refine_ros.wire import qos
        from refine_ros.wire.messages import unpack_json

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = node = Node("rehearsal_operator", context=self.context)
        self.Joy, self.Trigger, self.SetBool, self.unpack_json = Joy, Trigger, SetBool, unpack_json
        self.axes, self.buttons = [0.0] * 6, [0] * 15
        self.lock = threading.Lock()
        self.ends = 0  # episode end events seen
        self.recorder_state = ""
        self.pad = node.create_publisher(Joy, "joy", qos.SENSOR)
        node.create_timer(0.02, self._joy)
        node.create_subscription(String, "demo/status", self._on_demo, qos.LATCHED)
        node.create_subscription(String, "refine/episode_events", self._on_event, qos.LATCHED)
        self.clients = {name: node.create_client(Trigger, f"demo/{name}") for name in ("start", "stop", "keep")}
        self.label = node.create_client(SetBool, "demo/label")
        self.confirm_client = node.create_client(Trigger, "safety/confirm_episode")
        self.reset_client = node.create_client(Trigger, f"{twin}/reset")
        self.spinner = NodeSpinner([node], self.context).start()

    def _joy(self) -> None:
        with self.lock:
            msg = self.Joy(axes=list(self.axes), buttons=list(self.buttons))
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.pad.publish(msg)

    def _on_demo(self, msg) -> None:
        self.recorder_state = str(self.unpack_json(msg).get("state", ""))

    def _on_event(self, msg) -> None:
        if self.unpack_json(msg).get("event") == "end":
            with self.lock:
                self.ends += 1

    def hold(self, stick: dict[int, float]) -> None:
        with self.lock:
            self.axes = [stick.get(i, 0.0) for i in range(6)]
            self.buttons = [1 if (i == self.deadman and stick) else 0 for i in range(15)]

    def drive_autonomously(self) -> None:
        """Hold the buttons the policy needs (F1TENTH's RB) and nothing else."""
        with self.lock:
            self.axes = [0.0] * 6
            self.buttons = [self.autonomy.get(i, 0) for i in range(15)]

    call = FaultHarness.call  # a service call answered while the spinner thread spins

    def close(self) -> None:
        import rclpy

        self.spinner.stop()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def record_takes(op: Operator, stick: dict[int, float], takes: int, seconds: float) -> list[str]:
    """Each take: the stick held, start, `seconds`, stop, label it a success, keep it; then the
    scene put back (the twin's reset) while the recorder's reset phase runs."""
    said = []
    for take in range(takes):
        deadline = time.monotonic() + 180.0
        while True:  # the first take is started by hand; the next ones start after the reset phase
            if op.recorder_state == "recording":
                break
            answer = op.call(op.clients["start"], op.Trigger.Request(), timeout=120.0)
            if answer.success or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        op.hold(stick)  # only now: the stick held through the reset phase would drive the robot away
        time.sleep(seconds)
        stopped = op.call(op.clients["stop"], op.Trigger.Request())
        op.hold({})
        if not stopped.success:
            raise RuntimeError(f"take {take}: stop refused: {stopped.message}")
        said.append(op.call(op.label, op.SetBool.Request(data=True)).message)
        said.append(op.call(op.clients["keep"], op.Trigger.Request()).message)
        op.call(op.reset_client, op.Trigger.Request())
    return said


def confirm_episodes(op: Operator, refine: subprocess.Popen, timeout: float) -> None:
    """Confirm every episode (again and again, as a person watching the robot would), and put
    the scene back after each episode ends."""
    seen, deadline = 0, time.monotonic() + timeout
    while refine.poll() is None and time.monotonic() < deadline:
        with op.lock:
            ends = op.ends
        if ends > seen and op.reset_client.service_is_ready():
            seen = ends
            op.reset_client.call_async(op.Trigger.Request())
            time.sleep(0.5)
        if op.confirm_client.service_is_ready():
            op.confirm_client.call_async(op.Trigger.Request())
        time.sleep(1.0)


def _error(episode) -> str | None:
    """An episode's error: its column, or the one its summary carries."""
    if isinstance(episode.error, str) and episode.error:
        return episode.error
    summary = json.loads(episode.summary) if isinstance(episode.summary, str) else episode.summary
    return (summary or {}).get("error") if isinstance(summary, dict) else None


def summary(run_dir: Path, task: str) -> dict:
    from refine_core.store.db import RunDatabase
    from refine_core.tasks.registry import get_task

    actions = get_task(task).spec.action_names
    with RunDatabase(run_dir, create=False) as db:
        run_id = db.latest_run()["id"]
        takes = [db.load_demonstration(run_id, take) for take in db.demonstration_takes(run_id)]
        rounds = db.rounds(run_id)
        out = {"takes": [{"take": i, "steps": int(t["steps"]), "source": t["source"]} for i, t in enumerate(takes)],
               "rounds": []}  # fmt: skip
        for r in rounds:
            episodes = db.episodes(run_id, r["round"])
            steps = db.load_steps(run_id, r["round"])
            safe = steps[[f"safe_{a}" for a in actions]].notna().all(axis=1) if len(steps) else []
            fit = r.get("fit_report") or {}
            out["rounds"].append({
                "round": int(r["round"]), "status": r["status"],
                "fit_steps": int(fit.get("n_train", 0) + fit.get("n_val", 0)),
                "episodes": [{"kind": e.kind, "steps": int(e.steps), "complete": bool(e.complete),
                              **({"error": _error(e)} if _error(e) else {})}
                             for e in episodes.itertuples()],
                "steps_with_a_safe_command": round(float(safe.mean()), 3) if len(steps) else None,
            })  # fmt: skip
        out["events"] = sorted({e["kind"] for e in db.events(run_id)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", choices=list(robot_names()), required=True)
    parser.add_argument("--run", type=Path, required=True, help="run directory (created)")
    parser.add_argument("--takes", type=int, default=2)
    parser.add_argument("--take-seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=None, help="diagnostic episodes per round (default: "
                        "the profile's)")
    parser.add_argument("--max-steps", type=int, default=None, help="step cap of every episode (default: the "
                        "task's episode length)")
    parser.add_argument("--rl-resets", type=int, default=0, help="post-refinement RL after the rounds, as the learner's "
                        "goal: its training episodes, each confirmed like any other (0: none)")
    parser.add_argument("--rl-settings", default="", help="RLConfig fields over the RL preset, a JSON object")
    args = parser.parse_args(argv)
    profile, twin, stick, task = rehearsal(args.robot)
    args.run.mkdir(parents=True, exist_ok=True)
    op = Operator(twin, *pad_buttons(args.robot))
    t0 = time.monotonic()
    procs: list[subprocess.Popen] = []
    try:
        record = _up(f"{profile}_record_demo", args.run, args.run / "record.log",
                     "--set", f"demo_recorder.takes={args.takes}", "--set", "demo_recorder.reset_time=3")  # fmt: skip
        procs.append(record)
        deadline = time.monotonic() + 120.0  # the teleop node hears the gamepad before a take starts
        while op.pad.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        said = record_takes(op, stick, args.takes, args.take_seconds)
        if record.wait(timeout=120) != 0:
            raise RuntimeError(f"the recorder ended with {record.returncode}: see {args.run / 'record.log'}")
        t_recorded = time.monotonic()
        caps = [*(("--diagnostic-episodes", str(args.episodes)) if args.episodes is not None else ()),
                *(("--max-steps", str(args.max_steps)) if args.max_steps is not None else ()),
                *(("--set", f"analysis_node.rl_resets={args.rl_resets}") if args.rl_resets else ()),
                *(("--set", f"analysis_node.rl='{args.rl_settings}'") if args.rl_settings else ())]
        op.drive_autonomously()
        refine = _up(profile, args.run, args.run / "refine.log", "--max-rounds", str(args.rounds), *caps)
        procs.append(refine)
        confirm_episodes(op, refine, timeout=3600.0)
        code = refine.wait(timeout=60)
        result = {"robot": args.robot, "profile": profile,
                  "analyst": "offline: the deterministic stand-in (`refine up`'s default), not a language model",
                  "recorder_said": said, "refine_exit_code": code,
                  "record_s": round(t_recorded - t0, 1), "refine_s": round(time.monotonic() - t_recorded, 1),
                  **summary(args.run, task)}  # fmt: skip
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        op.close()
    print(json.dumps(result, indent=2))
    return 0 if code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
