"""ROS benchmarks: how fast the rollout logger can log without losing a row.

The publisher and the logger run as separate processes, as under `ros2 launch`, so the figure
includes real DDS transport on loopback and the logger's own process (its GIL, its disk).
A trial at rate R publishes one episode of R * seconds steps on every step stream (the
door task's 39 observation columns, a policy step, the action, the reward), then counts the
rows in the database and the gap events the logger recorded. A rate is lossless when every
row is there, complete, with no gap.

`python -m refine_ros.bench logger` prints the JSON; `refine bench` merges `bench_logger()`.
`python -m refine_ros.bench publish ...` is the publisher process itself.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from refine_ros.bringup.dds import PROFILE_VARIABLE, dds_environment

TASK = "door_open"
LATENTS = ("latent_reach_error", "latent_grasp", "weight_gain")


DDS_VARIABLES = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION", PROFILE_VARIABLE)


def ros_env(domain: int | None = None) -> dict[str, str]:
    """Environment for child processes: loopback-only DDS on a domain of their own. Without an
    explicit `domain`, the domain picked (or the one already set) is also this process's: the
    benchmarks' in-process harnesses create their rclpy contexts after starting the children,
    and a context reads these variables when it is created; on another domain or discovery
    range the harness would never see its rig."""
    env = dict(os.environ)
    if domain is not None:
        env["ROS_DOMAIN_ID"] = str(domain)
    else:
        env.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 100)))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    env.update(dds_environment(env))  # camera images through shared memory, as the launch files do
    if domain is None:
        for name in DDS_VARIABLES:
            if name in env:
                os.environ.setdefault(name, env[name])
    return env


# -- the publisher process -----------------------------------------------------------------------
def publish_steps(
    rate_hz: float,
    steps: int,
    *,
    episode: int = 0,
    round: int = 0,
    kind: str = "diagnostic",
    seed: int = 200,
    skip: Sequence[int] = (),
    end: bool = True,
    match_timeout: float = 20.0,
) -> dict[str, float]:
    """Publish one synthetic episode on every step stream at `rate_hz` (paced by the clock,
    with a dedicated executor so publishing never waits on callbacks). Steps in `skip` are
    left out of every stream. Returns the achieved rate."""
    import rclpy
    from rclpy.duration import Duration
    from std_msgs.msg import Float64MultiArray, String

    from refine_core.rollout.schema import RolloutSchema
    from refine_core.tasks import get_task
    from refine_ros.wire import qos
    from refine_ros.wire.messages import REWARD_NAMES, pack_json, pack_step, pack_vector, step_type

    spec = get_task(TASK).spec
    obs_cols = list(spec.observation_columns)
    schema = RolloutSchema.for_task(spec, LATENTS)
    policy_cols = [*schema.mean(), *schema.act(), *schema.info_keys]
    rclpy.init()
    node = rclpy.create_node("bench_step_publisher")
    try:
        pubs = {
            "observation": node.create_publisher(step_type(), "refine/observation", qos.CONTROL),
            "policy_step": node.create_publisher(step_type(), "refine/policy_step", qos.CONTROL),
            "action": node.create_publisher(Float64MultiArray, "refine/action", qos.CONTROL),
            "reward": node.create_publisher(step_type(), "refine/reward", qos.CONTROL),
        }
        latched = {
            name: node.create_publisher(String, name, qos.LATCHED)
            for name in ("refine/observation_columns", "refine/policy_step_columns",
                         "refine/episode_events")
        }
        deadline = time.monotonic() + match_timeout
        while any(p.get_subscription_count() == 0 for p in [*pubs.values(), *latched.values()]):
            if time.monotonic() > deadline:
                raise TimeoutError("no logger subscribed to the step topics")
            time.sleep(0.05)
        latched["refine/observation_columns"].publish(pack_json(obs_cols))
        latched["refine/policy_step_columns"].publish(pack_json(policy_cols))
        latched["refine/episode_events"].publish(pack_json(
            {"event": "start", "episode": episode, "round": round, "kind": kind, "seed": seed}
        ))
        time.sleep(0.3)  # let the latched context land before the first step
        skipped = set(skip)
        period = 1.0 / rate_hz
        start = time.monotonic()
        obs = [0.0] * len(obs_cols)
        for t in range(steps):
            target = start + t * period
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if t in skipped:
                continue
            obs[0] = float(t)
            obs[1] = t * 0.001
            pubs["observation"].publish(pack_step(episode, t, obs_cols, obs))
            pubs["policy_step"].publish(pack_step(episode, t, policy_cols, [0.1 * (i + 1) for i in range(len(policy_cols))]))
            pubs["action"].publish(pack_vector(episode, t, [0.5, -0.5, 0.0, 1.0]))
            done = 1.0 if (end and t == steps - 1) else 0.0
            pubs["reward"].publish(pack_step(episode, t, REWARD_NAMES, [0.01, done, 0.0]))
        elapsed = time.monotonic() - start
        if end:
            obs[0], obs[1] = float(steps), steps * 0.001
            pubs["observation"].publish(pack_step(episode, steps, obs_cols, obs))  # terminal observation
            latched["refine/episode_events"].publish(pack_json(
                {"event": "end", "episode": episode, "metric": 0.5, "source": "bench"}
            ))
        for pub in [*pubs.values(), *latched.values()]:
            pub.wait_for_all_acked(Duration(seconds=10.0))
        return {"achieved_hz": steps / elapsed if elapsed > 0 else float("inf"), "seconds": elapsed}
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


# -- the logger process --------------------------------------------------------------------------
def start_logger(run_dir: Path, env: dict[str, str], *, task: str = TASK, extra: Iterable[str] = ()) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "refine_ros.nodes.rollout_logger", "--ros-args",
           "-p", f"run_dir:={run_dir}", "-p", f"task:={task}", *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGINT, timeout: float = 20.0) -> str:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return out or ""


def sent_at(info: Mapping[str, int]) -> float:
    """When the writer wrote a message (rclpy's MessageInfo, a callback's second argument), on
    this process's monotonic clock: the DDS source timestamp, the writer's system clock, which
    is this machine's. The rigs judge what a node sent by it, not by when their own spinner got
    to it: a rig process held up for a second on a loaded machine (or by a frozen peer's
    shared memory) read the bridge's commands late and counted them after the fault."""
    return info["source_timestamp"] * 1e-9 - (time.time() - time.monotonic())


def wait_for(predicate, timeout: float, period: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(period)
    return bool(predicate())


def run_publisher(rate_hz: float, steps: int, env: dict[str, str], *, skip: Sequence[int] = (),
                  episode: int = 0, end: bool = True, timeout: float = 300.0) -> dict[str, float]:
    cmd = [sys.executable, "-m", "refine_ros.bench", "publish", "--rate", str(rate_hz),
           "--steps", str(steps), "--episode", str(episode)]
    if skip:
        cmd += ["--skip", ",".join(map(str, skip))]
    if not end:
        cmd.append("--no-end")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"publisher failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class TrialResult:
    rate_hz: float
    achieved_hz: float
    expected_rows: int
    rows: int
    gap_events: int
    complete: bool

    @property
    def lossless(self) -> bool:
        """Every row, no gap, and the publisher really reached the rate (within 5 %)."""
        return (self.rows == self.expected_rows and self.gap_events == 0 and self.complete
                and self.achieved_hz >= 0.95 * self.rate_hz)


def count_logged(run_dir: Path, episode: int = 0) -> tuple[int, int, bool]:
    """(rows of the episode, gap events, episode complete) as the database holds them now."""
    from refine_core.store.db import RunDatabase, RunDatabaseError

    if not (run_dir / "run.db").exists():
        return 0, 0, False
    try:
        with RunDatabase(run_dir, create=False) as db:
            rows = db.count("steps", episode=episode)
            gaps = db.count("events", kinds=["gap"])
            done = db.count("episodes", episode=episode, complete=True) > 0
    except RunDatabaseError:
        return 0, 0, False
    return rows, gaps, bool(done)


def logger_trial(rate_hz: float, seconds: float, workdir: Path, env: dict[str, str]) -> TrialResult:
    run_dir = workdir / f"rate_{int(rate_hz)}"
    steps = max(1, int(round(rate_hz * seconds)))
    logger = start_logger(run_dir, env)
    try:
        published = run_publisher(rate_hz, steps, env)
        wait_for(lambda: count_logged(run_dir)[2], timeout=30.0)
    finally:
        stop_process(logger)
    rows, gaps, complete = count_logged(run_dir)
    return TrialResult(rate_hz, round(published["achieved_hz"], 1), steps, rows, gaps, complete)


def bench_logger(rates: Sequence[float] = (200, 500, 1000, 2000, 4000), seconds: float = 3.0,
                 progress: bool = True) -> dict[str, object]:
    """`logger_max_lossless_hz`: the highest rate of `rates` (tried in increasing order, stopping
    at the first loss) at which every step reached the database with no gap; 0 if none."""
    from tqdm import tqdm

    env = ros_env()
    trials: list[TrialResult] = []
    best = 0.0
    with tempfile.TemporaryDirectory(prefix="refine_bench_logger_") as tmp:
        for rate in tqdm(sorted(rates), desc="logger rates", disable=not progress, unit="rate"):
            trial = logger_trial(float(rate), seconds, Path(tmp), env)
            trials.append(trial)
            if not trial.lossless:
                break
            best = float(rate)
    return {
        "logger_max_lossless_hz": best,
        "logger_trials": [asdict(t) | {"lossless": t.lossless} for t in trials],
    }


def bench_ros(quick: bool = False, progress: bool = True) -> dict[str, object]:
    """Every ROS figure of `refine bench --json`: the logger's lossless rate here, the action
    latency with the learner in the loop (refine_ros.bench.latency), the car graph's control rate
    with every node its own process and in one process, side by side (refine_ros.bench.graph),
    losses and watchdog trips of the live arm graph under load (refine_ros.bench.robot), the
    fault matrix: faults x robots, unsafe commands at the driver (refine_ros.bench.faults), and
    its process-death cells on the twins (refine_ros.bench.process_death).
    `quick`: each at its smallest size (`refine bench --quick`), figures meaningless; the fault
    matrix then runs one fault per robot."""
    if quick:
        results: dict[str, object] = dict(bench_logger(rates=(200,), seconds=0.5, progress=False))
    else:
        results = dict(bench_logger(progress=progress))
    from refine_ros.bench.faults import bench_faults
    from refine_ros.bench.graph import bench_graph
    from refine_ros.bench.latency import bench_latency
    from refine_ros.bench.robot import bench_robot

    results.update(bench_latency(seconds=1.0) if quick else bench_latency())
    results.update(bench_graph(repeats=1, progress=False, episodes=1, max_steps=30) if quick
                   else bench_graph(progress=progress))
    results.update(bench_robot(episodes=2, steps=30, timeout_s=300) if quick else bench_robot())
    results.update(bench_faults(faults=("estop",), progress=False) if quick else bench_faults(progress=progress))
    from refine_ros.bench.process_death import bench_process_death

    # process deaths on the twins: SIGKILL / SIGSTOP of the safety node, the bridge, the learner
    results.update(bench_process_death(faults=("sigkill_bridge",), paths=("servo_jazzy", "ackermann"),
                                       progress=False) if quick else bench_process_death(progress=progress))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refine_ros.bench")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="publish one synthetic episode (the benchmark's publisher)")
    pub.add_argument("--rate", type=float, required=True)
    pub.add_argument("--steps", type=int, required=True)
    pub.add_argument("--episode", type=int, default=0)
    pub.add_argument("--skip", default="", help="comma-separated steps to leave out")
    pub.add_argument("--no-end", action="store_true", help="do not end the episode")
    log = sub.add_parser("logger", help="measure logger_max_lossless_hz")
    log.add_argument("--rates", default="200,500,1000,2000,4000")
    log.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    if args.command == "publish":
        skip = [int(s) for s in args.skip.split(",") if s.strip()]
        result = publish_steps(args.rate, args.steps, episode=args.episode, skip=skip, end=not args.no_end)
        print(json.dumps(result))
        return 0
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    print(json.dumps(bench_logger(rates, args.seconds), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
