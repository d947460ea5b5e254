"""Bring-up: profiles -> node sets -> launch plans, and the front ends that start them.

One job per module. Planning, with neither rclpy nor launch imported (used and tested on
machines without them):
- `arguments`: launch arguments, their types and the options every launch has;
- `profiles`: `config/<name>.yaml` read, checked and resolved into node specs (nodes named
  by the node registry, refine_ros/nodes/registry.py);
- `drivers`: the seam a `driver:=NAME` choice plugs into (which nodes drive the robot), and
  `twin` the physics twins that plug into it;
- `plan`: what a launch starts, every executable found and checked before anything starts;
- `dds`: the DDS settings (the packaged Fast DDS profile) every front end gives its nodes.
Starting (each imports what it runs, when it runs):
- `launch_support`: the launch files' thin translation into `launch_ros` actions;
- `processes`: `refine up --processes`, every node its own process, as `ros2 launch` does;
- `up`: `refine up`, the nodes in one process; `spin` the executor threads it (and the tests)
  spin nodes on.

Both front ends read profiles through the planning modules, so they can never disagree about
what runs. The names below are the public interface.
"""

from refine_ros.bringup.arguments import (
    ARGUMENT_TYPES,
    LAUNCH_OPTIONS,
    REAL_ROBOT_STATE_PUBLISHER,
    LaunchArgument,
    ProfileError,
    coerce,
    launch_options,
)
from refine_ros.bringup.dds import dds_environment
from refine_ros.bringup.drivers import DRIVER_ARGUMENT, DRIVERS, driver_nodes
from refine_ros.bringup.plan import (
    NODE_IMPORTS,
    LaunchCheckError,
    LaunchPlan,
    PlannedNode,
    find_executable,
    last_error_line,
    launch_plan,
    missing_imports,
    script_interpreter,
)
from refine_ros.bringup.profiles import (
    KINDS,
    NODE_KEYS,
    NodeSpec,
    Profile,
    all_launch_arguments,
    config_dir,
    launch_arguments,
    launch_overrides,
    profile_names,
    resolve_profile,
    share_dirs,
)
from refine_ros.nodes.registry import PACKAGE

__all__ = [
    "ARGUMENT_TYPES", "DRIVERS", "DRIVER_ARGUMENT", "KINDS", "LAUNCH_OPTIONS", "NODE_IMPORTS", "NODE_KEYS",
    "PACKAGE", "REAL_ROBOT_STATE_PUBLISHER", "LaunchArgument", "LaunchCheckError", "LaunchPlan", "NodeSpec",
    "PlannedNode", "Profile", "ProfileError", "all_launch_arguments", "coerce", "config_dir", "dds_environment",
    "driver_nodes",
    "find_executable", "last_error_line", "launch_arguments", "launch_options", "launch_overrides", "launch_plan", "missing_imports",
    "profile_names", "resolve_profile", "script_interpreter", "share_dirs",
]
