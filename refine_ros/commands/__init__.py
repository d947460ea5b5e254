"""`refine` verbs that need ROS (`up`, `export`, `demo`). refine_core never imports this package:
setup.py registers the verbs in the `refine.commands` entry-point group and `refine` finds them
there, so a machine without rclpy still gets every core verb."""
