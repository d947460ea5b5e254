"""The step streams' wire format, in one place: every node, the logger, the safety filter, the
bench publishers and the MCAP export encode and decode counted vectors only through here.

A counted vector is a `std_msgs/Float64MultiArray` whose first two elements are the episode
and step counters; `layout.data_offset = 2` marks them as leading padding, which is exactly
what the field exists for. Column names travel once on a latched topic (`*_columns`, a
`std_msgs/String` holding a JSON list), so every step message stays small.

The codec itself needs no ROS: `counted_fields` gives the message as plain fields (what the
MCAP export writes) and `read_counted` checks a received one, so ROS-free code (the logger's
row joiner, the safety filter) validates with the same rules the nodes use. Only `pack_*`
build rclpy messages, importing std_msgs when first called.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

COUNTERS = 2
COUNTER_LIMIT = 2**53
"""Counters are float64 on the wire: beyond 2**53 they are no longer exact integers."""


class NotCounted(ValueError):
    """A message that is not a (valid) counted vector; the text says why. Never trust a topic."""


@dataclass(frozen=True)
class CountedVector:
    episode: int
    step: int
    values: tuple[float, ...]


def counted_fields(episode: int, step: int, values: Iterable[float], label: str = "") -> dict[str, Any]:
    """A counted vector as the fields of a Float64MultiArray (nested dicts, as mcap_ros2 and
    `ros2 topic pub` take them). `label` names the vector (a safe command's reason, ...)."""
    values = [float(v) for v in values]
    return {"layout": {"dim": [{"label": label, "size": len(values), "stride": len(values)}],
                       "data_offset": COUNTERS},
            "data": [float(episode), float(step), *values]}


def read_counted(data_offset: int, data: Sequence[float], width: int | None = None,
                 finite: bool = False) -> CountedVector:
    """The counters and values of a received counted vector's `layout.data_offset` and `data`.
    `width`: the exact number of values required; `finite`: refuse NaN/inf anywhere (a command
    for a robot). Raises NotCounted."""
    if data_offset != COUNTERS or len(data) < COUNTERS:
        raise NotCounted(f"not a counted vector: data_offset is {data_offset} with {len(data)} elements, "
                         f"expected {COUNTERS} counters first")
    if width is not None and len(data) != COUNTERS + width:
        raise NotCounted(f"{len(data) - COUNTERS} values, expected {width}")
    values = tuple(float(v) for v in data[COUNTERS:])
    if finite and not all(math.isfinite(v) for v in values):
        raise NotCounted("NaN or inf in the values")
    episode, step = float(data[0]), float(data[1])
    if not (math.isfinite(episode) and math.isfinite(step)) or max(abs(episode), abs(step)) > COUNTER_LIMIT:
        raise NotCounted("episode/step counters out of range")
    return CountedVector(int(episode), int(step), values)


def unpack_vector(msg: Any, width: int | None = None, finite: bool = False) -> CountedVector:
    """`read_counted` of a Float64MultiArray (or anything with its `layout` and `data`)."""
    return read_counted(msg.layout.data_offset, msg.data, width, finite)


def vector_label(msg: Any) -> str:
    """The label a counted vector was packed with ("" when none)."""
    return msg.layout.dim[0].label if msg.layout.dim else ""


def pack_vector(episode: int, step: int, values: Sequence[float], label: str = "") -> Any:
    """A `std_msgs/Float64MultiArray` counted vector."""
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    fields = counted_fields(episode, step, values, label)
    msg = Float64MultiArray()
    msg.layout.data_offset = fields["layout"]["data_offset"]
    msg.layout.dim = [MultiArrayDimension(**dim) for dim in fields["layout"]["dim"]]
    msg.data = fields["data"]
    return msg


def json_fields(payload: object) -> dict[str, str]:
    """A JSON payload (column names, an episode event) as the fields of a std_msgs/String."""
    return {"data": json.dumps(payload, sort_keys=True)}


def pack_json(payload: object) -> Any:
    from std_msgs.msg import String

    return String(**json_fields(payload))


def unpack_json(msg: Any) -> object:
    return json.loads(msg.data)
