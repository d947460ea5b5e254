"""The one list of this package's ROS nodes.

Every node is known by one name, and everything else about it follows from that name: its
executable (`ros2 run refine_ros NAME`, a console script setup.py generates from this list),
its module `refine_ros.nodes.NAME` with a `main()`, and the node class `refine up` starts in
one process. A profile (`config/<profile>.yaml`) names nodes by this name only and adds
parameters and remappings; bringup reads the rest from here. So adding a node is one module
plus one line below, and nothing can disagree about where a node lives.

Pure Python on purpose (standard library only, no package imports): setup.py reads this file
by path before anything is installed.
"""

from __future__ import annotations

from typing import NamedTuple

PACKAGE = "refine_ros"


class NodeEntry(NamedTuple):
    name: str
    """Node name, executable name and module name (refine_ros.nodes.<name>)."""
    class_name: str
    """The rclpy Node subclass in that module (what `refine up` instantiates)."""
    takes_task: bool = False
    """The node has a `task` parameter and is given the profile's task: a profile states its
    task once, at the top, never per node."""

    @property
    def module(self) -> str:
        return f"{PACKAGE}.nodes.{self.name}"

    @property
    def executable(self) -> str:
        return self.name

    @property
    def console_script(self) -> str:
        """The setuptools console_scripts entry that installs the executable."""
        return f"{self.executable} = {self.module}:main"


NODES: dict[str, NodeEntry] = {entry.name: entry for entry in (
    NodeEntry("sim_node", "SimNode", takes_task=True),
    NodeEntry("learner_node", "LearnerNode", takes_task=True),
    NodeEntry("rollout_logger", "RolloutLogger", takes_task=True),
    NodeEntry("analysis_node", "AnalysisNode", takes_task=True),
    NodeEntry("safety_node", "SafetyNode"),
    NodeEntry("arm_bridge", "ArmBridge"),
    NodeEntry("rc_car_bridge", "RcCarBridge"),
    NodeEntry("track_detector", "TrackDetector"),
    NodeEntry("demo_recorder", "DemoRecorder", takes_task=True),
    NodeEntry("joy_teleop", "JoyTeleop", takes_task=True),
    NodeEntry("keyboard_teleop", "KeyboardTeleop", takes_task=True),
)}


def console_scripts() -> list[str]:
    """setup.py's console_scripts for the nodes, one per registry entry."""
    return [entry.console_script for entry in NODES.values()]
