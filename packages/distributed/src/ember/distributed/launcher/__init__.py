"""torch.distributed.launcher: launching a node's workers from Python (``elastic_launch``)."""

from .api import LaunchConfig, elastic_launch, launch_agent

__all__ = ["LaunchConfig", "elastic_launch", "launch_agent"]
