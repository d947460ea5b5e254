"""The sandbox against hostile scripts, with real processes, sockets, files and signals.

Each hostile case asserts the status the sandbox gives and, where there is one, the side effect
that must not have happened on the host (a connection accepted, a file written, a signal
received, a database changed, a secret printed). Cases marked `os_layer` run a second time
with the in-process audit hook switched off, to show that the namespaces and the seccomp
filter contain the script on their own. After each case a normal script runs, so the caller's
loop demonstrably carries on.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import sqlite3
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import refine_core
from refine_core.sandbox import (
    Limits,
    SandboxConfigError,
    run_diagnostics,
    run_script,
)
from refine_core.sandbox import bwrap as bwrap_mod
from refine_core.sandbox.runner import REQUIRE_ENV, require_sandbox

SECRET = "sk-test-do-not-leak-4f1c2a"
PROJECT_DIR = Path(refine_core.__file__).resolve().parent.parent
QUICK = Limits(wall_s=20.0, memory_bytes=1024**3)


def _namespaces_or_skip() -> None:
    ok, why = bwrap_mod.probe()
    if not ok:
        if require_sandbox():
            pytest.fail(f"{REQUIRE_ENV} is set but the sandbox is unavailable: {why}")
        pytest.skip(f"namespace sandbox unavailable here: {why}")


def no_namespaces_needed(test):
    """Mark a test that checks the behaviour when namespaces are missing."""
    test.no_namespaces_needed = True
    return test


@pytest.fixture(autouse=True)
def _sandbox_available(request):
    if not getattr(request.function, "no_namespaces_needed", False):
        _namespaces_or_skip()


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("REFINE_TEST_TOKEN", SECRET)
    monkeypatch.setenv("MY_SECRET", SECRET)


def carry_on() -> None:
    """A normal script right after a hostile one: the sandbox (and the loop) still works."""
    result = run_script("print(sum(range(10)))", limits=QUICK)
    assert result.status == "ok", result
    assert result.stdout.strip() == "45"


def run(code: str, guard: bool = True, **kwargs):
    kwargs.setdefault("limits", QUICK)
    return run_script(code, _guard=guard, **kwargs)


GUARD_MODES = [pytest.param(True, id="guarded"), pytest.param(False, id="os_layer")]


# --- networking ---------------------------------------------------------------------------

@pytest.mark.parametrize("guard", GUARD_MODES)
def test_socket_to_localhost_never_connects(guard):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
        result = run(code, guard)
        assert result.status == ("refused" if guard else "error"), result
        assert "connected" not in result.stdout
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    carry_on()


@pytest.mark.parametrize("guard", GUARD_MODES)
def test_socket_to_external_address_fails(guard):
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "s.settimeout(2)\n"
        "s.connect(('1.1.1.1', 80))\n"
        "print('connected')\n"
    )
    result = run(code, guard)
    assert result.status == ("refused" if guard else "error"), result
    assert "connected" not in result.stdout
    if guard:
        assert "socket" in result.message
    else:  # seccomp: only AF_UNIX sockets may be created
        assert "PermissionError" in result.stderr_tail
    carry_on()


def test_dns_lookup_refused():
    result = run("import socket\nprint(socket.gethostbyname('example.com'))")
    assert result.status == "refused"
    carry_on()


# --- processes ----------------------------------------------------------------------------

SPAWNERS = {
    "subprocess": "import subprocess, sys\nsubprocess.run([sys.executable, '-c', MARK])\n",
    "os_system": "import os\nos.system('echo escaped > /tmp/out/marker')\n",
    "os_fork": "import os\npid = os.fork()\nif pid == 0:\n    exec(MARK)\n    os._exit(0)\nos.waitpid(pid, 0)\n",
    "os_execv": "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', MARK])\n",
    "posix_spawn": "import os, sys\nos.posix_spawn(sys.executable, [sys.executable, '-c', MARK], {})\n",
}
MARK_PRELUDE = "MARK = \"open('/tmp/out/marker', 'w').write('escaped'); print('escaped')\"\n"


@pytest.mark.parametrize("guard", GUARD_MODES)
@pytest.mark.parametrize("how", sorted(SPAWNERS))
def test_spawning_a_process_is_stopped(how, guard):
    result = run(MARK_PRELUDE + SPAWNERS[how], guard)
    assert "marker" not in result.outputs
    assert "escaped" not in result.stdout
    if guard:
        assert result.status == "refused", result
        assert result.refusals
    elif how == "os_system":
        # glibc's system() reports a failed spawn as exit status 127; nothing ran.
        assert result.status == "ok", result
    else:
        assert result.status == "error", result
        assert "PermissionError" in result.stderr_tail
    carry_on()


@pytest.mark.parametrize("guard", GUARD_MODES)
def test_fork_bomb_is_contained(guard):
    result = run("import os\nwhile True:\n    os.fork()\n", guard, limits=Limits(wall_s=10))
    assert result.status == ("refused" if guard else "error"), result
    assert result.duration_s < 10
    carry_on()


def test_subclasses_walk_to_popen_is_refused():
    code = (
        "def walk(cls, seen):\n"
        "    for sub in type.__subclasses__(cls):\n"
        "        if sub not in seen:\n"
        "            seen.add(sub)\n"
        "            walk(sub, seen)\n"
        "    return seen\n"
        "popen = [c for c in walk(().__class__.__base__, set())\n"
        "         if c.__name__ == 'Popen' and c.__module__ == 'subprocess']\n"
        "print('found', len(popen))\n"
        "p = popen[0](['/bin/sh', '-c', 'echo escaped'])\n"
        "p.wait()\n"
    )
    # The diagnostics prologue loads pandas, which imports subprocess: Popen is reachable.
    result = run_diagnostics(code, pd.DataFrame({"a": [1]}), limits=QUICK)
    assert "found 1" in result.stdout
    assert result.status == "refused", result
    assert "subprocess.Popen" in result.message
    assert "escaped" not in result.stdout
    carry_on()


# --- secrets and other processes ----------------------------------------------------------

def test_api_keys_are_absent(secret_env):
    code = (
        "import os\n"
        "print(os.environ.get('OPENAI_API_KEY'))\n"
        "print(os.environ.get('REFINE_TEST_TOKEN'))\n"
        "print(sorted(os.environ))\n"
    )
    result = run(code)
    assert result.status == "ok", result
    lines = result.stdout.splitlines()
    assert lines[0] == "None" and lines[1] == "None"
    assert SECRET not in result.stdout
    assert not any("KEY" in name or "TOKEN" in name or "SECRET" in name for name in eval(lines[2]))  # noqa: S307 - our own repr
    carry_on()


def test_secret_names_cannot_be_passed_in():
    with pytest.raises(SandboxConfigError, match="credential"):
        run_script("print(1)", env={"OPENAI_API_KEY": "x"})
    with pytest.raises(SandboxConfigError):
        run_script("print(1)", env={"bad name": "x"})
    result = run_script("import os\nprint(os.environ['REFINE_MODE'])", env={"REFINE_MODE": "x"})
    assert result.status == "ok" and result.stdout.strip() == "x"


@pytest.mark.parametrize("guard", GUARD_MODES)
def test_host_proc_environ_is_unreachable(secret_env, guard):
    pid = os.getpid()
    code = (
        "import os\n"
        f"for path in ['/proc/{pid}/environ', '/proc/{os.getppid()}/environ', '/proc/1/environ']:\n"
        "    try:\n"
        "        print(path, open(path, 'rb').read())\n"
        "    except OSError as exc:\n"
        "        print(path, type(exc).__name__)\n"
        "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
    )
    result = run(code, guard)
    assert SECRET not in result.stdout
    if guard:
        assert result.status == "refused", result
        assert "/proc" in result.message
    else:
        # A fresh PID namespace: the host pids do not exist, and pid 1 is the sandbox's own
        # init, whose environment is the allow-listed one.
        assert result.status == "ok", result
        assert f"/proc/{pid}/environ FileNotFoundError" in result.stdout
        pids = [int(p) for p in eval(result.stdout.splitlines()[-1])]  # noqa: S307
        assert max(pids) < 10
    carry_on()


@pytest.mark.parametrize("guard", GUARD_MODES)
def test_cannot_signal_the_parent(guard):
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda *_: received.append(1))
    try:
        code = (
            "import os, signal\n"
            f"os.kill({os.getpid()}, signal.SIGUSR1)\n"
            f"os.kill({os.getpid()}, signal.SIGKILL)\n"
            "print('sent')\n"
        )
        result = run(code, guard)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == []
    assert result.status == ("refused" if guard else "error"), result
    if not guard:
        assert "ProcessLookupError" in result.stderr_tail
    carry_on()


# --- files --------------------------------------------------------------------------------

@pytest.mark.parametrize("guard", GUARD_MODES)
@pytest.mark.parametrize("target", ["project", "etc", "root", "inputs", "dev_shm", "root_fs"])
def test_writes_outside_the_temp_dir_fail(tmp_path, target, guard):
    victim = tmp_path / "victim.txt"
    victim.write_text("original")
    paths = {
        "project": PROJECT_DIR / "refine_core" / "sandbox_escape.txt",
        "etc": Path("/etc/sandbox_escape.txt"),
        "root": Path("/root/sandbox_escape.txt"),
        "inputs": Path("/inputs/victim.txt"),
        "dev_shm": Path("/dev/shm/sandbox_escape.txt"),
        "root_fs": Path("/sandbox_escape.txt"),
    }
    path = paths[target]
    result = run(f"open({str(path)!r}, 'w').write('escaped')\n", guard,
                 inputs={"victim.txt": victim})
    assert result.status == ("refused" if guard else "error"), result
    if target == "inputs":
        assert victim.read_text() == "original"
    else:
        assert not path.exists()
    carry_on()


def test_writes_inside_the_temp_dir_come_back():
    code = (
        "import os\n"
        "os.makedirs(OUT_DIR + '/sub', exist_ok=True)\n"
        "open(OUT_DIR + '/sub/a.bin', 'wb').write(bytes(range(5)))\n"
        "open('/tmp/scratch.txt', 'w').write('not collected')\n"
        "os.symlink('/etc/passwd', OUT_DIR + '/link')\n"
    )
    result = run(code)
    assert result.status == "ok", result
    assert result.outputs == {"sub/a.bin": bytes(range(5))}
    assert "link" in result.message  # the symlink was skipped, never followed by the parent


@pytest.mark.parametrize("guard", GUARD_MODES)
def test_run_database_cannot_be_tampered_with(tmp_path, guard):
    db_path = tmp_path / "run.db"
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO runs (name) VALUES ('round0')")
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    code = (
        "import sqlite3\n"
        "db = sqlite3.connect('/inputs/run.db')\n"
        "print(db.execute('SELECT count(*) FROM runs').fetchone()[0])\n"
        "try:\n"
        "    db.execute('DELETE FROM runs')\n"
        "    db.commit()\n"
        "except sqlite3.OperationalError as exc:\n"
        "    print('sqlite:', exc)\n"
        "open('/inputs/run.db', 'r+b').write(b'garbage')\n"
    )
    result = run(code, guard, inputs={"run.db": db_path})
    assert result.stdout.splitlines()[0] == "1"
    assert "readonly database" in result.stdout
    assert result.status == ("refused" if guard else "error"), result
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before
    carry_on()


# --- resources ----------------------------------------------------------------------------

def test_infinite_loop_times_out():
    result = run("while True:\n    pass\n", limits=Limits(wall_s=2.0))
    assert result.status == "timeout", result
    assert 2.0 <= result.duration_s < 8.0
    carry_on()
    table = pd.DataFrame({"a": [1]})
    diag = run_diagnostics("while True:\n    pass\n", table, timeout_s=1.5)
    assert diag.status == "timeout" and 1.5 <= diag.duration_s < 8.0
    with pytest.raises(SandboxConfigError):
        run_diagnostics("print(1)", table, timeout_s=-1)


def test_a_first_phase_is_budgeted_in_cpu_time_and_bounded_by_the_clock():
    """Until a script prints the checkpoint it has `checkpoint_s` of CPU time (a loaded machine
    slows its clock, not its work), and a script that sleeps instead is still cut, by the wall
    bound; after the checkpoint the whole limit applies."""
    from refine_core.sandbox.limits import CHECKPOINT
    from refine_core.sandbox.runner import CHECKPOINT_WALL_FACTOR

    limits = Limits(wall_s=60.0, memory_bytes=1024**3)
    spin = run("while True:\n    pass\n", limits=limits, checkpoint_s=1.0)
    assert spin.status == "timeout" and spin.checkpoint_reached is False, spin
    assert 1.0 <= spin.checkpoint_cpu_s < 1.5 and "of CPU time" in spin.message, spin
    sleep = run("import time\ntime.sleep(60)\n", limits=limits, checkpoint_s=0.5)
    assert sleep.status == "timeout" and sleep.checkpoint_cpu_s < 0.5, sleep
    assert 0.5 * CHECKPOINT_WALL_FACTOR <= sleep.duration_s < limits.wall_s, sleep
    spin_after = (f"print({CHECKPOINT!r}, flush=True)\nimport time\nstart = time.process_time()\n"
                  "while time.process_time() - start < 1.5:\n    pass\nprint('done')\n")
    passed = run(spin_after, limits=limits, checkpoint_s=1.0)
    assert passed.status == "ok" and passed.checkpoint_reached and passed.stdout.strip() == "done", passed
    assert passed.checkpoint_cpu_s < 1.0


def test_cpu_time_limit_kills_busy_threads():
    code = (
        "import threading\n"
        "def spin():\n"
        "    while True:\n"
        "        pass\n"
        "for _ in range(2):\n"
        "    threading.Thread(target=spin, daemon=True).start()\n"
        "spin()\n"
    )
    result = run(code, limits=Limits(wall_s=30.0, cpu_s=1))
    assert result.status == "killed", result
    assert "SIGXCPU" in result.message or "SIGKILL" in result.message
    carry_on()


@pytest.mark.parametrize("code", [
    "x = bytearray(64 * 1024**3)\n",
    "chunks = []\nwhile True:\n    chunks.append(bytearray(64 * 1024**2))\n",
])
def test_memory_bomb_is_stopped(code):
    result = run(code, limits=Limits(wall_s=30.0, memory_bytes=1024**3))
    assert result.status in ("error", "killed"), result
    if result.status == "error":
        assert "MemoryError" in result.stderr_tail
    carry_on()


def test_printing_gigabytes_is_capped():
    code = "import sys\nblock = 'x' * (1 << 20)\nwhile True:\n    sys.stdout.write(block)\n"
    result = run(code, limits=Limits(wall_s=30.0, stdout_bytes=256 * 1024))
    assert result.status == "killed", result
    assert result.stdout_truncated
    assert len(result.stdout) == 256 * 1024
    assert result.duration_s < 10
    carry_on()


def test_stderr_flood_is_capped():
    code = "import sys\nblock = 'e' * (1 << 20)\nwhile True:\n    sys.stderr.write(block)\n"
    result = run(code, limits=Limits(wall_s=30.0, stderr_bytes=4 * 1024**2,
                                     stderr_tail_bytes=1000))
    assert result.status == "killed", result
    assert len(result.stderr_tail) == 1000
    carry_on()


def test_filling_the_disk_is_stopped():
    code = "for i in range(100000):\n    open(f'/tmp/f{i}', 'w').write('x' * 100)\n"
    result = run(code, limits=Limits(wall_s=30.0, output_files=200))
    assert result.status == "killed", result
    assert "files" in result.message
    big = run("open('/tmp/big', 'wb').write(b'x' * (8 * 1024**2))\n",
              limits=Limits(wall_s=30.0, file_size_bytes=1024**2))
    assert big.status == "error", big  # RLIMIT_FSIZE: the write fails with EFBIG
    assert "File too large" in big.stderr_tail
    carry_on()


def test_ctypes_library_loading_is_refused():
    result = run("import ctypes\nlibc = ctypes.CDLL('libc.so.6')\nprint(libc.getpid())\n")
    assert result.status == "refused", result
    assert "ctypes.dlopen" in result.message
    carry_on()


# --- ordinary scripts ---------------------------------------------------------------------

def test_diagnostics_over_a_dataframe_prints_its_numbers():
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"latent_speed_error": rng.normal(size=500),
                          "act_steer": rng.uniform(-1, 1, size=500),
                          "episode": np.repeat([0, 1], 250)})
    demo = table.iloc[:100].copy()
    code = (
        "import scipy.stats as stats\n"
        "print(f\"{df['latent_speed_error'].mean():.12f}\")\n"
        "print(f\"{(df['act_steer'].abs() > 0.95).mean():.12f}\")\n"
        "print(len(demo), df['episode'].nunique())\n"
        "print(f\"{stats.pearsonr(df['latent_speed_error'], df['act_steer'])[0]:.12f}\")\n"
    )
    result = run_diagnostics(code, table, demo, limits=QUICK)
    assert result.status == "ok", result
    assert result.isolation == "namespaces"
    lines = result.stdout.splitlines()
    assert float(lines[0]) == pytest.approx(table["latent_speed_error"].mean(), abs=1e-11)
    assert float(lines[1]) == pytest.approx((table["act_steer"].abs() > 0.95).mean(), abs=1e-11)
    assert lines[2] == "100 2"
    corr = np.corrcoef(table["latent_speed_error"], table["act_steer"])[0, 1]
    assert float(lines[3]) == pytest.approx(corr, abs=1e-9)


def test_diagnostics_without_demo_table():
    result = run_diagnostics("print(demo is None, df.shape)", pd.DataFrame({"a": [1, 2]}))
    assert result.status == "ok", result
    assert result.stdout.strip() == "True (2, 1)"


def test_diagnostics_rejects_non_tables():
    with pytest.raises(SandboxConfigError):
        run_diagnostics("print(1)", {"a": [1]})  # type: ignore[arg-type]


def test_syntax_error_reports_its_line():
    result = run_diagnostics("x = 1\ny = 2\nz = (3,\n", pd.DataFrame({"a": [1]}), limits=QUICK)
    assert result.status == "error", result
    assert 'File "/job/script.py", line 3' in result.stderr_tail
    assert "SyntaxError" in result.stderr_tail


def test_runtime_error_traceback_points_at_the_script():
    result = run("a = 1\nb = 0\nprint(a / b)\n")
    assert result.status == "error", result
    assert 'File "/job/script.py", line 3' in result.stderr_tail
    assert "bootstrap.py" not in result.stderr_tail
    assert "ZeroDivisionError" in result.stderr_tail


def test_exit_code_is_reported():
    result = run("import sys\nprint('partial')\nsys.exit(3)\n")
    assert result.status == "error" and result.returncode == 3
    assert result.stdout.strip() == "partial"


def test_odd_scripts_are_results_not_crashes():
    assert run_script("print(1)\0").status == "error"
    assert run_script("print('\udcff')").status == "error"
    with pytest.raises(SandboxConfigError):
        run_script(b"print(1)")  # type: ignore[arg-type]


def test_bad_input_names_are_typed_errors(tmp_path):
    with pytest.raises(SandboxConfigError):
        run_script("print(1)", inputs={"../escape": tmp_path})
    with pytest.raises(SandboxConfigError):
        run_script("print(1)", inputs={"missing.csv": tmp_path / "nope.csv"})


# --- when namespaces are unavailable --------------------------------------------------------

@pytest.fixture
def no_bwrap(monkeypatch):
    """Make the sandbox look for bubblewrap at a path that does not exist."""
    monkeypatch.setattr(bwrap_mod, "bwrap_path", lambda: None)
    bwrap_mod.probe.cache_clear()
    yield
    bwrap_mod.probe.cache_clear()


@no_namespaces_needed
def test_without_namespaces_it_refuses_unless_allowed(no_bwrap, monkeypatch):
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    refused = run_script("print(1)")
    assert refused.status == "refused"
    assert "allow_weak_isolation" in refused.message and "bubblewrap" in refused.message
    weak = run_script("print(1)", allow_weak_isolation=True)
    assert weak.status == "ok" and weak.isolation == "weak", weak
    # Even weak, the kernel filter and the guard still apply.
    forked = run_script("import os\nos.fork()", allow_weak_isolation=True, _guard=False)
    assert forked.status == "error" and "PermissionError" in forked.stderr_tail
    written = run_script(f"open({str(PROJECT_DIR / 'weak_escape.txt')!r}, 'w')",
                         allow_weak_isolation=True)
    assert written.status == "refused"
    assert not (PROJECT_DIR / "weak_escape.txt").exists()


@no_namespaces_needed
def test_require_sandbox_forbids_weak_isolation(no_bwrap, monkeypatch):
    monkeypatch.setenv(REQUIRE_ENV, "1")
    result = run_script("print(1)", allow_weak_isolation=True)
    assert result.status == "refused"
    assert REQUIRE_ENV in result.message


def test_concurrent_runs_do_not_interfere():
    results = {}

    def work(i):
        results[i] = run_script(f"open(OUT_DIR + '/n', 'w').write('{i}')\nprint({i})",
                                limits=QUICK)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for i in range(3):
        assert results[i].status == "ok"
        assert results[i].stdout.strip() == str(i)
        assert results[i].outputs == {"n": str(i).encode()}


def test_interpreter_is_the_callers():
    result = run("import sys\nprint(sys.version)\n")
    assert result.status == "ok"
    assert result.stdout.strip() == sys.version


def test_no_shell_compiler_or_network_interfaces_inside():
    code = (
        "import os\n"
        "for path in ['/bin/sh', '/usr/bin/gcc', '/usr/bin/cc', '/usr/bin/as', '/usr/lib/gcc',\n"
        "             '/usr/bin', '/etc/passwd', '/root/.bash_history', '/home', '/run']:\n"
        "    print(path, os.path.exists(path))\n"
        "rows = open('/proc/net/dev').read().splitlines()[2:]\n"
        "print('ifaces', sorted(row.split(':')[0].strip() for row in rows))\n"
    )
    result = run(code, guard=False)
    assert result.status == "ok", result
    lines = result.stdout.splitlines()
    assert all(line.endswith("False") for line in lines[:-1]), lines
    assert lines[-1] == "ifaces ['lo']"  # a fresh network namespace: no route to DDS peers


@no_namespaces_needed
def test_scipy_submodules_named_in_the_code_are_preloaded():
    from refine_core.sandbox.diagnostics import PRELOAD, preload_for

    assert preload_for("print(df.mean())") == PRELOAD
    code = "import scipy.stats as st\nfrom scipy import signal as s, optimize\nscipy.nonexistent\n"
    assert preload_for(code) == PRELOAD + ("scipy.optimize", "scipy.signal", "scipy.stats")


@no_namespaces_needed
def test_seccomp_filter_assembles_for_known_architectures():
    from refine_core.sandbox import seccomp

    for machine in ("x86_64", "aarch64"):
        program = seccomp.filter_program(machine)
        assert len(program) % 8 == 0 and 10 < len(program) // 8 < 256
    with pytest.raises(seccomp.SeccompUnavailable):
        seccomp.filter_program("pdp11")


def test_thread_bomb_is_bounded_by_the_address_space_or_the_wall_clock():
    """Mostly the address space ends it (the next thread's stack cannot be mapped: an error in
    0.2 s). About one run in ten here (6 of 50 in a loop, once in a fresh clone's `make test`,
    ciT), the 22nd thread fails inside its own start-up (`Thread._bootstrap_inner`, then a
    KeyError in `_delete`), before it tells the starting thread it runs, and CPython's
    `Thread.start()` waits for that forever: then the wall clock ends the program."""
    code = (
        "import threading, time\n"
        "threads = []\n"
        "while True:\n"
        "    t = threading.Thread(target=time.sleep, args=(60,), daemon=True)\n"
        "    t.start()\n"
        "    threads.append(t)\n"
    )
    result = run(code, limits=Limits(wall_s=10.0, memory_bytes=1024**3))
    assert result.status in ("error", "killed", "timeout"), result
    if result.status == "timeout":
        assert "_bootstrap" in result.stderr_tail and result.duration_s < 10.0 + 5.0, result
    else:
        assert result.duration_s < 10.0, result
    carry_on()
