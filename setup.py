"""Build script shared by colcon (ament_python) and pip.

colcon runs `setup.py develop/install` and needs the data files laid out as an ament prefix;
pip users get the same prefix inside their venv, so `ros2 launch` and `ament_index_python`
find the package either way.
"""

from glob import glob
from pathlib import Path
from runpy import run_path

from setuptools import find_namespace_packages, setup
from setuptools.dist import Distribution


class AmentDistribution(Distribution):
    """setuptools' editable build asks the distribution for `has_data()`, which only exists as
    `has_data_files()`, so `pip install -e .` silently skipped the ament prefix (launch/,
    config/, urdf/, package marker). Answering the question it asks fixes that."""

    def has_data(self) -> bool:
        return self.has_data_files()


PACKAGE = "refine_ros"
HERE = Path(__file__).resolve().parent
# One list of the non-ROS Python dependencies, for pip (`-r requirements.txt`) and setuptools alike.
REQUIREMENTS = [
    line.split("#", 1)[0].strip()
    for line in (HERE / "requirements.txt").read_text().splitlines()
    if line.split("#", 1)[0].strip()
]

# The node executables come from the one node registry, read by path: nothing is installed yet
NODE_SCRIPTS = run_path(str(HERE / PACKAGE / "nodes" / "registry.py"))["console_scripts"]()

setup(
    distclass=AmentDistribution,
    name=PACKAGE,
    version="0.1.0",
    description="Self-refining structured robot policies for ROS 2",
    license="Apache-2.0",
    python_requires=">=3.10",
    # namespace discovery: the tasks' programs/ folders hold program texts, read as data, and
    # setuptools warns (colcon shows it as stderr output) about .py folders it was not told of
    packages=find_namespace_packages(include=["refine_core", "refine_core.*", "refine_ros", "refine_ros.*"]),
    package_data={"refine_core": ["tasks/*/programs/*.py"]},
    include_package_data=True,
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("launch/*.launch.py")),
        ("share/" + PACKAGE + "/config", glob("config/*.yaml") + glob("config/*.rviz") + glob("config/*.xml")),
        ("share/" + PACKAGE + "/urdf", glob("urdf/*")),
    ],
    install_requires=REQUIREMENTS,
    extras_require={
        "dev": ["pytest>=7", "pytest-timeout>=2", "pytest-xdist>=3.5", "ruff>=0.4"],
        "ray": ["ray>=2.9"],
    },
    entry_points={
        "console_scripts": ["refine = refine_core.cli:main", *NODE_SCRIPTS],
        # refine_core never imports refine_ros: the ROS verbs and benchmarks are found here
        "refine.commands": [
            "up = refine_ros.commands.up",
            "export = refine_ros.commands.export",
            "demo = refine_ros.commands.demo",
        ],
        "refine.benchmarks": ["ros = refine_ros.bench:bench_ros", "twin = refine_ros.bench.twin:bench_twin"],
    },
    zip_safe=True,
)
