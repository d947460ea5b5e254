"""The installed package is a valid ament prefix, as `colcon build` would lay it out, so
`ros2 launch refine_ros ...` and `ament_index_python` find it in a plain venv too."""

import os
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIX = Path(sys.prefix)


def test_package_xml_is_format_3_ament_python_with_the_runtime_dependencies():
    root = ElementTree.parse(ROOT / "package.xml").getroot()
    assert root.get("format") == "3" and root.findtext("name") == "refine_ros"
    assert root.find("export/build_type").text == "ament_python"
    deps = {e.text for e in root.findall("exec_depend")}
    assert {"rclpy", "launch", "launch_ros", "std_msgs", "std_srvs", "geometry_msgs", "sensor_msgs",
            "nav_msgs", "visualization_msgs", "diagnostic_msgs", "refine_ros_interfaces"} <= deps


NO_ROSDEP_KEY_ON_HUMBLE_OR_JAZZY = {
    # ros/rosdistro humble/ and jazzy/distribution.yaml have no `vesc` repository (f1tenth_system
    # builds f1tenth/vesc from source), and rosdep/base.yaml has no `bubblewrap` key
    "vesc_msgs", "vesc_driver", "vesc_ackermann", "ackermann_mux", "bubblewrap",
}


def _dependencies(environment: dict[str, str]) -> set[str]:
    """The package's dependency keys as rosdep sees them under `environment` (conditions
    evaluated, as rosdep and colcon evaluate them)."""
    from catkin_pkg.package import parse_package

    package = parse_package(str(ROOT / "package.xml"))
    package.evaluate_conditions(environment)
    groups = (package.build_depends, package.buildtool_depends, package.exec_depends, package.test_depends)
    return {d.name for group in groups for d in group if d.evaluated_condition is not False}


def test_rosdep_can_resolve_every_dependency_on_humble_and_jazzy():
    """`rosdep install --from-paths src` fails on the first key it cannot resolve, so one key
    without a Humble or Jazzy release (vesc_msgs) stopped even an arm owner's install."""
    for distro in ("humble", "jazzy"):
        deps = _dependencies({"ROS_VERSION": "2", "ROS_DISTRO": distro})
        assert not deps & NO_ROSDEP_KEY_ON_HUMBLE_OR_JAZZY, distro
        assert {"moveit_msgs", "control_msgs", "ackermann_msgs", "tf2_msgs"} <= deps
    # a car owner whose workspace builds vesc_msgs from source can make it a dependency
    assert "vesc_msgs" in _dependencies({"ROS_VERSION": "2", "REFINE_ROS_WITH_VESC": "1"})


def test_the_interface_package_is_an_ament_cmake_interface_package():
    """What colcon and rosdep read: built with ament_cmake, a member of the interface packages
    group (so `ros2 interface` and the type support find it), its generators and runtime named."""
    root = ElementTree.parse(ROOT / "refine_ros_interfaces" / "package.xml").getroot()
    assert root.get("format") == "3" and root.findtext("name") == "refine_ros_interfaces"
    assert root.find("export/build_type").text == "ament_cmake"
    assert root.findtext("member_of_group") == "rosidl_interface_packages"
    assert {e.text for e in root.findall("buildtool_depend")} == {"ament_cmake", "rosidl_default_generators"}
    assert "rosidl_default_runtime" in {e.text for e in root.findall("exec_depend")}


def test_install_lays_out_the_share_directory_and_the_package_marker():
    share = PREFIX / "share" / "refine_ros"
    assert (PREFIX / "share/ament_index/resource_index/packages/refine_ros").is_file()
    assert (share / "package.xml").is_file()
    for name in ("door_sim", "car_sim", "arm_real", "rc_car_real"):
        assert (share / "launch" / f"{name}.launch.py").is_file()
        assert (share / "config" / f"{name}.yaml").is_file()
    assert (share / "config" / "refine.rviz").is_file()
    assert (share / "launch" / "refine.launch.py").is_file(), "the one launch file (profile:=NAME)"
    assert (share / "urdf" / "door_scene.urdf").is_file() and (share / "urdf" / "rc_car.urdf").is_file()


def test_ament_index_finds_the_package(monkeypatch):
    ament = pytest.importorskip("ament_index_python.packages", reason="ament_index_python wheel missing")
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join([str(PREFIX), os.environ.get("AMENT_PREFIX_PATH", "")]))
    share = Path(ament.get_package_share_directory("refine_ros"))
    assert (share / "launch" / "door_sim.launch.py").is_file()


def test_colcon_puts_node_executables_where_ros2_launch_looks():
    text = (ROOT / "setup.cfg").read_text()
    assert "script_dir=$base/lib/refine_ros" in text and "install_scripts=$base/lib/refine_ros" in text


def test_every_node_executable_is_a_console_script_with_a_main():
    import importlib
    import importlib.metadata as md

    scripts = {e.name: e.value for e in md.entry_points(group="console_scripts")
               if e.value.startswith(("refine_ros.", "refine_core."))}
    for name in ("refine", "sim_node", "learner_node", "rollout_logger", "analysis_node", "safety_node",
                 "arm_bridge", "rc_car_bridge", "track_detector"):
        assert name in scripts, name
        module, func = scripts[name].split(":")
        assert callable(getattr(importlib.import_module(module), func))
