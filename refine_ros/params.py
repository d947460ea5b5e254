"""Node parameters, declared one way by every node: a module-level table `PARAMETERS` of
`name -> Param(default, description, bounds, read_only)`, so that every node's declared
ranges are what docs/NODES.md shows.

`bounds` is `None` or a `(low, high)` pair whose type picks the range kind: integers give an
`IntegerRange` (step 1), floats a `FloatingPointRange`. ROS then refuses an out-of-range value
before any node code sees it. A default taken from a refine_core config dataclass (e.g.
`RefineConfig().max_rounds`) keeps the one source of truth for that value in refine_core.

A value that belongs to one robot (a safety limit, a speed scale) has no default in the code
at all: its default is `Required(type)`, the profile (`config/<profile>.yaml`) is where it is
set, and a node started without it refuses to start (`StartRefused`, exit status 2) naming
every missing parameter. So the code and a profile can never disagree about such a value.
A value a robot may or may not have (the arm's workspace box; a car has none) is `Unset(type)`:
declared with its type only, and None when the profile leaves it out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.node import Node
from rclpy.parameter import Parameter

Bounds = tuple[int, int] | tuple[float, float] | None


class StartRefused(ValueError):
    """A node will not start in this configuration; the message (one line) says what to set."""


@dataclass(frozen=True)
class Required:
    """The default of a parameter that has none: the profile must set it."""

    type: str
    """The ROS type: double, integer, bool, string, double_array, integer_array, string_array."""

    @property
    def ros_type(self) -> Parameter.Type:
        return Parameter.Type[self.type.upper()]

    def __str__(self) -> str:
        return f"required {self.type}"


@dataclass(frozen=True)
class Unset(Required):
    """The default of a parameter that may stay unset: declared with its type only; `values`
    gives None for it when nobody set it (ROS cannot declare an empty array)."""

    def __str__(self) -> str:
        return f"unset {self.type} (none)"


@dataclass(frozen=True)
class Param:
    default: Any
    description: str
    bounds: Bounds = None
    read_only: bool = True
    """Most parameters shape a node at start; those a node re-reads at run time say so."""
    aliases: tuple[str, ...] = ()
    """Old names of this parameter, still read (with a warning) so launch files and scripts
    written for them keep working: a name says the same thing everywhere, here the field of
    the refine_core config dataclass the `refine run` flag is generated from."""

    @property
    def required(self) -> bool:
        return isinstance(self.default, Required) and not isinstance(self.default, Unset)

    @property
    def typed_only(self) -> bool:
        """Declared with a type and no value (required or unset)."""
        return isinstance(self.default, Required)


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
    """Declare every parameter of `table` on `node`, in order; a required one is declared with
    its type only, so it stays unset unless the profile (or the command line) gives it."""
    for name, p in table.items():
        value = p.default.ros_type if p.typed_only else p.default
        node.declare_parameter(name, value, descriptor(p.description, p.bounds, read_only=p.read_only))
        for alias in p.aliases:  # typed, no value: None unless someone still sets the old name
            typed = Parameter.Type.from_parameter_value(p.default) if not p.typed_only else p.default.ros_type
            node.declare_parameter(alias, typed, descriptor(f"deprecated: use {name}", p.bounds,
                                                            read_only=p.read_only))


def values(node: Node, table: Table) -> dict[str, Any]:
    """The node's current value of every parameter in `table`; `StartRefused` naming every
    required parameter nobody set (an unset `Unset` one is None)."""
    found: dict[str, Any] = {}
    missing: list[str] = []
    for name, p in table.items():
        old = next((a for a in p.aliases if _is_set(node, a)), None)
        if old is not None:
            node.get_logger().warning(f"parameter {old!r} is deprecated: use {name!r} (taking {old}'s value)")
            found[name] = node.get_parameter(old).value
            continue
        try:
            found[name] = node.get_parameter(name).value
        except ParameterUninitializedException:
            if p.required:
                missing.append(name)
            else:
                found[name] = None
    if missing:
        raise StartRefused(
            f"{node.get_name()}: robot-specific parameter(s) {', '.join(missing)} have no default in the code; "
            "set them in the profile (config/<profile>.yaml) or with --ros-args -p NAME:=VALUE")
    return found


def _is_set(node: Node, name: str) -> bool:
    try:
        node.get_parameter(name).value  # noqa: B018 - raises when the typed-only name was never set
    except ParameterUninitializedException:
        return False
    return True


def default_of(entry: Any) -> Any:
    """The default of a parameter-table entry (a `Param`, or a node's `(default, descriptor)`)."""
    if isinstance(entry, Param):
        return entry.default
    return entry[0] if isinstance(entry, tuple) else entry


@contextmanager
def refusing(node: Node) -> Iterator[None]:
    """Around the part of a constructor that may refuse to start: the half-built node is
    destroyed before `StartRefused` propagates, so nothing of it lingers on the graph."""
    try:
        yield
    except StartRefused:
        Node.destroy_node(node)
        raise
