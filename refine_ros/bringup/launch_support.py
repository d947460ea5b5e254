"""The one piece of launch-API code the launch files share.

Imported only by launch files (it needs ROS 2's `launch` / `launch_ros`, which are not on PyPI);
everything a profile means, and every check made before a process starts, is decided by
`bringup`, which is importable and tested anywhere. `refine up --processes` runs the same plan
without `launch` (`refine_ros.bringup.processes`), so CI covers what this file starts.
"""

import os

from launch.actions import (
    DeclareLaunchArgument,
    EmitEvent,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
)
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.events import Shutdown
from launch.launch_description import LaunchDescription
from launch.logging import get_logger
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from refine_ros import bringup

FINISHED = bringup.LaunchPlan.FINISHED


class LaunchFailed(RuntimeError):
    """Raised from an exit handler: launch then logs the message as one error line, shuts every
    process down and `ros2 launch` exits with status 1 (a Shutdown event alone exits 0)."""


def _end_launch(event, context, name: str, reason: str, plan, errors: dict[str, str]) -> list:
    """Shut the launch down, unless it is already shutting down. A node that exits cleanly
    was told to (Ctrl-C reaches the nodes and launch at once), so only a failure is reported,
    and a failure (`LaunchPlan.failure`: the finishing node exiting non-zero, or another node
    ending the run early) fails the launch with that node's own last error line."""
    if context.is_shutdown:
        return []
    failure = plan.failure(name, event.returncode, errors.get(name, ""))
    if failure is not None:
        raise LaunchFailed(failure)
    actions = [EmitEvent(event=Shutdown(reason=reason))]
    if event.returncode != 0 or reason.endswith(FINISHED):
        actions.insert(0, LogInfo(msg=f"[refine_ros] {reason} (exit code {event.returncode}): ending the launch"))
    return actions


def _note_errors(event, errors: dict[str, str], name: str) -> None:
    """Keep a node's last ERROR / FATAL log line: the reason a failed launch reports."""
    line = bringup.last_error_line(event.text.decode(errors="replace").splitlines())
    if line:
        errors[name] = line


def _profile_nodes(context, profile: str | None):
    """Resolve the profile with the command line's arguments, check everything, then return
    every process at once: a failed check raises here, before any process exists."""
    name = profile or LaunchConfiguration("profile").perform(context)
    logger = get_logger("refine_ros")
    overrides, ignored = bringup.launch_overrides(name, context.launch_configurations)
    if ignored:
        logger.warning(f"profile {name!r} has no argument(s) {', '.join(ignored)}: ignored; its arguments are "
                       f"{', '.join(a.name for a in bringup.launch_arguments(name))}")
    plan = bringup.launch_plan(bringup.resolve_profile(name, overrides))
    for warning in plan.skipped:
        logger.warning(warning)
    environment = bringup.dds_environment(os.environ)  # as `refine up` does
    actions: list = []
    errors: dict[str, str] = {}
    for planned in plan.nodes:
        node = Node(
            executable=str(planned.executable),  # found and checked by bringup.launch_plan
            name=planned.name,
            parameters=[planned.parameters] if planned.parameters else None,
            remappings=list(planned.remappings),
            arguments=list(planned.arguments),
            output=planned.output,
            additional_env=environment or None,
        )
        actions.append(node)
        reason = plan.exit_reason(planned.name)  # None: closing RViz, say, does not end a run
        if reason is not None:
            actions.append(RegisterEventHandler(OnProcessIO(
                target_action=node,
                on_stdout=lambda event, who=planned.name: _note_errors(event, errors, who),
                on_stderr=lambda event, who=planned.name: _note_errors(event, errors, who))))
            actions.append(RegisterEventHandler(OnProcessExit(
                target_action=node,
                on_exit=lambda event, context, who=planned.name, why=reason: _end_launch(event, context, who, why, plan,
                                                                                         errors))))
    if plan.keep_alive:
        logger.info("keep_alive:=true: the nodes keep running after the run ends; Ctrl-C stops them")
    return actions


def launch_description(profile: str | None = None) -> LaunchDescription:
    """The launch description of `launch/refine.launch.py` (profile None: the profile is the
    `profile` argument, and every profile's arguments are declared without defaults) or of a
    per-profile alias (its own arguments, with its defaults). Nodes are resolved at launch
    time, so the values given on the command line reach the profile."""
    if profile is None:
        names = bringup.profile_names()
        declared = [DeclareLaunchArgument("profile", choices=names,
                                          description="the deployment to run: config/<profile>.yaml")]
        arguments = bringup.all_launch_arguments()
    else:
        declared, arguments = [], bringup.launch_arguments(profile)
    declared += [DeclareLaunchArgument(arg.name, default_value=arg.default_text, description=arg.description)
                 for arg in arguments]
    return LaunchDescription([*declared, OpaqueFunction(function=_profile_nodes, args=[profile])])
