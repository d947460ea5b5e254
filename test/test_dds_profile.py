"""The packaged Fast DDS profile (config/fastdds.xml) and who gets it: every front end that
starts nodes adds it, unless the user configured Fast DDS or runs another middleware.

Why it matters: with Fast DDS's default 512 KiB shared-memory segment the car twin's camera
frames (640 x 480 bgr8, 900 KiB) were mostly lost; test_ros_twin.py checks the frame rate that
gets through with the profile."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from refine_ros.bringup.dds import PROFILE_VARIABLE, USER_CHOICES, dds_environment, profile_path

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
