"""Counted vectors on standard messages (no custom .msg packages can be built here).

A counted vector is a `std_msgs/Float64MultiArray` whose first two elements are the episode
and step counters; `layout.data_offset = 2` marks them as leading padding, which is exactly
what the field exists for. Column names travel once on a latched topic (`*_columns`, a
`std_msgs/String` holding a JSON list), so every step message stays small.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from std_msgs.msg import Float64MultiArray, MultiArrayDimension, String

COUNTERS = 2


@dataclass(frozen=True)
class CountedVector:
    episode: int
    step: int
    values: tuple[float, ...]


def pack_vector(episode: int, step: int, values: Sequence[float], label: str = "") -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.data_offset = COUNTERS
    msg.layout.dim = [MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    msg.data = [float(episode), float(step), *map(float, values)]
    return msg


def unpack_vector(msg: Float64MultiArray) -> CountedVector:
    """Raises ValueError on a message that is not a counted vector (never trust a topic)."""
    data = msg.data
    if msg.layout.data_offset != COUNTERS or len(data) < COUNTERS:
        raise ValueError("not a counted vector: expected data_offset=2 and two counters")
    return CountedVector(int(data[0]), int(data[1]), tuple(float(v) for v in data[COUNTERS:]))


def pack_json(payload: object) -> String:
    return String(data=json.dumps(payload, sort_keys=True))


def unpack_json(msg: String) -> object:
    return json.loads(msg.data)
