"""`driver:=twin`: a real profile with its robot's physics twin standing where the hardware's
drivers would be (`ros2 launch refine_ros arm_real.launch.py driver:=twin`, `refine up
arm_real --twin`). Everything else in the profile starts unchanged, so a rehearsal runs the
very nodes and parameters the robot will.

Which twin a profile gets follows from its bridge: `arm_bridge` talks to an arm's stack, so
`arm_twin` stands in; `rc_car_bridge` to an F1TENTH car's, so `car_twin`. A profile without a
bridge (a simulation profile) has no hardware to stand in for, and `driver:=twin` is refused.
refine_ros/bringup/drivers.py turns this table into the profile's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
