"""QoS profiles, chosen per data kind, and per topic for each side of it.

- CONTROL: the writers of every stream the rollout logger records (observation, action,
  policy step, reward, expert action, safe action) and the learner's reading of observations
  and rewards. Reliable with a deep writer history (200 samples, 4 s at 50 Hz): a subscriber
  that records every sample can fall behind for a moment without the writer overwriting
  samples it has not acknowledged, and the learner answers every observation in order (each
  action carries the step it answers), so no step goes missing from the log.
- LOG: the logger's subscriptions. Reliable and deep (5000) so a slow disk never drops a row;
  the reader queue absorbs the burst and the writers are never blocked by it.
- STATE: state nobody records sample by sample (typed scene topics, safety/status, the safety
  node's observation heartbeat). Reliable, short queue: the newest value is what counts.
- COMMAND: readers of commands that act on the newest one only (the sim node's actions, the
  safety node's policy / teleop commands and e-stop, the bridges' safe actions) and the
  writers of hardware commands. Reliable, depth 1. A command topic the logger also records
  (refine/action, refine/safe_action) is written CONTROL, so the depth-1 readers still get the
  newest sample while the logger gets them all.
- LATCHED: programs, round events and column names. Reliable + transient local so a node that
  starts late still receives the last value (no polling).
- SENSOR: camera images, markers and driver sensor inputs, best effort as drivers publish.
- TF / TF_STATIC: the readers of `/tf` and `/tf_static`, as tf2_ros's own listener reads them
  (reliable, depth 100; the static one transient local, so transforms a robot published once at
  start still arrive).
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
COMMAND = QoSProfile(
    history=HistoryPolicy.KEEP_LAST, depth=1, reliability=ReliabilityPolicy.RELIABLE
)
SENSOR = qos_profile_sensor_data
TF = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.RELIABLE)
TF_STATIC = QoSProfile(
    history=HistoryPolicy.KEEP_LAST,
    depth=100,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
