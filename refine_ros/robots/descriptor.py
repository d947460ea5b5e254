"""What the rest of refine_ros knows about a robot: one `Robot` per robot folder (its
`robot.py`, `ROBOT`), read by everything that must not name a robot.

Readers: `driver:=twin` and `refine up --twin` (refine_ros/bringup/twin.py: which twin stands
behind which bridge), the fault matrix (refine_ros/bench/faults.py: the rig's nodes, the fake
driver, its fault levers, what a moving command is), the twin rehearsal benchmark
(refine_ros/bench/twin.py), the live-graph benchmark (refine_ros/bench/robot.py) and the
rehearsal tool (tools/rehearse_twin.py). The data says which nodes and profiles are the
robot's; a `RobotRig` says how a rig reads the robot's own driver topics (the one part that
needs code: the message types differ from robot to robot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class RobotRig:
    """How the benchmarks' rigs watch one robot's driver side, in the driver stack's own
    message types. `bridge` is the bridge's parameters as the profile sets them (a topic or a
    command type may differ from robot to robot of one kind). Message classes are imported
    inside the methods, so reading a descriptor needs no ROS."""

    def command_topic(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        """The message type and topic of the motion commands the bridge sends the driver."""
        raise NotImplementedError

    def motion(self, msg: Any) -> tuple[float, ...]:
        """The motion a driver command asks for, as numbers (every one 0 is the exact stop)."""
        raise NotImplementedError

    def moving(self, msg: Any) -> bool:
        """The command moves the robot."""
        return any(v != 0.0 for v in self.motion(msg))

    def exact_stop(self, msg: Any) -> bool:
        """The stop in the driver's own terms: every motion field exactly zero."""
        return all(v == 0.0 for v in self.motion(msg))

    def beyond_limits(self, msg: Any, bridge: Mapping[str, Any]) -> bool:
        """A command the bridge must never send: not finite, or beyond the robot's limits."""
        raise NotImplementedError

    def fake_driver_parameters(self, bridge: Mapping[str, Any]) -> dict[str, Any]:
        """The fake driver's parameters that match these bridge settings (its interface)."""
        return {}

    def heartbeat(self, bridge: Mapping[str, Any]) -> tuple[type, str]:
        """The driver's heartbeat (joint states, odometry): type and topic."""
        raise NotImplementedError

    def watch_sensor(self, node: Any, bridge: Mapping[str, Any], arrived: Callable[[], None]) -> None:
        """Subscribe `node` to the robot's slow sensor path (a marker tracker, a camera
        detector) and call `arrived()` at every reading. None to watch: nothing."""

    def controller(self, values: np.ndarray) -> tuple[float, ...]:
        """A simple program for the twin rig: the next action from an observation's values."""
        raise NotImplementedError

    def watch_twin(self, node: Any, bridge: Mapping[str, Any]) -> Callable[[], dict[str, Any]]:
        """Extra watches of a twin rig run (the car's detector against the simulator's own
        tiles); returns what gives their figures after the run ({}: none)."""
        return dict

    def twin_bench_figures(self, quick: bool) -> dict[str, Any]:
        """Figures of this robot's twin for `refine bench`'s twin section that need no ROS
        (the car's detector on the rendered camera); keys start with `twin_<robot>_`."""
        return {}


@dataclass(frozen=True)
class CommandPath:
    """One way the bridge commands the robot's stack, as the fault matrix's process-death cells
    rehearse it on the twin (refine_ros/bench/process_death.py): the settings of the bridge, the
    twin and the command guard for that path, and what the stack itself does when commands stop."""

    bridge: Mapping[str, Any] = field(default_factory=dict)
    twin: Mapping[str, Any] = field(default_factory=dict)
    guard: Mapping[str, Any] = field(default_factory=dict)
    stack_timeout: float | None = None
    """s after its last command when the stack stops the robot by itself; None: never (it holds
    the last command), and the command guard is the named safeguard."""
    stack: str = ""
    """Who stops it, in words (the reports say it)."""


@dataclass(frozen=True)
class Robot:
    """One robot: its names in the graph, its profiles, its stand-ins and its rig settings."""

    name: str
    """What the benchmarks and tools call it (`--robot NAME`, the fault matrix's columns)."""
    task: str
    """The task it runs (refine_core/tasks/registry.py)."""
    profile: str
    """Its real profile, `config/<profile>.yaml`; `<profile>_record_demo` records its demonstration."""
    bridge: str
    """Its bridge node (node registry name): safe actions in, the task's observation out."""
    twin: str
    """Its twin node: the physics behind the driver interfaces (`driver:=twin`). It serves
    `~/reset` (std_srvs/Trigger), the operator's hands: the rehearsal resets the scene between
    episodes, and the fault matrix puts the robot back before it confirms a second time."""
    fake_driver: str
    """`module:Class` of the node that stands in for its hardware in the fault matrix and the
    live-graph benchmark (`python -m refine_ros.robots.fake_driver NAME`)."""
    rig: RobotRig
    """How the rigs read its driver topics."""
    twin_bridge_overrides: Mapping[str, Any] = field(default_factory=dict)
    """What the bridge reads differently behind the twin (the arm's door target from the twin)."""
    rig_nodes: tuple[str, ...] = ()
    """Nodes of its profile a rig starts beside the bridge and the safety node (a camera detector)."""
    moving_action: tuple[float, ...] = ()
    """The task action the fault matrix's policy commands while all is well."""
    fault_levers: Mapping[str, str] = field(default_factory=dict)
    """Fault -> the fake driver's `fake/<lever>` service (std_srvs/SetBool) that causes it:
    `stale_sensor` (required), and a robot's own (`servo_rejects`). Every fake driver also
    has `fake/driver_silent` (the driver is gone)."""
    twin_heartbeat: str = ""
    """The twin's sensor whose plug a dropout run pulls (`<twin>/silence_<sensor>`): the
    driver's heartbeat."""
    take_stick: Mapping[str, float] = field(default_factory=dict)
    """The gamepad axes a rehearsal take holds (refine_ros.teleop.maps.AXES names -> value)."""
    live_bench: Mapping[str, Any] | None = None
    """The fake driver's parameters in the live-graph benchmark (refine_ros/bench/robot.py);
    None: the benchmark does not run this robot."""
    command_paths: Mapping[str, CommandPath] = field(default_factory=dict)
    """The stacks it may be commanded through, each rehearsed by the process-death cells."""
    twin_pad: Mapping[int, int] = field(default_factory=dict)
    """Buttons a rig holds on /joy while the policy drives the twin (the car: RB, F1TENTH's
    autonomy dead-man, without which /drive never reaches the VESC)."""
    stop_unit: tuple[str, float] = ("m", 1.0)
    """How the matrix reports a stop distance: unit and metres per unit (arm mm, car cm)."""
    moving_speed: float = 0.0
    """m/s above which the twin's ground truth counts as moving."""
    truth_position: tuple[int, int] = (1, 4)
    """Where the position sits in a row of the twin's `~/ground_truth` (a slice: start, stop)."""
    watch_after_death_s: float = 2.0
    """How long a process-death cell watches the twin after the fault (past the stack's timeout)."""
    @property
    def record_profile(self) -> str:
        return f"{self.profile}_record_demo"
