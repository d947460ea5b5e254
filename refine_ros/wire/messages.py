"""The step streams' wire format, in one place: every node, the logger, the safety filter, the
bench publishers and the MCAP export encode and decode step messages only through here.

Two encodings, one reader (`unpack_vector` returns a `CountedVector` for either):

- **Step** (`refine_ros_interfaces/msg/Step`): the data streams a person reads and the logger
  records (`refine/observation`, `refine/policy_step`, `refine/reward`,
  `refine/expert_action`). The column names travel with the values, so `ros2 topic echo`
  shows `names: [gripper_x, ...]` beside `values: [...]` and no receiver can pair values with
  the wrong names.
- **Counted vector** (`std_msgs/Float64MultiArray`, first two elements the episode and step
  counters, `layout.data_offset = 2` marking them as leading padding): the command path
  (`refine/action`, `refine/safe_action`, `refine/teleop_action`, `refine/command_result`).
  It stays on the standard type because its receivers take exactly one fixed width (the
  robot's action axes) and the safety node's stop reason travels in the dimension label.

The codec itself needs no ROS: `*_fields` give a message as plain fields (what the MCAP export
writes) and `read_counted` / `read_step` check a received one, so ROS-free code (the logger's
row joiner, the safety filter) validates with the same rules the nodes use. Only `pack_*`
build rclpy messages, importing the message modules when first called.
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


REWARD_NAMES = ("reward", "done", "success")
"""The values of a `refine/reward` step: the reward, 1 when the episode ended, the task's success."""


@dataclass(frozen=True)
class CountedVector:
    episode: int
    step: int
    values: tuple[float, ...]
    names: tuple[str, ...] = ()
    """The column names a Step carried (empty for a counted vector: its names are known to the
    receiver or sent on a `*_columns` topic)."""


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


def step_fields(episode: int, step: int, names: Sequence[str], values: Iterable[float],
                stamp_ns: int = 0) -> dict[str, Any]:
    """A refine_ros_interfaces/msg/Step as plain fields; names[i] labels values[i]."""
    values = [float(v) for v in values]
    if len(names) != len(values):
        raise ValueError(f"{len(names)} names for {len(values)} values")
    return {"header": {"stamp": {"sec": int(stamp_ns // 1_000_000_000), "nanosec": int(stamp_ns % 1_000_000_000)},
                       "frame_id": ""},
            "episode": int(episode), "step": int(step), "names": [str(n) for n in names], "values": values}


def read_step(episode: int, step: int, names: Sequence[str], values: Sequence[float],
              width: int | None = None, finite: bool = False) -> CountedVector:
    """The fields of a received Step, checked like a counted vector's (and one name per value)."""
    if len(names) != len(values):
        raise NotCounted(f"a step with {len(names)} names for {len(values)} values")
    if width is not None and len(values) != width:
        raise NotCounted(f"{len(values)} values, expected {width}")
    vector = tuple(float(v) for v in values)
    if finite and not all(math.isfinite(v) for v in vector):
        raise NotCounted("NaN or inf in the values")
    return CountedVector(int(episode), int(step), vector, tuple(names))


def unpack_vector(msg: Any, width: int | None = None, finite: bool = False) -> CountedVector:
    """The counters, values (and names) of a step-stream message: a Step or a counted
    Float64MultiArray. Raises NotCounted."""
    if hasattr(msg, "names"):
        return read_step(msg.episode, msg.step, msg.names, msg.values, width, finite)
    return read_counted(msg.layout.data_offset, msg.data, width, finite)


def pack_step(episode: int, step: int, names: Sequence[str], values: Sequence[float], stamp: Any = None) -> Any:
    """A refine_ros_interfaces/msg/Step; `stamp` (builtin_interfaces/Time) when the values were
    produced, zero when not given."""
    from refine_ros_interfaces.msg import Step

    fields = step_fields(episode, step, names, values)
    msg = Step(episode=fields["episode"], step=fields["step"], names=fields["names"], values=fields["values"])
    if stamp is not None:
        msg.header.stamp = stamp
    return msg


def step_type() -> type:
    """The Step message class, for create_publisher / create_subscription."""
    from refine_ros_interfaces.msg import Step

    return Step


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
