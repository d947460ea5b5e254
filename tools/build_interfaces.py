"""Build the ROS 2 interface packages of this repository into the virtualenv.

Why this exists: the ROS 2 wheels from PyPI bring rclpy and the generators, but not a built
`refine_ros_interfaces`; `make install` calls this script so that the venv's Python imports
the generated messages with nothing sourced. Each package is configured with CMake and
installed into the venv's own prefix: its Python package lands in site-packages, its libraries
in `<venv>/lib` (which the wheels' start-up hook already puts on LD_LIBRARY_PATH, and which the
libraries also name as their RPATH), its ament index entries in `<venv>/share`.

- `refine_ros_interfaces` is always built.
- The copies of external interface packages under `test/interfaces/` (ackermann_msgs,
  control_msgs, ...) are built only where the real package is absent: a copy never shadows a
  package that a ROS install (or a wheel) already provides.
- A package is rebuilt only when one of its files changed (a content hash per package).

Run: `.venv/bin/python tools/build_interfaces.py` (see `--help`). In a colcon workspace with the
wheels, `--exports-only` does the one step colcon cannot (mending the wheels' export files).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OWN_PACKAGES = (REPO / "refine_ros_interfaces",)
TEST_COPIES = REPO / "test" / "interfaces"
STAMP_NAME = "refine-interface-build.stamp"
"""Written into a package's build folder; holds the hash of the sources it was built from."""
INDEX = Path("share") / "ament_index" / "resource_index" / "packages"
EXPORT_GLOB = "share/*/cmake/*_rosidl_generator_pyExport.cmake"
INCLUDE_LINE = re.compile(r'^(\s*INTERFACE_INCLUDE_DIRECTORIES\s+)"([^"]*)"', re.MULTILINE)


class BuildError(RuntimeError):
    """A package could not be built; the message says what to do about it."""


@dataclass(frozen=True)
class Package:
    name: str
    source: Path

    @classmethod
    def at(cls, source: Path) -> Package:
        xml = (source / "package.xml").read_text(encoding="utf-8")
        match = re.search(r"<name>\s*([^<\s]+)\s*</name>", xml)
        if match is None:
            raise BuildError(f"{source / 'package.xml'} has no <name>")
        return cls(match.group(1), source)

    def digest(self) -> str:
        """Hash of every file of the package (names and contents) and of this script."""
        h = hashlib.sha256()
        for path in sorted(p for p in self.source.rglob("*") if p.is_file()):
            h.update(str(path.relative_to(self.source)).encode())
            h.update(path.read_bytes())
        h.update(Path(__file__).read_bytes())
        return h.hexdigest()


# -- where a package already is ---------------------------------------------------------------------
def provided_by(name: str, prefixes: Iterable[Path]) -> Path | None:
    """The first prefix whose ament index lists package `name`."""
    for prefix in prefixes:
        if (prefix / INDEX / name).is_file():
            return prefix
    return None


def real_package_prefix(package: Package, prefix: Path, build_root: Path) -> Path | None:
    """Where a real (not our copy) `package` is installed: a prefix on AMENT_PREFIX_PATH, or
    the venv itself when something other than this script put it there (a wheel)."""
    others = [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    others = [p for p in others if p.resolve() != prefix.resolve()]
    found = provided_by(package.name, others)
    if found is not None:
        return found
    if provided_by(package.name, [prefix]) and not (build_root / package.name / STAMP_NAME).is_file():
        return prefix
    return None


def remove_copy(package: Package, build_root: Path) -> list[Path]:
    """Uninstall a test copy this script installed earlier (the files CMake's install manifest
    lists), once a real package of that name is found: our copy must not stand in front of it
    in the venv. Returns the files removed."""
    build = build_root / package.name
    manifest = build / "install_manifest.txt"
    if not (build / STAMP_NAME).is_file() or not manifest.is_file():
        return []
    removed = []
    for line in manifest.read_text(encoding="utf-8").splitlines():
        path = Path(line.strip())
        if line.strip() and (path.is_file() or path.is_symlink()):
            path.unlink()
            removed.append(path)
    (build / STAMP_NAME).unlink()
    return removed


# -- the wheels' generated-Python export files ------------------------------------------------------
def python_include_dirs() -> list[str]:
    """This interpreter's C headers and numpy's: what the generated Python extensions compile
    against."""
    import numpy

    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        raise BuildError(f"no Python.h in {include}: install the Python headers (Debian: python3-dev)")
    return [include, numpy.get_include()]


def fix_generator_exports(prefix: Path, include_dirs: Sequence[str]) -> list[Path]:
    """The wheels' `*_rosidl_generator_pyExport.cmake` name the include folders of the machine
    they were built on, and CMake refuses a target whose include folder does not exist; point
    them at this interpreter's. Returns the files changed (none the second time)."""
    wanted = ";".join(include_dirs)
    changed = []
    for path in sorted(prefix.glob(EXPORT_GLOB)):
        text = path.read_text(encoding="utf-8")
        fixed = INCLUDE_LINE.sub(lambda m: f'{m.group(1)}"{wanted}"', text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")
            changed.append(path)
    return changed


# -- building ------------------------------------------------------------------------------------------
def search_prefixes(prefix: Path) -> list[str]:
    """Where CMake and the generators look for dependencies: the install prefix, this
    interpreter's venv (the wheels), then AMENT_PREFIX_PATH (a sourced ROS install)."""
    found: list[str] = []
    for path in [prefix, Path(sys.prefix), *map(Path, os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep))]:
        if str(path) not in ("", ".") and str(path.resolve()) not in found:
            found.append(str(path.resolve()))
    return found


def cmake_command(package: Package, build: Path, prefix: Path) -> list[str]:
    prefix_path = search_prefixes(prefix)
    return [
        "cmake", "-S", str(package.source), "-B", str(build),
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        f"-DCMAKE_PREFIX_PATH={';'.join(prefix_path)}",
        f"-DPython3_EXECUTABLE={sys.executable}",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_TESTING=OFF",
        # libraries in <prefix>/lib find each other, and the Python extensions in
        # <prefix>/lib/pythonX.Y/site-packages/<package>/ find them, without LD_LIBRARY_PATH
        "-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../../..",
    ]


def build_env(prefix: Path) -> dict[str, str]:
    return {**os.environ, "AMENT_PREFIX_PATH": os.pathsep.join(search_prefixes(prefix))}


def run(cmd: Sequence[str], env: dict[str, str], log: Path) -> None:
    with log.open("a", encoding="utf-8") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        done = subprocess.run(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "".join(log.read_text(encoding="utf-8", errors="replace").splitlines(True)[-40:])
        raise BuildError(f"{' '.join(cmd[:3])} failed ({done.returncode}); last lines of {log}:\n{tail}")


def build_package(package: Package, prefix: Path, build_root: Path, jobs: int) -> bool:
    """Configure, build and install `package` into `prefix`; False when it was up to date."""
    build = build_root / package.name
    stamp = build / STAMP_NAME
    digest = package.digest()
    installed = provided_by(package.name, [prefix]) is not None
    if installed and stamp.is_file() and stamp.read_text().strip() == digest:
        return False
    build.mkdir(parents=True, exist_ok=True)
    stamp.unlink(missing_ok=True)
    log = build / "build.log"
    log.write_text("", encoding="utf-8")
    env = build_env(prefix)
    run(cmake_command(package, build, prefix), env, log)
    run(["cmake", "--build", str(build), "--parallel", str(jobs)], env, log)
    run(["cmake", "--install", str(build)], env, log)
    stamp.write_text(digest + "\n", encoding="utf-8")
    return True


def packages(with_test_copies: bool) -> list[Package]:
    found = [Package.at(p) for p in OWN_PACKAGES]
    if with_test_copies and TEST_COPIES.is_dir():
        found += [Package.at(p) for p in sorted(TEST_COPIES.iterdir()) if (p / "package.xml").is_file()]
    return found


def build_all(found: Sequence[Package], prefix: Path, build_root: Path, jobs: int,
              say: Callable[[str], None] = print) -> None:
    """Our packages always; a test copy unless a real package of its name is installed."""
    for package in found:
        real = None if package.source in OWN_PACKAGES else real_package_prefix(package, prefix, build_root)
        if real is not None:
            removed = remove_copy(package, build_root)
            note = f" (removed the copy installed earlier: {len(removed)} files)" if removed else ""
            say(f"{package.name}: provided by {real}; the test copy is not built{note}")
            continue
        start = time.monotonic()
        if build_package(package, prefix, build_root, jobs):
            say(f"{package.name}: built and installed into {prefix} in {time.monotonic() - start:.0f} s")
        else:
            say(f"{package.name}: up to date")


def check_tools() -> None:
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise BuildError(f"missing {', '.join(missing)}: install them (Debian: cmake g++)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", type=Path, default=Path(sys.prefix),
                        help="install prefix (default: this interpreter's venv)")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "interfaces",
                        help="where the CMake build folders live")
    parser.add_argument("--no-test-copies", action="store_true",
                        help="build only refine_ros_interfaces, not the copies under test/interfaces")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--exports-only", action="store_true",
                        help="only point the wheels' export files at this Python's headers (before a colcon "
                             "build of a workspace with the wheels); build nothing")
    args = parser.parse_args(argv)
    prefix, build_root = args.prefix.resolve(), args.build_dir.resolve()
    try:
        check_tools()
        fixed = fix_generator_exports(prefix, python_include_dirs())
        if fixed:
            print(f"pointed {len(fixed)} generator export files at this Python's headers")
        if args.exports_only:
            return 0
        build_all(packages(not args.no_test_copies), prefix, build_root, args.jobs)
    except BuildError as exc:
        print(f"build_interfaces: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
