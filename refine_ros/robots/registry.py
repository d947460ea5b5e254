"""Name -> Robot lookup. A robot is one folder under `refine_ros/robots/`; listing its package
here, in one line, is all it takes for the node registry (its bridge, twin and other nodes),
`driver:=twin` / `refine up --twin`, the fault matrix, the twin and live-graph benchmarks and
the rehearsal tool to know it. Each reads the folder's descriptor, `<package>.robot.ROBOT`
(a `refine_ros.robots.descriptor.Robot`); none names a robot.

A robot from another package (a Kinova behind its own driver, a differential-drive base, kept
in its own repository) registers the same package path under the entry point group
`refine.robots` of its distribution (`[options.entry_points] refine.robots = NAME = PACKAGE`);
its nodes are its package's own executables, and its profiles sit in its ament share
directory's `config/` (docs/ROBOTS.md, "Adding a robot").

The top level is standard library only: the node registry (and so setup.py, before anything is
installed) runs this file by path for `robot_packages()`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from functools import lru_cache
from importlib.metadata import entry_points
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from refine_ros.robots.descriptor import Robot

ROBOT_PACKAGES: tuple[str, ...] = (
    "refine_ros.robots.arm",
    "refine_ros.robots.rc_car",
)
ENTRY_POINT_GROUP = "refine.robots"
"""Where robots of other packages register: name -> package path."""


class UnknownRobotError(ValueError):
    pass


def robot_packages() -> tuple[str, ...]:
    """This package's robots, then those other installed packages register."""
    return _robot_packages(tuple(sys.path))


def robots() -> Mapping[str, Robot]:
    """Every registered robot's descriptor, by robot name, in registry order."""
    return _robots(tuple(sys.path))


@lru_cache(maxsize=8)
def _robot_packages(import_path: tuple[str, ...]) -> tuple[str, ...]:
    """Read once per import path: finding the entry points scans every installed
    distribution's metadata (about 5 ms), and the fault matrix asks for a robot for every
    command it judges. A folder added to `sys.path` later is scanned then; a package
    installed into a folder already scanned is seen by the next process, as with any import."""
    plugins = sorted({ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)} - set(ROBOT_PACKAGES))
    return (*ROBOT_PACKAGES, *plugins)


@lru_cache(maxsize=8)
def _robots(import_path: tuple[str, ...]) -> Mapping[str, Robot]:
    found: dict[str, Robot] = {}
    for package in _robot_packages(import_path):
        robot = importlib.import_module(f"{package}.robot").ROBOT
        if robot.name in found:
            raise ValueError(f"robot {robot.name!r} is registered twice ({package})")
        found[robot.name] = robot
    return MappingProxyType(found)


def robot_names() -> tuple[str, ...]:
    return tuple(robots())


def get_robot(name: str) -> Robot:
    """The robot called `name` (raises `UnknownRobotError` naming the known ones)."""
    try:
        return robots()[name]
    except KeyError:
        raise UnknownRobotError(f"unknown robot {name!r}; known robots: {', '.join(robots())}") from None


def robot_behind(bridge: str) -> Robot | None:
    """The robot whose bridge node is called `bridge` (None: not a robot's bridge)."""
    return next((robot for robot in robots().values() if robot.bridge == bridge), None)
