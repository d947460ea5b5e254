"""The method, in pure Python: tasks, structured policies, learning, rollouts, storage, analysts, sandbox and the refinement loop. Nothing here imports ROS."""
