"""Bring-up: profiles -> node sets -> launch plans, shared by `ros2 launch` and `refine up`.

One job per module:
- `arguments`: launch arguments, their types and the options every launch has;
- `profiles`: `config/<name>.yaml` read, checked and resolved into node specs (nodes named
  by the node registry, refine_ros/nodes/registry.py);
- `drivers`: the seam a `driver:=NAME` choice plugs into (which nodes drive the robot);
- `plan`: what a launch starts, every executable found and checked before anything starts.

Both front ends read profiles through this package, so they can never disagree about what
runs; the launch files stay a thin translation into `launch_ros` actions
(refine_ros/launch_support.py). Nothing here imports rclpy or launch: the package is used (and
tested) on machines without them. The names below are the public interface.
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
from refine_ros.bringup.drivers import DRIVER_ARGUMENT, DRIVERS, driver_nodes
from refine_ros.bringup.plan import (
    NODE_IMPORTS,
    LaunchCheckError,
    LaunchPlan,
    PlannedNode,
    find_executable,
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
    "PlannedNode", "Profile", "ProfileError", "all_launch_arguments", "coerce", "config_dir", "driver_nodes",
    "find_executable", "launch_arguments", "launch_options", "launch_overrides", "launch_plan", "missing_imports",
    "profile_names", "resolve_profile", "script_interpreter", "share_dirs",
]
