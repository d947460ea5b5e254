"""`refine up PROFILE`: a launch profile's node set in one process (rclpy executors), for
machines without `ros2 launch`. Same nodes, parameters and topics as the launch files."""

from __future__ import annotations

import argparse
from pathlib import Path

from refine_core.cli import UserError

HELP = "run a ROS 2 profile (config/<profile>.yaml: a simulation or a real robot) in one process"
"""The one line `refine --help` shows (without building this verb's flags, which import the
method's config and so torch)."""
METHOD_FLAGS = ("max_rounds", "diagnostic_episodes", "max_steps")
UP_ALIASES = {"max_rounds": ("--rounds",), "diagnostic_episodes": ("--episodes",)}
"""The flags' spellings before they were generated from RefineConfig (deprecated, still accepted)."""


def add_parser(sub) -> argparse.ArgumentParser:
    from refine_core.flags import add_flags
    from refine_core.loop import RefineConfig
    from refine_core.tasks.spec import DESCRIPTION_VARIANTS

    p = sub.add_parser("up", help=HELP)
    p.add_argument("profile", help="profile name (config/<profile>.yaml)")
    p.add_argument("--run", type=Path, default=Path("runs/up"), metavar="DIR", help="run directory")
    p.add_argument("--analyst", default="offline", choices=("offline", "openai", "replay", "record"))
    p.add_argument("--transcript", type=Path, help="JSONL transcript: openai/record write it, replay answers from it")
    p.add_argument("--replay-mode", choices=("exact", "sequential"), default=None,
                   help="replay: exact (identical requests only) or sequential (each role in recorded order)")
    p.add_argument("--description", choices=DESCRIPTION_VARIANTS, default=None,
                   help="what the analyst is told about the task (default: the profile's (robot_owner on the real "
                   "profiles), else a replayed transcript's, else published)")
    p.add_argument("--start", type=Path, default=None, metavar="FILE",
                   help="begin from this program instead of asking the analyst for a zero-shot one")
    # the method's settings: flags generated from RefineConfig, named as `refine run`'s and as the
    # analysis node's parameters; not given: the profile's argument default, else the node's
    add_flags(p, RefineConfig, only=METHOD_FLAGS, aliases=UP_ALIASES,
              extra_help={name: "Not given: the profile's default, else RefineConfig's " for name in METHOD_FLAGS})
    p.add_argument("--no-rviz", action="store_true", help="accepted for symmetry; RViz never starts in-process")
    p.add_argument("--driver", default=None, metavar="NAME",
                   help="what drives the robot, as driver:=NAME of the launch files (default: the profile's own)")
    p.add_argument("--live", action="store_true",
                   help="real profiles only: command the hardware (default is a dry run)")
    p.add_argument("--set", action="append", default=[], metavar="NODE.PARAM=VALUE",
                   help="override one node parameter")
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--processes", action="store_true",
                   help="every node in its own process, started from its executable as ros2 launch does")
    p.add_argument("--twin", action="store_true",
                   help="real profiles only: the robot's physics twin (its descriptor's twin node) stands in for its "
                   "drivers and takes the commands (driver:=twin, not a dry run); never on a graph where the "
                   "robot's own drivers run")
    return p


def run(args) -> int:
    try:
        from refine_ros.bringup.up import UpOptions, run_profile
    except ImportError as exc:
        raise UserError(f"`refine up` needs the ROS 2 client libraries (rclpy): {exc}") from None
    from refine_ros.bringup import ProfileError

    options = UpOptions(run_dir=args.run, analyst=args.analyst, transcript=args.transcript, max_rounds=args.max_rounds,
                        diagnostic_episodes=args.diagnostic_episodes, max_steps=args.max_steps, live=args.live, sets=args.set,
                        timeout_s=args.timeout, processes=args.processes, replay_mode=args.replay_mode,
                        task_description=args.description, start_program=args.start, driver=args.driver,
                        twin=args.twin)
    try:
        return run_profile(args.profile, options)
    except ProfileError as exc:
        raise UserError(str(exc)) from None
