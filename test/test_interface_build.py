"""tools/build_interfaces.py: how `make install` builds the ROS interface packages into the
venv. The real build of this repository's packages is what test_ros_interfaces.py uses; here,
its rules: the wheels' export files are mended once, a test copy never shadows a real package,
a package is rebuilt only when one of its files changed, and make does nothing the second time.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "build_interfaces.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("build_interfaces", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


build = _load_script()

EXPORT = """set_target_properties(std_msgs::std_msgs__rosidl_generator_py PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "/opt/python/cp311-cp311/include/python3.11;/opt/python/numpy/_core/include"
  INTERFACE_LINK_LIBRARIES "std_msgs::std_msgs__rosidl_generator_c"
)
"""


def write_package(root: Path, name: str, fields: str = "float64 x\n") -> Path:
    source = root / name
    (source / "msg").mkdir(parents=True)
    (source / "msg" / "Probe.msg").write_text(fields)
    (source / "package.xml").write_text(
        f'<?xml version="1.0"?>\n<package format="3"><name>{name}</name><version>0.0.0</version>'
        "<description>probe</description><maintainer email='m@x.invalid'>m</maintainer><license>Apache-2.0</license>"
        "<buildtool_depend>ament_cmake</buildtool_depend><buildtool_depend>rosidl_default_generators</buildtool_depend>"
        "<exec_depend>rosidl_default_runtime</exec_depend><member_of_group>rosidl_interface_packages</member_of_group>"
        "<export><build_type>ament_cmake</build_type></export></package>\n")
    (source / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.16)\nproject({name})\nfind_package(ament_cmake REQUIRED)\n"
        "find_package(rosidl_default_generators REQUIRED)\n"
        'rosidl_generate_interfaces(${PROJECT_NAME} "msg/Probe.msg")\n'
        "ament_export_dependencies(rosidl_default_runtime)\nament_package()\n")
    return source


def index(prefix: Path, name: str) -> None:
    marker = prefix / build.INDEX / name
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("")


def test_export_files_are_pointed_at_this_pythons_headers_once(tmp_path):
    export = tmp_path / "share/std_msgs/cmake/export_std_msgs__rosidl_generator_pyExport.cmake"
    export.parent.mkdir(parents=True)
    export.write_text(EXPORT)
    headers = build.python_include_dirs()
    assert build.fix_generator_exports(tmp_path, headers) == [export]
    text = export.read_text()
    assert f'INTERFACE_INCLUDE_DIRECTORIES "{";".join(headers)}"' in text and "/opt/python" not in text
    assert 'INTERFACE_LINK_LIBRARIES "std_msgs::std_msgs__rosidl_generator_c"' in text  # the rest untouched
    assert build.fix_generator_exports(tmp_path, headers) == []


def test_the_venvs_own_export_files_name_existing_folders():
    """What `make install` left: every include folder the wheels' export files name exists
    (CMake refuses to configure otherwise)."""
    exports = sorted(Path(sys.prefix).glob(build.EXPORT_GLOB))
    assert exports, "no generated-Python export files in the venv (ros wheels missing?)"
    for path in exports:
        for match in build.INCLUDE_LINE.finditer(path.read_text()):
            assert all(Path(folder).is_dir() for folder in match.group(2).split(";")), path


def test_a_test_copy_is_skipped_where_a_real_package_is_installed(tmp_path, monkeypatch):
    venv, ros, build_root = tmp_path / "venv", tmp_path / "opt_ros", tmp_path / "build"
    copy = build.Package("ackermann_msgs", tmp_path / "src" / "ackermann_msgs")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros))
    assert build.real_package_prefix(copy, venv, build_root) is None
    index(ros, "ackermann_msgs")  # a sourced ROS install has it
    assert build.real_package_prefix(copy, venv, build_root) == ros


def test_our_own_copy_in_the_venv_is_not_taken_for_a_real_package(tmp_path, monkeypatch):
    venv, build_root = tmp_path / "venv", tmp_path / "build"
    copy = build.Package("control_msgs", tmp_path / "src" / "control_msgs")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(venv))
    index(venv, "control_msgs")
    assert build.real_package_prefix(copy, venv, build_root) == venv  # a wheel put it there
    (build_root / "control_msgs").mkdir(parents=True)
    (build_root / "control_msgs" / build.STAMP_NAME).write_text("digest\n")
    assert build.real_package_prefix(copy, venv, build_root) is None  # this script did


def test_the_digest_changes_with_any_file_of_the_package(tmp_path):
    package = build.Package.at(write_package(tmp_path, "probe_msgs"))
    first = package.digest()
    assert package.digest() == first
    (package.source / "msg" / "Probe.msg").write_text("float64 y\n")
    assert package.digest() != first


def test_no_copy_is_built_where_a_real_install_has_every_package(tmp_path, monkeypatch):
    ros, prefix, build_root = tmp_path / "opt_ros", tmp_path / "venv", tmp_path / "build"
    copies = [build.Package.at(p) for p in sorted(build.TEST_COPIES.iterdir()) if (p / "package.xml").is_file()]
    assert {c.name for c in copies} == {"ackermann_msgs", "control_msgs", "moveit_msgs", "tf2_msgs", "vesc_msgs"}
    for copy in copies:
        index(ros, copy.name)
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros))
    said: list[str] = []
    build.build_all(copies, prefix, build_root, jobs=1, say=said.append)
    assert said == [f"{c.name}: provided by {ros}; the test copy is not built" for c in copies]
    assert not prefix.exists() and not build_root.exists()


def test_a_copy_installed_earlier_is_removed_once_a_real_package_appears(tmp_path, monkeypatch):
    """Our copy must not stand in front of the real package in the venv: the files its install
    manifest lists go, and nothing else."""
    ros, prefix, build_root = tmp_path / "opt_ros", tmp_path / "venv", tmp_path / "build"
    copy = build.Package("tf2_msgs", build.TEST_COPIES / "tf2_msgs")
    ours = [prefix / build.INDEX / "tf2_msgs", prefix / "lib" / "libtf2_msgs__rosidl_generator_c.so",
            prefix / "lib" / "python3.11" / "site-packages" / "tf2_msgs" / "__init__.py"]
    other = prefix / "lib" / "libstd_msgs__rosidl_generator_c.so"
    for path in [*ours, other]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    (build_root / "tf2_msgs").mkdir(parents=True)
    (build_root / "tf2_msgs" / "install_manifest.txt").write_text("\n".join(map(str, ours)))
    (build_root / "tf2_msgs" / build.STAMP_NAME).write_text("digest\n")
    index(ros, "tf2_msgs")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(ros))
    said: list[str] = []
    build.build_all([copy], prefix, build_root, jobs=1, say=said.append)
    assert said == [f"tf2_msgs: provided by {ros}; the test copy is not built (removed the copy installed earlier: "
                    "3 files)"]
    assert not any(p.exists() for p in ours) and other.exists()
    assert not (build_root / "tf2_msgs" / build.STAMP_NAME).exists()


@pytest.mark.slow
def test_a_package_is_built_once_and_rebuilt_only_when_a_file_changed(tmp_path):
    """A one-message package into a scratch prefix: importable from there, "up to date" the
    second time, rebuilt after its message changed."""
    package = build.Package.at(write_package(tmp_path / "src", "refine_probe_msgs"))
    prefix, build_root = tmp_path / "prefix", tmp_path / "build"
    assert build.build_package(package, prefix, build_root, jobs=2) is True
    assert (prefix / build.INDEX / "refine_probe_msgs").is_file()
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    code = ("from rclpy.serialization import deserialize_message, serialize_message\n"
            "from refine_probe_msgs.msg import Probe\n"
            "assert deserialize_message(serialize_message(Probe(x=2.5)), Probe).x == 2.5\n"
            "print(sorted(Probe.get_fields_and_field_types()))")
    env = {**os.environ, "PYTHONPATH": str(site), "LD_LIBRARY_PATH": f"{prefix / 'lib'}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['x']", done.stderr

    assert build.build_package(package, prefix, build_root, jobs=2) is False
    (package.source / "msg" / "Probe.msg").write_text("float64 x\nstring label\n")
    assert build.build_package(package, prefix, build_root, jobs=2) is True
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['label', 'x']", done.stderr


def test_a_failed_build_says_where_its_log_is(tmp_path):
    package = build.Package.at(write_package(tmp_path / "src", "refine_broken_msgs", fields="no_such_type x\n"))
    with pytest.raises(build.BuildError, match="build.log"):
        build.build_package(package, tmp_path / "prefix", tmp_path / "build", jobs=1)
    assert not (tmp_path / "build" / "refine_broken_msgs" / build.STAMP_NAME).exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_install_has_nothing_to_do_after_make_install():
    """`make test` runs `make install` first: once it ran, nothing is rebuilt (exit 0 of
    `make -q` means every target is up to date)."""
    done = subprocess.run(["make", "-q", "-C", str(ROOT), "install"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, "make install would rebuild something: " + done.stdout + done.stderr
