"""Entry point of the sandboxed interpreter (runs inside the sandbox, stdlib only at first).

Order matters and is the point of this file: resource limits first (so even imports are
bounded), then the seccomp filter (kernel-level: no fork, exec or network sockets), then the
trusted preloads (numpy, pandas, torch need ctypes and /proc at import time, which the guard
would refuse), then the audit hook, and only then the untrusted script, compiled from its real
file so tracebacks carry line numbers. Usage: ``python -I -B bootstrap.py CONFIG.json``.
"""

import importlib
import importlib.util
import json
import os
import resource
import sys
import traceback

# Exit codes the parent maps to statuses (kept apart from ordinary script exit codes).
EXIT_SETUP_FAILED = 70
EXIT_SECCOMP_FAILED = 71

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load_sibling(name: str):
    """Import a sibling module by path so the package __init__ (parent-side code) stays out."""
    spec = importlib.util.spec_from_file_location(f"_refine_sandbox_{name}", os.path.join(_HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _report(fd, **record) -> None:
    if fd is None:
        return
    try:
        os.write(fd, (json.dumps(record) + "\n").encode())
    except OSError:
        pass


def _apply_rlimits(limits: dict) -> None:
    names = {
        "cpu": resource.RLIMIT_CPU,
        "as": resource.RLIMIT_AS,
        "fsize": resource.RLIMIT_FSIZE,
        "nofile": resource.RLIMIT_NOFILE,
        "nproc": resource.RLIMIT_NPROC,
        "core": resource.RLIMIT_CORE,
    }
    for key, value in limits.items():
        soft = hard = int(value)
        if key == "cpu":
            hard = soft + 1  # SIGXCPU at the soft limit, SIGKILL one second later
        resource.setrlimit(names[key], (soft, hard))


def _prelude(config: dict) -> dict:
    """Names the script sees besides builtins: paths, and for diagnostics the tables."""
    namespace = {
        "__name__": "__main__",
        "__file__": config["script"],
        "__builtins__": __builtins__,
        "INPUTS_DIR": config["inputs_dir"],
        "OUT_DIR": config["out_dir"],
    }
    tables = config.get("tables") or {}
    if config.get("mode") == "diagnostics":
        import numpy as np
        import pandas as pd
        import scipy

        namespace.update(np=np, pd=pd, scipy=scipy)
        for name, path in tables.items():
            namespace[name] = pd.read_csv(path) if path else None
    return namespace


def _die_with_parent() -> None:
    """Without bubblewrap (weak isolation) nothing else ends us if the parent dies."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list) -> int:
    sys.dont_write_bytecode = True
    _die_with_parent()
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    status_fd = config.get("status_fd")
    try:
        _apply_rlimits(config.get("rlimits", {}))
    except (OSError, ValueError) as exc:
        _report(status_fd, setup_error=f"setting resource limits failed: {exc}")
        return EXIT_SETUP_FAILED
    for entry in config.get("sys_path", []):
        if entry not in sys.path:
            sys.path.append(entry)
    seccomp_on = False
    if config.get("seccomp", True):
        try:
            _load_sibling("seccomp").install()
            seccomp_on = True
        except Exception as exc:  # noqa: BLE001 - any failure means no kernel filter
            _report(status_fd, seccomp_error=f"{type(exc).__name__}: {exc}")
            if config.get("seccomp_required", True):
                return EXIT_SECCOMP_FAILED
    try:
        for module in config.get("preload", []):
            importlib.import_module(module)
        namespace = _prelude(config)
        with open(config["script"], encoding="utf-8") as handle:
            source = handle.read()
    except Exception as exc:  # noqa: BLE001 - reported to the parent as a setup failure
        _report(status_fd, setup_error=f"sandbox setup failed: {type(exc).__name__}: {exc}")
        traceback.print_exc()
        return EXIT_SETUP_FAILED
    guard = _load_sibling("guard") if config.get("guard", True) else None
    _report(status_fd, ready=True, seccomp=seccomp_on, guard=guard is not None)
    if guard is not None:
        guard.install((config["writable"],), status_fd, read_only=tuple(config.get("read_only", ())))
    try:
        code = compile(source, config["script"], "exec", dont_inherit=True)
        exec(code, namespace)  # noqa: S102 - this is the sandbox's whole purpose
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001 - the traceback is the script's result
        tb = exc.__traceback__
        # Drop this frame so the traceback starts at the script's own lines.
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        return 1
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001 - a closed stdout is the script's business
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
