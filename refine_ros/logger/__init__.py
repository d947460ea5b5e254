"""The rollout logger's parts, apart from its node: joining step streams into rows (`rows`),
episode bookkeeping (`episodes`) and the database writer thread (`writer`). None imports ROS;
the node (`refine_ros.nodes.rollout_logger`) only subscribes and hands messages to the writer."""

from refine_ros.logger.writer import LogWriter

__all__ = ["LogWriter"]
