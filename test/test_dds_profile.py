"""The packaged Fast DDS profile (config/fastdds.xml) and who gets it: every front end that
starts nodes adds it, unless the user configured Fast DDS or runs another middleware.

Why it matters: with Fast DDS's default 512 KiB shared-memory segment the car twin's camera
frames (640 x 480 bgr8, 900 KiB) were mostly lost; test_ros_twin.py checks the frame rate that
gets through with the profile."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from refine_ros.bringup.dds import (
    PROFILE_VARIABLE,
    USER_CHOICES,
    dds_environment,
    may_use_shared_memory,
    profile_path,
    udp_only_environment,
)

NS = {"f": "http://www.eprosima.com"}


def test_the_profile_is_found_and_keeps_fast_dds_transports_with_a_segment_for_camera_frames():
    path = profile_path()
    assert path is not None and path.name == "fastdds.xml"
    root = ET.parse(path).getroot()
    transports = {t.findtext("f:transport_id", namespaces=NS): t for t in root.iterfind(".//f:transport_descriptor", NS)}
    kinds = sorted(t.findtext("f:type", namespaces=NS) for t in transports.values())
    assert kinds == ["SHM", "UDPv4"], "shared memory on one machine, UDP for discovery and other machines"
    shm = next(t for t in transports.values() if t.findtext("f:type", namespaces=NS) == "SHM")
    frame = 640 * 480 * 3
    assert int(shm.findtext("f:segment_size", namespaces=NS)) >= 4 * frame
    participant = root.find(".//f:participant", NS)
    assert participant.get("is_default_profile") == "true", "rmw_fastrtps applies only the default profile"
    used = [e.text for e in participant.iterfind(".//f:userTransports/f:transport_id", NS)]
    assert sorted(used) == sorted(transports)


def test_nodes_get_the_profile_when_fast_dds_is_unconfigured():
    assert dds_environment({}) == {PROFILE_VARIABLE: str(profile_path())}
    assert dds_environment({"RMW_IMPLEMENTATION": "rmw_fastrtps_dynamic_cpp"}) == {PROFILE_VARIABLE: str(profile_path())}


@pytest.mark.parametrize("variable", USER_CHOICES)
def test_a_users_own_fast_dds_configuration_is_kept(variable):
    assert dds_environment({variable: "/etc/my_fastdds.xml"}) == {}


def test_another_middleware_gets_nothing():
    assert dds_environment({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}) == {}
    assert dds_environment({"RMW_IMPLEMENTATION": "rmw_zenoh_cpp"}) == {}


def test_refine_up_processes_and_the_benchmarks_start_nodes_with_it():
    pytest.importorskip("rclpy", reason="rclpy (ROS 2 client wheels) is not installed")
    from refine_ros.bench import ros_env
    from refine_ros.bringup import launch_plan, resolve_profile
    from refine_ros.bringup.processes import ProcessGraph

    plan = launch_plan(resolve_profile("door_sim", {"rviz": "false"}), check_interpreter=False)
    bare = {k: v for k, v in ros_env().items() if k not in USER_CHOICES}
    assert ProcessGraph(plan, env=bare, echo=None).env[PROFILE_VARIABLE] == str(profile_path())
    mine = {**bare, PROFILE_VARIABLE: "/etc/my_fastdds.xml"}
    assert ProcessGraph(plan, env=mine, echo=None).env[PROFILE_VARIABLE] == "/etc/my_fastdds.xml"
    assert ros_env()[PROFILE_VARIABLE]  # the benchmarks' and the tests' children


def test_the_udp_only_profile_replaces_the_packaged_one_and_nothing_a_user_chose():
    udp = udp_only_environment({})[PROFILE_VARIABLE]
    assert udp.endswith("fastdds_udp.xml") and Path(udp).is_file()
    assert udp_only_environment({PROFILE_VARIABLE: str(profile_path())}) == {PROFILE_VARIABLE: udp}
    assert udp_only_environment({PROFILE_VARIABLE: udp}) == {}, "in force already: no second start"
    for variable in USER_CHOICES:
        assert udp_only_environment({variable: "/etc/my_fastdds.xml"}) == {}
    assert udp_only_environment({"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}) == {}
    assert udp_only_environment({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}) == {}
    root = ET.parse(udp).getroot()
    assert [t.findtext("f:type", namespaces=NS) for t in root.iterfind(".//f:transport_descriptor", NS)] == ["UDPv4"]
    assert root.find(".//f:participant", NS).get("is_default_profile") == "true"
    assert not may_use_shared_memory({PROFILE_VARIABLE: udp})
    assert not may_use_shared_memory({"FASTDDS_BUILTIN_TRANSPORTS": "UDPv4"})
    assert may_use_shared_memory({PROFILE_VARIABLE: str(profile_path())}) and may_use_shared_memory({})


def test_a_localhost_graph_gets_the_localhost_udp_profile_since_rmw_would_add_shared_memory():
    """rmw_fastrtps builds a LOCALHOST participant's transports itself (shared memory among
    them), so the node leaves that range for SYSTEM_DEFAULT and its profile keeps discovery on
    127.0.0.1; static peers it could not carry over mean hands off."""
    local = {PROFILE_VARIABLE: str(profile_path()), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    extra = udp_only_environment(local)
    assert Path(extra[PROFILE_VARIABLE]).name == "fastdds_udp_localhost.xml"
    assert extra["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT" and "ROS_LOCALHOST_ONLY" not in extra
    assert may_use_shared_memory(local) and not may_use_shared_memory({**local, **extra})
    assert udp_only_environment({**local, **extra}) == {}
    assert udp_only_environment({"ROS_LOCALHOST_ONLY": "1"})["ROS_LOCALHOST_ONLY"] == "0"
    assert udp_only_environment({**local, "ROS_STATIC_PEERS": "192.168.1.7"}) == {}
    root = ET.parse(extra[PROFILE_VARIABLE]).getroot()
    peers = [a.text for a in root.iterfind(".//f:initialPeersList//f:address", NS)]
    assert peers == ["127.0.0.1"] and root.find(".//f:metatrafficUnicastLocatorList", NS) is not None
    assert [t.findtext("f:type", namespaces=NS) for t in root.iterfind(".//f:transport_descriptor", NS)] == ["UDPv4"]


def _shared_memory_ports(pid: int) -> set[str]:
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {line.split()[-1] for line in maps.splitlines() if "/dev/shm/fastdds_port" in line}


NODES_WITHOUT_SHARED_MEMORY = {
    "command_guard": ("refine_ros.nodes.command_guard", ["-p", "command_type:=joint_velocities"], "guarding"),
    "arm_twin": ("refine_ros.robots.arm.arm_twin", ["-p", "interface:=forward_velocity"], "arm twin up"),
}


@pytest.mark.ros
@pytest.mark.parametrize("node, user_profile", [("command_guard", False), ("command_guard", True), ("arm_twin", False)],
                         ids=["guard_launched", "guard_users_own_profile", "arm_twin_launched"])
def test_nodes_a_frozen_peer_must_not_hold_send_without_shared_memory(tmp_path, node, user_profile):
    """As a launch starts them (the packaged profile and LOCALHOST discovery in their
    environment), the command guard and the arm's twin start themselves again without shared
    memory: a frozen bridge's port cannot hold the guard's stop or the twin's command intake. A
    user's own profile is kept, with the guard's warning."""
    import subprocess
    import sys
    import time

    from refine_ros.bench import ros_env

    module, args, ready = NODES_WITHOUT_SHARED_MEMORY[node]
    env = {**ros_env(), "PYTHONUNBUFFERED": "1"}
    if user_profile:
        mine = tmp_path / "my_fastdds.xml"
        mine.write_text(profile_path().read_text())
        env[PROFILE_VARIABLE] = str(mine)
    log = tmp_path / "node.log"
    proc = subprocess.Popen([sys.executable, "-m", module, "--ros-args", *args], env=env, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90.0
        while ready not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready in log.read_text(), log.read_text()
        ports = _shared_memory_ports(proc.pid)  # its own port exists from the participant's creation on
        if user_profile:
            assert ports and "may use shared memory" in log.read_text(), (ports, log.read_text())
        else:
            assert not ports and "may use shared memory" not in log.read_text(), (ports, log.read_text())
    finally:
        proc.terminate()
        proc.wait(30)
