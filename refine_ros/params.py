"""Node parameters, declared one way by every node: a module-level table `PARAMETERS` of
`name -> Param(default, description, bounds, read_only)`, so that every node's declared
ranges are what docs/NODES.md shows.

`bounds` is `None` or a `(low, high)` pair whose type picks the range kind: integers give an
`IntegerRange` (step 1), floats a `FloatingPointRange`. ROS then refuses an out-of-range value
before any node code sees it. A default taken from a refine_core config dataclass (e.g.
`RefineConfig().max_rounds`) keeps the one source of truth for that value in refine_core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node

Bounds = tuple[int, int] | tuple[float, float] | None


@dataclass(frozen=True)
class Param:
    default: Any
    description: str
    bounds: Bounds = None
    read_only: bool = True
    """Most parameters shape a node at start; those a node re-reads at run time say so."""


Table = Mapping[str, Param]


def descriptor(description: str, bounds: Bounds = None, *, read_only: bool = False,
               dynamic_typing: bool = False) -> ParameterDescriptor:
    """A descriptor with the range `bounds` implies (integer bounds: an integer range)."""
    desc = ParameterDescriptor(description=description, read_only=read_only, dynamic_typing=dynamic_typing)
    if bounds is not None:
        low, high = bounds
        if isinstance(low, int) and isinstance(high, int):
            desc.integer_range = [IntegerRange(from_value=low, to_value=high, step=1)]
        else:
            desc.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high))]
    return desc


def declare_parameters(node: Node, table: Table) -> None:
    """Declare every parameter of `table` on `node`, in order."""
    for name, p in table.items():
        node.declare_parameter(name, p.default, descriptor(p.description, p.bounds, read_only=p.read_only))


def values(node: Node, table: Table) -> dict[str, Any]:
    """The node's current value of every parameter in `table`."""
    return {name: node.get_parameter(name).value for name in table}
