"""ROS 2 around refine_core. At a glance: `nodes/` (the graph's generic nodes), `robots/` (one
folder per robot: its mappings, bridge, twin, fake driver and descriptor), `loop/` (the loop's
seams over DDS, the learner's round driver and control path), `wire/` (what crosses the graph),
`logger/`, `teleop/`, `viewers/`, `bringup/` (profiles to running nodes), `bench/`, `commands/`.
Two modules sit beside them because every part uses them: `params.py` (how every node declares
its parameters) and `safety.py` (the safety rules the safety node, every bridge, the demo
recorder and the logger apply)."""
