"""The bubblewrap command line: what the sandboxed interpreter can see.

The view is built from what Python needs and nothing else: the shared-library directory
(not /usr/bin, not /usr/lib/gcc, so no shell and no compiler), the interpreter's installation,
its site-packages and the refine_core package, all read-only; inputs read-only under /inputs;
the job files read-only under /job; one private writable dir as /tmp; a fresh /proc of the
sandbox's own PID namespace and a minimal read-only /dev. Every namespace bubblewrap offers is
unshared (user, network, PID, IPC, UTS, cgroup, mount) and all capabilities are dropped.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import refine_core

SANDBOX_TMP = "/tmp"
SANDBOX_JOB = "/job"
SANDBOX_INPUTS = "/inputs"
# Directories never bound whole even if they appear on sys.path: they hold far more than Python.
_TOO_BROAD = {"/", "/usr", "/usr/lib", "/usr/local", "/usr/bin", "/bin", "/root", "/home",
              "/tmp", "/etc", "/var", "/opt", "/work", "/srv", "/mnt"}


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    found = shutil.which("bwrap")
    if found:
        return found
    return "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None


def package_root() -> Path:
    """The directory holding the refine_core package (bound read-only; it is on sys.path)."""
    return Path(refine_core.__file__).resolve().parent.parent


def python_paths() -> list[str]:
    """Host directories the interpreter needs, outermost first, without nested duplicates."""
    candidates = {
        sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
        str(Path(os.path.realpath(sys.executable)).parent.parent),
        str(Path(refine_core.__file__).resolve().parent),
    }
    for entry in sys.path:
        if entry and os.path.isdir(entry) and (
            "site-packages" in entry or "dist-packages" in entry
            or entry.startswith((sys.base_prefix, sys.prefix))
        ):
            candidates.add(entry)
    resolved = set()
    for path in candidates:
        for form in (os.path.abspath(path), os.path.realpath(path)):
            if os.path.isdir(form) and form not in _TOO_BROAD:
                resolved.add(form.rstrip("/"))
    kept: list[str] = []
    for path in sorted(resolved, key=len):
        if not any(path.startswith(outer + "/") for outer in kept):
            kept.append(path)
    return kept


def python_files(dirs: list[str]) -> list[str]:
    """The interpreter binary itself when no bound directory holds it (a system Python in
    /usr/bin: binding the file keeps the rest of /usr/bin, shells included, out of view)."""
    files = []
    for form in (os.path.abspath(sys.executable), os.path.realpath(sys.executable)):
        if os.path.isfile(form) and not any(form.startswith(d + "/") for d in dirs):
            if form not in files:
                files.append(form)
    return files


def library_binds() -> list[str]:
    """Bind arguments for the C libraries the interpreter links against."""
    args: list[str] = []
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    lib_dirs = [f"/usr/lib/{multiarch}" if multiarch else "/usr/lib", "/usr/lib64"]
    for lib in lib_dirs:
        if os.path.isdir(lib) and not os.path.islink(lib):
            args += ["--ro-bind", lib, lib]
    for top in ("/lib", "/lib64"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            sub = f"{top}/{multiarch}" if top == "/lib" and multiarch else top
            if os.path.isdir(sub):
                args += ["--ro-bind", sub, sub]
    return args


def build_argv(
    bwrap: str,
    *,
    workdir: Path,
    jobdir: Path,
    inputs: dict[str, Path],
    command: list[str],
) -> list[str]:
    """The full bwrap argv; mounts are applied in order, so /tmp comes before nested binds."""
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--hostname", "sandbox",
        "--bind", str(workdir), SANDBOX_TMP,
    ]
    argv += library_binds()
    dirs = python_paths()
    for path in dirs + python_files(dirs):
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", str(jobdir), SANDBOX_JOB]
    if inputs:
        argv += ["--dir", SANDBOX_INPUTS]
    for name, path in inputs.items():
        argv += ["--ro-bind", str(path), f"{SANDBOX_INPUTS}/{name}"]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", SANDBOX_TMP,
        "--",
        *command,
    ]
    return argv


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str]:
    """Whether namespaces work here: run the interpreter once under the same mount view."""
    bwrap = bwrap_path()
    if bwrap is None:
        return False, "bubblewrap (bwrap) is not installed; on Debian/Ubuntu: apt-get install bubblewrap"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="refine-probe-") as tmp:
        work, job = Path(tmp, "work"), Path(tmp, "job")
        work.mkdir()
        job.mkdir()
        argv = build_argv(bwrap, workdir=work, jobdir=job, inputs={},
                          command=[sys.executable, "-I", "-S", "-c", "print('ok')"])
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, text=True,
                                  env={"PATH": "/nonexistent", "LANG": "C.UTF-8"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bwrap could not start: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        return False, (f"bwrap failed (exit {done.returncode}): {done.stderr.strip()[-500:]}; "
                       "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone "
                       "/ user.max_user_namespaces) or the container forbids them")
    return True, "namespaces"
