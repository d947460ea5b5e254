"""Rollouts and their step tables. Submodules are imported directly (`rollout.table` needs no
torch or simulator, so the ROS logger can use the column names without them)."""
