"""Shared test setup: headless rendering, an isolated DDS domain per run, temp run dirs."""

import os

# Headless MuJoCo; egl needs a GPU, osmesa does not.
os.environ.setdefault("MUJOCO_GL", "osmesa")
os.environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
# Keep DDS traffic on loopback and away from other test runs on the same machine.
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# The Fast DDS profile the launch files give every node (camera images fit in shared memory).
from refine_ros.bringup.dds import dds_environment  # noqa: E402

os.environ.update(dds_environment(os.environ))

import pytest  # noqa: E402


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "run"
    path.mkdir()
    return path


@pytest.fixture
def context():
    """An rclpy context of the test's own, shut down afterwards (rclpy imported only here, so
    tests without ROS never load it)."""
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    yield ctx
    rclpy.try_shutdown(context=ctx)


ROS_THREAD_ERRORS = "error::pytest.PytestUnhandledThreadExceptionWarning"
"""In the ROS tests an exception in a thread (an executor touching a node being destroyed:
`InvalidHandle: cannot use Destroyable because destruction was requested`) fails the test
instead of scrolling by as a warning; `refine_ros.bringup.spin.NodeSpinner` stops executors first."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name.startswith("test_ros_") or item.get_closest_marker("ros") is not None:
            item.add_marker(pytest.mark.filterwarnings(ROS_THREAD_ERRORS))
