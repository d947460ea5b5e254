"""QoS profiles, chosen per data kind rather than per topic, so every node agrees.

- STATE: observations and actions at the control rate. Reliable with a short queue: a late
  control value is useless, but a dropped one must be visible to the logger as a gap.
- CONTROL: the control loop's streams (observation, action, policy step, reward). Reliable,
  with a writer history deep enough that a subscriber which also records every sample (the
  rollout logger) can fall behind for a moment without the writer overwriting samples it has
  not acknowledged; a lockstep subscriber still sees one message per step.
- LOG: the logger's subscriptions. Reliable and deep so a slow disk never drops a row while
  the publisher keeps its own (short) queue and is never blocked by it.
- LATCHED: programs, round events and column names. Reliable + transient local so a node that
  starts late still receives the last value (no polling).
- REQUEST: the analysis node's requests to the learner and its answers. Reliable + transient
  local, depth 1: a node that starts (or restarts) late receives exactly the request that is
  waiting for it, never an older one it would run again.
- COMMAND: safety and hardware commands. Reliable, depth 1: only the newest command matters.
- SENSOR: camera images and markers, best effort like sensor drivers publish them.
"""

from rclpy.qos import (
    DurabilityPolicy,
    HistoryPolicy,
    QoSProfile,
    ReliabilityPolicy,
    qos_profile_sensor_data,
)

STATE = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=10, reliability=ReliabilityPolicy.RELIABLE
)
CONTROL = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=200, reliability=ReliabilityPolicy.RELIABLE
)
LOG = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=5000, reliability=ReliabilityPolicy.RELIABLE
)
LATCHED = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
REQUEST = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
COMMAND = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE
)
SENSOR = qos_profile_sensor_data
