"""The raw driver topics of one demonstration take, kept beside the run database as MCAP.

The run database holds what the recorder paired (observations and executed commands); a
take's MCAP holds what the drivers themselves published while it ran (joint states, TF, the
camera, odometry), byte for byte, so a take can be replayed (`ros2 bag play`), inspected in
Foxglove, or turned into other observations later without driving it again.

Messages arrive serialized (CDR, as rosbag2 stores them) and stay in memory until the take is
kept (`<run_dir>/takes/take_<n>.mcap`); a discarded or re-recorded take writes nothing, like
the database. Schemas are the installed `.msg` definitions (`refine_ros.viewers.export`), so no ROS
install is needed to write or read the file. Memory grows with the take: name the topics you
need (a camera at 30 Hz is megabytes per second).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path


def parse_topics(entries: list[str]) -> list[tuple[str, str]]:
    """`topic:pkg/msg/Type` entries -> (topic, type); ValueError names a malformed one."""
    out = []
    for entry in entries:
        entry = str(entry).strip()
        if not entry:
            continue
        topic, sep, datatype = entry.rpartition(":")
        parts = datatype.split("/")
        if not sep or not topic or len(parts) != 3 or parts[1] != "msg":
            raise ValueError(f"bag topic {entry!r}: expected TOPIC:PACKAGE/msg/TYPE, e.g. "
                             "/joint_states:sensor_msgs/msg/JointState")
        out.append((topic, datatype))
    return out


def message_class(datatype: str) -> type:
    """The Python message class of `pkg/msg/Type` (ImportError / AttributeError if absent)."""
    package, _, name = datatype.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


@dataclass
class TakeBag:
    """Serialized messages of one take, in arrival order."""

    topics: list[tuple[str, str]]
    messages: list[tuple[str, int, bytes]] = field(default_factory=list)
    """(topic, receive time in ns, CDR bytes)."""

    def add(self, topic: str, time_ns: int, data: bytes) -> None:
        self.messages.append((topic, int(time_ns), bytes(data)))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for topic, _, _ in self.messages:
            out[topic] = out.get(topic, 0) + 1
        return out

    def write(self, path: Path, metadata: dict[str, str]) -> Path:
        """Write the take to `path` (MCAP, ROS 2 CDR), every named topic a channel."""
        from mcap.writer import Writer

        from refine_ros.viewers.export import message_definition

        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as stream:
            writer = Writer(stream)
            writer.start(profile="ros2", library="refine_ros")
            channels: dict[str, int] = {}
            for topic, datatype in self.topics:
                schema = writer.register_schema(datatype, "ros2msg", message_definition(datatype).encode())
                channels[topic] = writer.register_channel(topic, "cdr", schema)
            sequence: dict[str, int] = {}
            for topic, time_ns, data in self.messages:
                sequence[topic] = sequence.get(topic, 0) + 1
                writer.add_message(channels[topic], time_ns, data, time_ns, sequence[topic])
            writer.add_metadata("refine_take", metadata)
            writer.finish()
        return path
