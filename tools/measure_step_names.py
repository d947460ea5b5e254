"""What it costs to send the column names with every step message.

The choice it informs: `refine_ros_interfaces/msg/Step` carries `names` with its `values`, so
`ros2 topic echo` and a bag are readable without a second topic. This measures the price at
the rates the rollout logger sees, between two processes over DDS on loopback (rclpy on both
sides, as the nodes run): bytes on the wire, and CPU time per message in the publishing and in
the subscribing process, with the names and without them (and, for reference, today's
`std_msgs/Float64MultiArray` counted vector).

    .venv/bin/python tools/measure_step_names.py --columns 60 --rate 2000 --seconds 5

prints one JSON object per variant. The subscriber process is this script with `--subscribe`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

VARIANTS = ("step_with_names", "step_values_only", "float64_multi_array")
TOPIC = "measure/step"


def columns(count: int) -> list[str]:
    """Names shaped like the logger's: `tile_3_theta`, `mean_steer`, `latent_gain_error`, ..."""
    stems = ("tile_{}_x", "tile_{}_theta", "mean_act_{}", "latent_reach_{}", "weight_gain_{}")
    return [stems[i % len(stems)].format(i) for i in range(count)]


def message_type(variant: str):
    if variant == "float64_multi_array":
        from std_msgs.msg import Float64MultiArray

        return Float64MultiArray
    from refine_ros_interfaces.msg import Step

    return Step


def make_message(variant: str, names: list[str], step: int):
    values = [0.001 * i + step for i in range(len(names))]
    if variant == "float64_multi_array":
        from refine_ros.wire.messages import pack_vector

        return pack_vector(1, step, values)
    msg = message_type(variant)(episode=1, step=step, values=values)
    if variant == "step_with_names":
        msg.names = names
    return msg


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def subscribe(variant: str, expected: int, timeout: float) -> dict:
    """Counts messages and reads every value (and name) as the logger would."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    rclpy.init()
    node = rclpy.create_node("measure_step_subscriber")
    seen = {"count": 0, "first": None, "cpu_first": None}
    width = [0]

    def on_message(msg) -> None:
        if seen["first"] is None:
            seen["first"], seen["cpu_first"] = time.monotonic(), cpu_seconds()
        if variant == "step_with_names":
            row = dict(zip(msg.names, msg.values, strict=True))
        else:
            row = list(msg.data if variant == "float64_multi_array" else msg.values)
        width[0] = len(row)
        seen["count"] += 1

    node.create_subscription(message_type(variant), TOPIC, on_message,
                             QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE))
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print("ready", flush=True)
    deadline = time.monotonic() + timeout
    while seen["count"] < expected and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.1)
    elapsed = time.monotonic() - (seen["first"] or time.monotonic())
    cpu = cpu_seconds() - (seen["cpu_first"] or cpu_seconds())
    node.destroy_node()
    rclpy.try_shutdown()
    return {"received": seen["count"], "width": width[0], "subscriber_cpu_us_per_msg": 1e6 * cpu / max(1, seen["count"]),
            "subscriber_seconds": elapsed}


def publish(variant: str, count: int, rate: float, names: list[str], subscriber: subprocess.Popen) -> dict:
    import rclpy
    from rclpy.duration import Duration
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rclpy.serialization import serialize_message

    rclpy.init()
    node = rclpy.create_node("measure_step_publisher")
    pub = node.create_publisher(message_type(variant), TOPIC,
                                QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE))
    deadline = time.monotonic() + 20.0
    while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    size = len(serialize_message(make_message(variant, names, 0)))
    period = 1.0 / rate
    cpu0, start = cpu_seconds(), time.monotonic()
    for step in range(count):
        delay = start + step * period - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        pub.publish(make_message(variant, names, step))
    elapsed = time.monotonic() - start
    cpu = cpu_seconds() - cpu0
    pub.wait_for_all_acked(Duration(seconds=10.0))
    node.destroy_node()
    rclpy.try_shutdown()
    return {"bytes_per_msg": size, "publisher_cpu_us_per_msg": 1e6 * cpu / count, "achieved_hz": count / elapsed}


def codec_cost(variant: str, width: int, repeat: int = 5000) -> dict:
    """In one process, without DDS: building, serializing and deserializing one message, the
    part of the per-message work that the names change."""
    from rclpy.serialization import deserialize_message, serialize_message

    names, kind = columns(width), message_type(variant)
    start = time.perf_counter()
    msgs = [make_message(variant, names, i) for i in range(repeat)]
    build = time.perf_counter() - start
    start = time.perf_counter()
    blobs = [serialize_message(m) for m in msgs]
    encode = time.perf_counter() - start
    start = time.perf_counter()
    for blob in blobs:
        deserialize_message(blob, kind)
    decode = time.perf_counter() - start
    return {"build_us": 1e6 * build / repeat, "serialize_us": 1e6 * encode / repeat,
            "deserialize_us": 1e6 * decode / repeat}


def measure(variant: str, count: int, rate: float, width: int) -> dict:
    env = dict(os.environ)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    sub = subprocess.Popen([sys.executable, __file__, "--subscribe", variant, "--count", str(count)],
                           stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert sub.stdout is not None
        sub.stdout.readline()  # "ready"
        result = publish(variant, count, rate, columns(width), sub)
        out, _ = sub.communicate(timeout=60)
    finally:
        if sub.poll() is None:
            sub.kill()
    return {"variant": variant, "columns": width, "rate_hz": rate, "messages": count, **result,
            **json.loads(out.strip().splitlines()[-1]), **codec_cost(variant, width)}


def main() -> None:
    parser = argparse.ArgumentParser(description="cost of column names in every step message")
    parser.add_argument("--columns", type=int, default=60)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--subscribe", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.subscribe:
        print(json.dumps(subscribe(args.subscribe, args.count, timeout=120.0)), flush=True)
        return
    count = int(args.rate * args.seconds)
    for variant in args.variants.split(","):
        print(json.dumps(measure(variant, count, args.rate, args.columns)), flush=True)


if __name__ == "__main__":
    main()
