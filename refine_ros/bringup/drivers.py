"""The seam where `driver:=NAME` plugs in: which nodes drive a profile's robot.

A profile lists every node of one deployment, the robot side included: the simulator (sim
profiles) or the bridges to a real robot's own driver stack (real profiles). A driver choice
changes that robot side without a second profile, e.g. `driver:=twin`: a physics twin that
exposes the interfaces the real drivers would (MoveIt Servo, ros2_control, ackermann_msgs),
so a real profile runs end to end before the hardware is on the bench.

`ros2 launch refine_ros refine.launch.py profile:=PROFILE driver:=NAME` and `refine up
PROFILE --driver NAME` both reach `driver_nodes` through `profiles.resolve_profile`; the
launch files need no change for a new driver.

To add a driver: one entry in `DRIVERS` (name -> what it runs, shown by `--show-args` and in
errors) and its case in `driver_nodes`. Its nodes must be in the node registry
(refine_ros/nodes/registry.py), like any profile node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from refine_ros.bringup.arguments import LaunchArgument, ProfileError
from refine_ros.bringup.twin import twin_drivers

DRIVERS: dict[str, str] = {
    "": "the profile's own: the simulator of a sim profile, the robot's driver stack behind the bridges of a "
        "real profile",
    "hardware": "the same as unset, said out loud for a real profile",
    "twin": "real profiles: the robot's physics twin (its descriptor's twin node) stands where its drivers would be",
}
"""Every driver choice and what it runs ('' is the default)."""

DRIVER_ARGUMENT = LaunchArgument(
    "driver", None, "what drives the robot: " + "; ".join(f"{name or 'unset'}: {what}" for name, what in DRIVERS.items()),
    "str")
"""A launch option of every profile, read by `resolve_profile` (not a node parameter)."""


def driver_nodes(profile: Mapping[str, Any], driver: str) -> list[dict[str, Any]]:
    """The node entries that `driver` adds to `profile` (the profile's YAML mapping: `profile`,
    `kind`, `task`, `nodes`, ...), written as a profile writes them (`name` from the registry,
    `parameters`, `from_arguments`, `remappings`). An entry naming a node the profile already
    has changes that node instead: its parameters are updated and its remappings added (e.g.
    a bridge pointed at the twin's topics). [] for the profile's own drivers."""
    if driver not in DRIVERS:
        raise ProfileError(f"profile {profile.get('profile')!r}: unknown driver {driver!r}; drivers: "
                           + ", ".join(repr(name) for name in DRIVERS))
    if driver != "twin":
        return []
    twins_behind = twin_drivers()
    bridges = [node["name"] for node in profile["nodes"] if node["name"] in twins_behind]
    if not bridges:
        raise ProfileError(f"profile {profile.get('profile')!r} has no robot bridge, so no hardware a twin could "
                           "stand in for (driver:=twin is for a robot's real profile and its record_demo profile)")
    twins = [{"name": twins_behind[bridge].node} for bridge in bridges]
    overrides = [{"name": bridge, "parameters": dict(twins_behind[bridge].bridge_overrides)} for bridge in bridges]
    return twins + overrides


def apply_driver(profile: dict[str, Any], driver: str | None) -> dict[str, Any]:
    """`profile` with the nodes of `driver` merged in (a new mapping; the input is not changed).
    A driver's own nodes come first, so the robot's interfaces exist when the bridges start."""
    entries = driver_nodes(profile, driver or "")
    if not entries:
        return profile
    nodes = [dict(node) for node in profile["nodes"]]
    by_name = {node["name"]: node for node in nodes}
    added: list[dict[str, Any]] = []
    for entry in entries:
        node = by_name.get(entry["name"])
        if node is None:
            added.append(dict(entry))
            continue
        for key in ("parameters", "from_arguments", "remappings"):
            if entry.get(key):
                node[key] = {**(node.get(key) or {}), **entry[key]}
    return {**profile, "nodes": added + nodes}
