"""One folder per robot, as LeRobot keeps `robots/<name>/` and ros2_control a hardware plug-in.

A robot folder holds everything that robot alone needs: the mapping between its driver topics
and the task's observation and action, in its own units (`interface.py`), its bridge node, its
twin (core `twin.py` and node), its fake driver for the tests and benchmarks, what only it
needs (the arm's kinematics, TF buffer and marker tracker; the car's camera, track detector
and its vision), and its descriptor `robot.py` (`ROBOT`, refine_ros/robots/descriptor.py),
which is all the rest of refine_ros reads about it. `registry.py` lists the robots, one line
each; `_twin/` is what every twin shares. Nothing outside this folder names a robot.
Adding one: docs/ROBOTS.md, "Adding a robot".
"""
