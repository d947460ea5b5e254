"""ROS 2 glue around refine_core: nodes, profiles and the one-process runner."""
