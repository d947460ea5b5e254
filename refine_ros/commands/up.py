"""`refine up PROFILE`: a launch profile's node set in one process (rclpy executors), for
machines without `ros2 launch`. Same nodes, parameters and topics as the launch files."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("up", help="run a ROS 2 profile (door_sim, car_sim, arm_real, rc_car_real) in one process")
    p.add_argument("profile", help="profile name (config/<profile>.yaml)")
    p.add_argument("--run", type=Path, default=Path("runs/up"), metavar="DIR", help="run directory")
    p.add_argument("--analyst", default="offline", choices=("offline", "openai", "replay", "record"))
    p.add_argument("--transcript", type=Path, help="JSONL transcript: openai/record write it, replay answers from it")
    p.add_argument("--replay-mode", choices=("exact", "sequential"), default=None,
                   help="replay: exact (identical requests only) or sequential (each role in recorded order)")
    p.add_argument("--description", choices=("published", "detailed"), default=None,
                   help="what the analyst is told about the task (default: published, or a replayed transcript's)")
    p.add_argument("--start", type=Path, default=None, metavar="FILE",
                   help="begin from this program instead of asking the analyst for a zero-shot one")
    p.add_argument("--rounds", type=int, default=None, help="refinement rounds")
    p.add_argument("--episodes", type=int, default=None, help="episodes per round")
    p.add_argument("--max-steps", type=int, default=None, help="cap episode length (smoke runs)")
    p.add_argument("--no-rviz", action="store_true", help="accepted for symmetry; RViz never starts in-process")
    p.add_argument("--live", action="store_true",
                   help="real profiles only: command the hardware (default is a dry run)")
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override one node parameter")
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--processes", action="store_true",
                   help="every node in its own process, started from its executable as ros2 launch does")
    p.add_argument("--twin", action="store_true",
                   help="real profiles only: the robot's physics twin (arm_twin, car_twin) stands in for its "
                   "drivers and takes the commands (driver:=twin, not a dry run); never on a graph where the "
                   "robot's own drivers run")
    return p


def run(args) -> int:
    try:
        from refine_ros.up import UpOptions, run_profile
    except ImportError as exc:
        raise UserError(f"`refine up` needs the ROS 2 client libraries (rclpy): {exc}") from None
    from refine_ros.bringup import ProfileError

    options = UpOptions(run_dir=args.run, analyst=args.analyst, transcript=args.transcript, rounds=args.rounds,
                        episodes=args.episodes, max_steps=args.max_steps, live=args.live, sets=args.set,
                        timeout_s=args.timeout, processes=args.processes, replay_mode=args.replay_mode,
                        task_description=args.description, start_program=args.start, twin=args.twin)
    try:
        return run_profile(args.profile, options)
    except ProfileError as exc:
        raise UserError(str(exc)) from None
