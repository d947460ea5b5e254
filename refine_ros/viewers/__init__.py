"""What a person looks at: a task's scene as typed ROS topics (`scene_topics`: one naming rule)
and RViz markers (`markers`) for the live sim node, and the same topics written to an MCAP file
from the run database (`export`, `refine export`) for Foxglove, RViz or `ros2 bag play`."""
