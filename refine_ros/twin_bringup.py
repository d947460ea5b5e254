"""`driver:=twin`: a real profile with its robot's physics twin standing where the hardware's
drivers would be (`ros2 launch refine_ros arm_real.launch.py driver:=twin`, `refine up
arm_real --twin`). Everything else in the profile starts unchanged, so a rehearsal runs the
very nodes and parameters the robot will.

Which twin a profile gets follows from its bridge: `arm_bridge` talks to an arm's stack, so
`arm_twin` stands in; `rc_car_bridge` to an F1TENTH car's, so `car_twin`. A profile without a
bridge (a simulation profile) has no hardware to stand in for, and `driver:=twin` is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

DRIVERS = ("hardware", "twin")
DRIVER_HELP = ("hardware: the robot's own drivers (nothing of ours starts in their place); twin: the "
               "robot's physics twin (arm_twin / car_twin) stands in for them, for a rehearsal")


@dataclass(frozen=True)
class TwinDriver:
    """The twin node that stands in behind one bridge, and what that bridge then reads
    differently (the arm's door target comes from the twin, not from a measured number)."""

    node: str
    module: str
    class_name: str
    bridge_overrides: dict[str, Any] = field(default_factory=dict)


TWIN_DRIVERS: dict[str, TwinDriver] = {
    "arm_bridge": TwinDriver("arm_twin", "refine_ros.nodes.arm_twin", "ArmTwinNode", {"target_mode": "topic"}),
    "rc_car_bridge": TwinDriver("car_twin", "refine_ros.nodes.car_twin", "CarTwinNode"),
}
"""Bridge node name -> its robot's twin."""


def with_driver(nodes: tuple[Any, ...], driver: str, profile: str) -> tuple[Any, ...]:
    """The profile's nodes (bringup `NodeSpec`s) for `driver`: unchanged for the hardware; for
    the twin, each bridge's twin first (so the driver's interfaces exist when the bridge
    starts) and the bridges with their twin overrides. ValueError for an unknown driver or a
    profile with no bridge."""
    if driver in (None, "", "hardware"):
        return nodes
    if driver != "twin":
        raise ValueError(f"driver must be one of {', '.join(DRIVERS)}, got {driver!r}")
    bridges = [n for n in nodes if n.name in TWIN_DRIVERS]
    if not bridges:
        raise ValueError(f"profile {profile!r} has no robot bridge, so no hardware a twin could stand in for")
    twins = []
    for bridge in bridges:
        twin = TWIN_DRIVERS[bridge.name]
        twins.append(replace(bridge, name=twin.node, executable=twin.node, module=twin.module,
                             class_name=twin.class_name, parameters={}, remappings=()))  # fmt: skip
    bridged = tuple(replace(n, parameters={**n.parameters, **TWIN_DRIVERS[n.name].bridge_overrides})
                    if n.name in TWIN_DRIVERS else n for n in nodes)  # fmt: skip
    return (*twins, *bridged)
