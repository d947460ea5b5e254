"""Run one untrusted Python script in the sandbox and collect a `SandboxResult`.

The parent owns every limit that the child could dodge: the wall clock (it kills the whole
process group, and bubblewrap's PID namespace takes every descendant with it), the output caps
(pipes are read incrementally and the child is killed once a cap is passed, so printing
gigabytes costs neither memory nor disk), and the size of the writable dir. The child gets an
environment built from an allow-list, never a copy of ours, so API keys cannot leak in.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from refine_core.sandbox import bwrap
from refine_core.sandbox.limits import CHECKPOINT, Limits, SandboxResult

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
REQUIRE_ENV = "REFINE_REQUIRE_SANDBOX"
_EXIT_SETUP_FAILED = 70
_EXIT_SECCOMP_FAILED = 71
_INPUT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|^OPENAI_|"
                          r"^AWS_|^AZURE_|^GOOGLE_|^HF_|^ANTHROPIC_|^ROS_|^RMW_|^FASTRTPS|^CYCLONEDDS")
_CHUNK = 65536
CHECKPOINT_WALL_FACTOR = 6.0
"""Wall-clock seconds per CPU second the first phase may take (`run_script(checkpoint_s=...)`):
its CPU budget alone would never end a script that sleeps or waits on a pipe."""
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class SandboxConfigError(ValueError):
    """The caller asked for something the sandbox will not do (bad input name, secret env var)."""


def require_sandbox() -> bool:
    """True when REFINE_REQUIRE_SANDBOX forbids weak isolation (CI sets it)."""
    return os.environ.get(REQUIRE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def sandbox_env(extra: dict | None, *, home: str) -> dict[str, str]:
    """The child's whole environment: fixed allow-listed values plus vetted caller extras."""
    env = {
        "PATH": "/nonexistent",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{home}/.matplotlib",
        "PYTHONHASHSEED": "0",
        "PYTHONUNBUFFERED": "0",
        # The venv's ROS-wheels .pth re-executes the interpreter unless this is set; the
        # sandbox needs no ROS libraries, and the re-exec would be refused anyway.
        "_ROS_WHEELS_BOOTSTRAP_COMPLETE": "1",
    }
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise SandboxConfigError(f"environment variable name {key!r} is not allowed")
        if _SECRET_NAME.search(key):
            raise SandboxConfigError(
                f"environment variable {key!r} looks like a credential; it never enters a sandbox"
            )
        if not isinstance(value, str) or "\0" in value:
            raise SandboxConfigError(f"environment variable {key!r} must be a plain string")
        env[key] = value
    return env


def with_timeout(limits: Limits, timeout_s: float | None) -> Limits:
    """`limits` with its wall-clock budget replaced, when a timeout is given."""
    if timeout_s is None:
        return limits
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise SandboxConfigError(f"timeout_s must be a positive number, got {timeout_s!r}")
    return dataclasses.replace(limits, wall_s=float(timeout_s))


def _rlimits(limits: Limits) -> dict[str, int]:
    return {
        "cpu": int(limits.cpu_s),
        "as": int(limits.memory_bytes),
        "fsize": int(limits.file_size_bytes),
        "nofile": int(limits.open_files),
        "nproc": int(limits.processes),
        "core": 0,
    }


def _check_inputs(inputs: dict | None) -> dict[str, Path]:
    checked: dict[str, Path] = {}
    for name, path in (inputs or {}).items():
        if not isinstance(name, str) or not _INPUT_NAME.match(name):
            raise SandboxConfigError(
                f"input name {name!r} must be a plain file name (letters, digits, . _ -)"
            )
        path = Path(path)
        if not path.exists():
            raise SandboxConfigError(f"input {name!r}: {path} does not exist")
        checked[name] = path.resolve()
    return checked


def _refused(message: str, isolation: str = "none") -> SandboxResult:
    return SandboxResult(status="refused", message=message, isolation=isolation)


def run_script(
    code: str,
    *,
    inputs: dict[str, Path] | None = None,
    limits: Limits = Limits(),  # noqa: B008 - frozen dataclass, safe as a default
    allow_weak_isolation: bool = False,
    env: dict | None = None,
    mode: str = "script",
    preload: tuple[str, ...] = (),
    tables: dict[str, str | None] | None = None,
    timeout_s: float | None = None,
    checkpoint_s: float | None = None,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    _guard: bool = True,
) -> SandboxResult:
    """Run `code` as a script in the sandbox and report what happened.

    Inputs appear read-only as ``/inputs/<name>`` (the script also gets ``INPUTS_DIR``);
    files written under ``OUT_DIR`` (``/tmp/out``) come back in `outputs`. `mode`, `preload`
    and `tables` are for the diagnostics and fit front-ends; `timeout_s` overrides
    `limits.wall_s`; `_guard=False` exists only so the tests can show the OS layer holds on
    its own.

    `checkpoint_s` splits the run in two phases: until the script prints the line
    `limits.CHECKPOINT` it has only `checkpoint_s` seconds of CPU time (its whole process
    tree's, from the start, setup included) and at most `CHECKPOINT_WALL_FACTOR` times as many
    seconds of wall clock; after it the whole `limits.wall_s`. So a script that spins early is
    killed early, not at the end of a long budget meant for the work after its checks, and the
    budget measures the script's work, not how busy the machine is: on a loaded machine the
    same checks take several times longer by the clock and the same CPU time. The wall bound
    is for a script that blocks without computing. The marker only moves a deadline the parent
    enforces, and never beyond `wall_s`.

    `on_line` hears every complete line the script prints, while it runs (a fit's epoch
    progress); `cancel`, once set, kills the sandbox within a quarter second and the status
    is "cancelled": a caller that no longer wants the answer (an action goal cancelled from
    the command line) does not wait for it.
    """
    limits = with_timeout(limits, timeout_s)
    if checkpoint_s is not None and (isinstance(checkpoint_s, bool) or not checkpoint_s > 0):
        raise SandboxConfigError(f"checkpoint_s must be a positive number, got {checkpoint_s!r}")
    if not isinstance(code, str):
        raise SandboxConfigError(f"code must be a string, got {type(code).__name__}")
    if mode not in ("script", "diagnostics"):
        raise SandboxConfigError(f"mode must be 'script' or 'diagnostics', got {mode!r}")
    if "\0" in code:
        return SandboxResult(status="error", message="the script contains a NUL byte")
    try:
        code.encode("utf-8")
    except UnicodeEncodeError as exc:
        return SandboxResult(status="error", message=f"the script is not valid text: {exc}")
    checked_inputs = _check_inputs(inputs)
    ok, why = bwrap.probe()
    if ok:
        isolation = "namespaces"
    elif require_sandbox():
        return _refused(f"namespace isolation is required ({REQUIRE_ENV}=1) but unavailable: {why}")
    elif not allow_weak_isolation:
        return _refused(
            f"namespace isolation is unavailable: {why}. Install bubblewrap, or opt in with "
            "allow_weak_isolation=True to run with rlimits, seccomp and the audit hook only "
            f"(never allowed when {REQUIRE_ENV}=1)."
        )
    else:
        isolation = "weak"

    root = Path(tempfile.mkdtemp(prefix="refine-sandbox-"))
    try:
        return _run(code, root, checked_inputs, limits, env, isolation, mode, preload,
                    tables or {}, _guard, checkpoint_s, on_line, cancel)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(code, root, inputs, limits, env, isolation, mode, preload, tables, guard, checkpoint_s=None,
         on_line=None, cancel=None):
    work, job = root / "work", root / "job"
    work.mkdir()
    job.mkdir()
    (work / "out").mkdir()
    if isolation == "namespaces":
        tmp_dir, job_dir, inputs_dir = bwrap.SANDBOX_TMP, bwrap.SANDBOX_JOB, bwrap.SANDBOX_INPUTS
    else:
        tmp_dir, job_dir, inputs_dir = str(work), str(job), str(job / "inputs")
        (job / "inputs").mkdir()
        for name, path in inputs.items():
            (job / "inputs" / name).symlink_to(path)
    (job / "script.py").write_text(code, encoding="utf-8")
    status_r, status_w = os.pipe()
    os.set_inheritable(status_w, True)
    config = {
        "mode": mode,
        "script": f"{job_dir}/script.py",
        "writable": tmp_dir,
        # Read-only binds that may sit *inside* the writable dir (a checkout under /tmp):
        # the guard refuses writes there too instead of leaving it to the mount.
        "read_only": bwrap.python_paths() if isolation == "namespaces" else [],
        "out_dir": f"{tmp_dir}/out",
        "inputs_dir": inputs_dir,
        "status_fd": status_w,
        "preload": list(preload),
        "tables": {k: (f"{inputs_dir}/{v}" if v else None) for k, v in tables.items()},
        "rlimits": _rlimits(limits),
        "seccomp": True,
        "seccomp_required": True,
        "guard": guard,
        "sys_path": [str(bwrap.package_root())],
    }
    (job / "config.json").write_text(json.dumps(config), encoding="utf-8")
    command = [sys.executable, "-I", "-B", str(BOOTSTRAP), f"{job_dir}/config.json"]
    if isolation == "namespaces":
        argv = bwrap.build_argv(bwrap.bwrap_path(), workdir=work, jobdir=job, inputs=inputs,
                                command=command)
        cwd = str(root)
    else:
        argv, cwd = command, str(work)
    child_env = sandbox_env(env, home=tmp_dir)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=child_env, cwd=cwd, start_new_session=True, pass_fds=(status_w,),
        )
    except OSError as exc:
        os.close(status_r)
        os.close(status_w)
        return _refused(f"could not start the sandbox: {exc}", isolation)
    os.close(status_w)
    try:
        watch = _watch(proc, status_r, limits, work, start, checkpoint_s, on_line, cancel)
    finally:
        _kill(proc)
        os.close(status_r)
    if not (watch.timed_out or watch.killed_for):
        # A script can fill its dir between two checks and exit; the caps still apply.
        watch.killed_for = _disk_over(work, limits)
    duration = time.monotonic() - start
    return _result(proc, watch, limits, work / "out", isolation, duration)


class _Watch:
    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stdout_truncated = False
        self.stderr_tail = bytearray()
        self.stderr_total = 0
        self.status = bytearray()
        self.timed_out = False
        self.killed_for: str | None = None
        self.checkpoint_s: float | None = None
        """The first phase's budget, while the script has not printed CHECKPOINT yet."""
        self.checkpoint_reached: bool | None = None
        self.checkpoint_cpu_s: float | None = None
        """CPU seconds the script's processes had used when the first phase ended (or was cut)."""
        self.cancelled = False
        self.partial_line = bytearray()


def _watch(proc, status_r, limits: Limits, work: Path, start: float, checkpoint_s: float | None = None,
           on_line: Callable[[str], None] | None = None, cancel: threading.Event | None = None) -> _Watch:
    """Pump the pipes until the child exits, enforcing the wall clock (the checkpoint's, until
    the script prints it) and the caps."""
    w = _Watch()
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
    sel.register(status_r, selectors.EVENT_READ, "status")
    deadline = start + limits.wall_s
    marker = CHECKPOINT.encode()
    if checkpoint_s is not None:
        w.checkpoint_s, w.checkpoint_reached = float(checkpoint_s), False
        deadline = start + min(float(checkpoint_s) * CHECKPOINT_WALL_FACTOR, limits.wall_s)
    next_disk_check = start + 0.5
    next_cpu_check = start
    open_streams = 3
    while open_streams:
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            w.cancelled = True
            return w
        if w.checkpoint_reached is False and now >= next_cpu_check:
            next_cpu_check = now + 0.1
            w.checkpoint_cpu_s = process_tree_cpu_s(proc.pid)
            if w.checkpoint_cpu_s >= w.checkpoint_s:
                w.timed_out = True
                return w
        if now >= deadline:
            w.timed_out = True
            return w
        if now >= next_disk_check:
            over = _disk_over(work, limits)
            if over:
                w.killed_for = over
                return w
            next_disk_check = now + 0.5
        for key, _ in sel.select(timeout=min(0.25, deadline - now)):
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            data = os.read(fd, _CHUNK)
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            if key.data == "stdout":
                room = limits.stdout_bytes - len(w.stdout)
                seen = len(w.stdout)
                w.stdout += data[:max(room, 0)]
                if w.checkpoint_reached is False and marker in w.stdout[max(0, seen - len(marker)):]:
                    w.checkpoint_reached = True
                    w.checkpoint_cpu_s = process_tree_cpu_s(proc.pid)
                    deadline = start + limits.wall_s
                if on_line is not None:
                    _tell_lines(w, data[:max(room, 0)], on_line)
                if len(data) > room:
                    w.stdout_truncated = True
                    w.killed_for = f"printed more than the {limits.stdout_bytes}-byte output cap"
                    return w
            elif key.data == "stderr":
                w.stderr_total += len(data)
                w.stderr_tail = (w.stderr_tail + data)[-limits.stderr_tail_bytes:]
                if w.stderr_total > limits.stderr_bytes:
                    w.killed_for = f"wrote more than {limits.stderr_bytes} bytes to stderr"
                    return w
            elif len(w.status) < 1_000_000:
                w.status += data
    sel.close()
    remaining = deadline - time.monotonic()
    try:
        proc.wait(timeout=max(remaining, 0.01))
    except subprocess.TimeoutExpired:
        w.timed_out = True
    return w


def process_tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used by process `pid` and every descendant, the reaped ones
    included, from /proc: what a sandboxed script has computed so far, whatever the load."""
    total_ticks = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total_ticks += sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
            for task in os.listdir(f"/proc/{current}/task"):
                pending += [int(c) for c in Path(f"/proc/{current}/task/{task}/children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue  # it ended between two reads
    return total_ticks / _CLOCK_TICKS


def _tell_lines(w: _Watch, data: bytes, on_line: Callable[[str], None]) -> None:
    """Hand the complete lines in `data` to `on_line`; the listener's own error never reaches
    the sandbox's bookkeeping."""
    w.partial_line += data
    *lines, rest = bytes(w.partial_line).split(b"\n")
    w.partial_line = bytearray(rest[-4096:])
    for line in lines:
        try:
            on_line(line.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a listener's bug must not kill a fit
            pass


def _disk_over(work: Path, limits: Limits) -> str | None:
    """Whether the writable dir passed its size or file-count cap (symlinks not followed)."""
    total = count = 0
    stack = [str(work)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    count += 1
                    if count > limits.output_files:
                        return f"created more than {limits.output_files} files"
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_blocks * 512
                        if total > limits.output_bytes:
                            return f"wrote more than {limits.output_bytes} bytes to its temp dir"
        except OSError:
            continue
    return None


def _kill(proc: subprocess.Popen) -> None:
    """Kill the sandbox's process group; the PID namespace takes every descendant along."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    # bubblewrap's exit does not mean the namespace's processes are gone yet (they die from
    # their parent-death signal). They hold the pipes' write ends, so EOF on both means the
    # last one has exited and nothing can still write into the temp dir we are about to remove.
    streams = [s for s in (proc.stdout, proc.stderr) if s is not None]
    deadline = time.monotonic() + 10
    while streams and time.monotonic() < deadline:
        ready, _, _ = select.select(streams, [], [], 0.2)
        for stream in ready:
            if not os.read(stream.fileno(), _CHUNK):
                streams.remove(stream)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _collect_outputs(out_dir: Path, limits: Limits) -> tuple[dict[str, bytes], list[str]]:
    """Regular files under the out dir, never following links (the parent runs as root)."""
    outputs: dict[str, bytes] = {}
    notes: list[str] = []
    budget = limits.output_bytes
    for dirpath, dirnames, filenames in os.walk(out_dir, followlinks=False):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, out_dir)
            try:
                fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                notes.append(f"output {rel!r} skipped (not a regular file)")
                continue
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    notes.append(f"output {rel!r} skipped (not a regular file)")
                    continue
                if info.st_size > budget:
                    notes.append(f"output {rel!r} skipped ({info.st_size} bytes exceeds the cap)")
                    continue
                with os.fdopen(os.dup(fd), "rb") as handle:
                    data = handle.read(budget + 1)
                budget -= len(data)
                outputs[rel] = data
            finally:
                os.close(fd)
    return outputs, notes


def _result(proc, w: _Watch, limits: Limits, out_dir: Path, isolation: str, duration: float):
    records = []
    for line in bytes(w.status).decode("utf-8", "replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    refusals = [r["refused"] for r in records if isinstance(r, dict) and "refused" in r]
    setup = [r.get("setup_error") or r.get("seccomp_error") for r in records
             if isinstance(r, dict) and ("setup_error" in r or "seccomp_error" in r)]
    rc = proc.returncode
    outputs, notes = _collect_outputs(out_dir, limits)
    message = ""
    if w.cancelled:
        status, message = "cancelled", "cancelled by the caller; killed"
    elif w.timed_out and w.checkpoint_reached is False and w.checkpoint_s is not None and w.checkpoint_s < limits.wall_s:
        status, message = "timeout", (f"did not reach its checkpoint within {w.checkpoint_s:g} s of CPU time "
                                      f"(it used {w.checkpoint_cpu_s or 0.0:.1f} s in {duration:.1f} s); killed")
    elif w.timed_out:
        status, message = "timeout", f"wall-clock limit of {limits.wall_s:g} s reached; killed"
    elif w.killed_for:
        status, message = "killed", f"killed: {w.killed_for}"
    elif refusals:
        status, message = "refused", refusals[0]
    elif rc in (_EXIT_SETUP_FAILED, _EXIT_SECCOMP_FAILED) and setup:
        status, message = "refused", f"sandbox setup failed: {setup[0]}"
    elif rc is not None and (rc < 0 or rc > 128):
        signum = -rc if rc < 0 else rc - 128
        name = _signal_name(signum)
        hint = {"SIGXCPU": "CPU-time limit", "SIGKILL": "CPU-time or memory limit",
                "SIGXFSZ": "file-size limit", "SIGSYS": "forbidden system call"}.get(name, "")
        status = "killed"
        message = f"killed by {name}" + (f" ({hint})" if hint else "")
    elif rc == 0:
        status = "ok"
    else:
        status, message = "error", f"exited with code {rc}"
    if notes:
        message = "; ".join([m for m in [message] if m] + notes)
    stdout = bytes(w.stdout).decode("utf-8", "replace")
    if w.checkpoint_reached:
        stdout = "\n".join(line for line in stdout.split("\n") if line != CHECKPOINT)
    return SandboxResult(
        status=status,
        stdout=stdout,
        stderr_tail=bytes(w.stderr_tail).decode("utf-8", "replace"),
        duration_s=round(duration, 4),
        isolation=isolation,
        returncode=rc,
        outputs=outputs,
        message=message,
        refusals=refusals,
        stdout_truncated=w.stdout_truncated,
        checkpoint_reached=w.checkpoint_reached,
        checkpoint_cpu_s=None if w.checkpoint_cpu_s is None else round(w.checkpoint_cpu_s, 2),
    )


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
