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
UDP_PROFILE_FILE = "fastdds_udp.xml"
"""UDP only, for the nodes a frozen peer's shared memory must never hold (the command guard)."""
UDP_LOCALHOST_PROFILE_FILE = "fastdds_udp_localhost.xml"
"""The same with discovery kept on this machine, for a graph whose range is LOCALHOST."""
PROFILE_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"
USER_CHOICES = (PROFILE_VARIABLE, "FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_BUILTIN_TRANSPORTS")
"""A Fast DDS configuration the user made themselves: any of these set means hands off."""
DEFAULT_RMW = "rmw_fastrtps_cpp"  # ROS 2's default middleware


def profile_path() -> Path | None:
    """config/fastdds.xml from the source tree or the installed share directory."""
    return _find("config", PROFILE_FILE)


def _fast_dds(environ: Mapping[str, str]) -> bool:
    return (environ.get("RMW_IMPLEMENTATION") or DEFAULT_RMW).startswith("rmw_fastrtps")


def dds_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `environ` for the nodes started from it: the packaged profile
    when the middleware is Fast DDS and nothing about it was configured; otherwise none."""
    if not _fast_dds(environ) or any(environ.get(name) for name in USER_CHOICES):
        return {}
    path = profile_path()
    return {PROFILE_VARIABLE: str(path)} if path is not None else {}


def _discovery_range(environ: Mapping[str, str]) -> str:
    if environ.get("ROS_LOCALHOST_ONLY") == "1":  # the older switch, still honoured by rcl
        return "LOCALHOST"
    return (environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") or "SYSTEM_DEFAULT").upper()


def udp_only_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables that give a node started from `environ` a participant without shared
    memory: config/fastdds_udp.xml, or under ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (where
    rmw_fastrtps adds shared memory whatever the profile says) config/fastdds_udp_localhost.xml
    with the range SYSTEM_DEFAULT, which keeps discovery on this machine by itself. Empty when
    the middleware is not Fast DDS, when that is in force already, or when the user configured
    something this cannot carry over (their own profile or transports, static peers, the
    range OFF): the node should then say its stop may wait on a frozen process."""
    if not _fast_dds(environ):
        return {}
    packaged = profile_path()
    chosen = [name for name in USER_CHOICES if environ.get(name)]
    if any(name != PROFILE_VARIABLE or packaged is None or Path(environ[name]) != packaged for name in chosen):
        return {}
    scope = _discovery_range(environ)
    if scope == "LOCALHOST" and not environ.get("ROS_STATIC_PEERS"):
        path = _find("config", UDP_LOCALHOST_PROFILE_FILE)
        if path is None:
            return {}
        extra = {PROFILE_VARIABLE: str(path), "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}
        return {**extra, "ROS_LOCALHOST_ONLY": "0"} if "ROS_LOCALHOST_ONLY" in environ else extra
    if scope in ("SUBNET", "SYSTEM_DEFAULT"):
        path = _find("config", UDP_PROFILE_FILE)
        return {} if path is None else {PROFILE_VARIABLE: str(path)}
    return {}


def may_use_shared_memory(environ: Mapping[str, str]) -> bool:
    """Whether a participant created from `environ` may send through Fast DDS's shared memory."""
    if not _fast_dds(environ):
        return False
    scope = _discovery_range(environ)
    if scope == "OFF":
        return False  # it talks to no other process
    if scope == "LOCALHOST":
        return True  # rmw_fastrtps adds shared memory itself
    if environ.get("FASTDDS_BUILTIN_TRANSPORTS", "").upper() in ("UDPV4", "UDPV6"):
        return False
    return Path(environ.get(PROFILE_VARIABLE, "")).name not in (UDP_PROFILE_FILE, UDP_LOCALHOST_PROFILE_FILE)
