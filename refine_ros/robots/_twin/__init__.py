"""What every robot's physics twin shares, without naming a robot: a twin is the simulator
behind a robot's own interfaces, in real time, with latency, sensor noise and dropouts, so a
team rehearses the real-robot workflow (teleop takes, refinement rounds, live episodes through
the safety node) before the hardware is on the bench. Each robot folder holds its twin's core
(`twin.py`, plain Python, tested without DDS) and its node; they build on:

- `realtime`: fixed-rate stepping from an injected clock, command latency, seeded sensor
  noise, dropout windows;
- `frames`: poses, transforms and joint states as plain values (what becomes TF and
  sensor_msgs);
- `node`: what the twin nodes share: dropout and noise parameters, the operator's
  `~/silence_<sensor>` lever, ROS stamps, the driver stacks' QoS;
- `costs`: what one real-time tick costs against the control period (`refine bench`).

Importing this package loads no simulator.
"""
