"""The DDS settings every front end gives the nodes it starts: the packaged Fast DDS profile
(config/fastdds.xml), whose larger shared-memory segment lets camera images through.

Why here: `ros2 launch`, `refine up` (in one process or as processes), the benchmarks and the
tests start nodes in different ways, and a camera driver started without the profile loses
most of its frames to the others' traffic (the profile's comment has the measurement). One
function decides, so none of them can forget it. A user who configured Fast DDS, or runs
another RMW, keeps their choice: nothing is added then.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from refine_ros.bringup.profiles import _find

PROFILE_FILE = "fastdds.xml"
PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
USER_CHOICES = (PROFILE_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS")
"""A Fast DDS configuration the user made themselves: any of these set means hands off."""
DEFAULT_RMW = "rmw_fastrtps_cpp"  # ROS 2's default middleware


def profile_path() -> Path | None:
    """config/fastdds.xml from the source tree or the installed share directory."""
    return _find("config", PROFILE_FILE)


def dds_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `environ` for the nodes started from it: the packaged profile
    when the middleware is Fast DDS and nothing about it was configured; otherwise none."""
    rmw = environ.get("RMW_IMPLEMENTATION") or DEFAULT_RMW
    if not rmw.startswith("rmw_fastrtps") or any(environ.get(name) for name in USER_CHOICES):
        return {}
    path = profile_path()
    return {PROFILE_VARIABLE: str(path)} if path is not None else {}
