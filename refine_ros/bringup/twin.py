"""`driver:=twin`: a real profile with its robot's physics twin standing where the hardware's
drivers would be (`ros2 launch refine_ros <profile>.launch.py driver:=twin`, `refine up
<profile> --twin`). Everything else in the profile starts unchanged, so a rehearsal runs the
very nodes and parameters the robot will.

Which twin a profile gets follows from its bridge: each robot's descriptor
(refine_ros/robots/<robot>/robot.py) names its bridge and its twin. A profile without a
robot's bridge (a simulation profile) has no hardware to stand in for, and `driver:=twin` is
refused. refine_ros/bringup/drivers.py turns this table into the profile's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TwinDriver:
    """The twin node that stands in behind one bridge, and what that bridge then reads
    differently (e.g. a target that comes from the twin, not from a measured number)."""

    node: str
    module: str
    class_name: str
    bridge_overrides: dict[str, Any] = field(default_factory=dict)


def twin_drivers() -> dict[str, TwinDriver]:
    """Bridge node name -> its robot's twin, for every registered robot."""
    from refine_ros.nodes.registry import NODES
    from refine_ros.robots.registry import robots

    return {robot.bridge: TwinDriver(robot.twin, NODES[robot.twin].module, NODES[robot.twin].class_name,
                                     dict(robot.twin_bridge_overrides))
            for robot in robots().values()}
