"""Parameter descriptors for the nodes: one way to spell a description, a range and the
read-only flag, so that every node's declared ranges are what docs/NODES.md shows.

Most nodes keep a module-level table `name -> (default, description, bounds)`; `bounds` is
`None` or a `(low, high)` pair whose type picks the range kind: integers give an
`IntegerRange` (step 1), floats a `FloatingPointRange`. ROS then refuses an out-of-range value
before any node code sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node

Bounds = tuple[int, int] | tuple[float, float] | None
Table = Mapping[str, tuple[Any, str, Bounds]]


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


def declare_parameters(node: Node, table: Table, *, read_only: bool = False) -> None:
    """Declare every `name: (default, description, bounds)` of `table` on `node`, in order."""
    for name, (default, description, bounds) in table.items():
        node.declare_parameter(name, default, descriptor(description, bounds, read_only=read_only))
