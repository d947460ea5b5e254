"""refine_core is the method in pure Python: importing all of it must not pull in ROS."""

import pkgutil
import subprocess
import sys

import refine_core

ROS_MODULES = ("rclpy", "std_msgs", "geometry_msgs", "sensor_msgs", "nav_msgs", "visualization_msgs",
               "diagnostic_msgs", "std_srvs", "refine_ros")


def test_importing_every_refine_core_module_loads_no_ros():
    modules = [m.name for m in pkgutil.walk_packages(refine_core.__path__, "refine_core.")
               if ".programs." not in m.name and ".edits." not in m.name]  # program texts, not code
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {ROS_MODULES!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", f"refine_core imported ROS modules: {out.stdout}"
    assert len(modules) > 40
