"""Resource limits and the result record of one sandboxed execution.

Both are plain data so that the loop can store them in the run database as they are and so
that a caller can tighten one limit without knowing the others.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

STATUSES = ("ok", "error", "timeout", "killed", "refused", "cancelled")
CHECKPOINT = "@@refine-sandbox-checkpoint@@"
"""A line a script prints when its first phase is over (`run_script(checkpoint_s=...)`)."""
ISOLATIONS = ("namespaces", "weak", "none")

_MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """Ceilings for one sandboxed run; each one is enforced by the kernel or by the parent."""

    wall_s: float = 60.0
    """Wall-clock budget; past it the whole sandbox is killed and the status is "timeout"."""
    cpu_s: int = 120
    """RLIMIT_CPU in seconds (CPU time of the sandboxed process, all threads)."""
    memory_bytes: int = 4096 * _MIB
    """RLIMIT_AS: the address space. torch alone maps about 1.5 GiB, so do not go far lower
    for fits; 2 GiB is plenty for pandas diagnostics."""
    file_size_bytes: int = 256 * _MIB
    """RLIMIT_FSIZE: the largest file the script can write."""
    open_files: int = 256
    """RLIMIT_NOFILE."""
    processes: int = 256
    """RLIMIT_NPROC (threads count too; torch and OpenBLAS start a few)."""
    stdout_bytes: int = 1 * _MIB
    """Printed output kept; a script that prints more is killed with the output truncated."""
    stderr_tail_bytes: int = 16 * 1024
    """How much of the end of stderr is kept."""
    stderr_bytes: int = 16 * _MIB
    """Total stderr a script may produce before it is killed (it is read, not kept)."""
    output_bytes: int = 256 * _MIB
    """Total size of the writable temp dir (files written, including outputs); checked while
    the script runs, past it the sandbox is killed."""
    output_files: int = 2000
    """How many files the script may create in its temp dir."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive number, got {value!r}")


@dataclass
class SandboxResult:
    """What one execution produced. `status` is one of STATUSES:

    - ok: the script exited with code 0 and no guard fired;
    - error: it raised or exited non-zero (the traceback is in `stderr_tail`);
    - timeout: the wall-clock budget ran out;
    - killed: a limit ended it (signal, CPU time, output or disk cap, memory);
    - refused: the sandbox would not run it, or the in-process guard refused an operation
      (`message` says which);
    - cancelled: the caller cancelled it (`run_script(cancel=...)`) and it was killed.
    """

    status: str
    stdout: str = ""
    stderr_tail: str = ""
    duration_s: float = 0.0
    isolation: str = "none"
    returncode: int | None = None
    outputs: dict[str, bytes] = field(default_factory=dict)
    message: str = ""
    refusals: list[str] = field(default_factory=list)
    stdout_truncated: bool = False
    checkpoint_reached: bool | None = None
    """With a checkpoint deadline (`run_script(checkpoint_s=...)`): whether the script printed
    `CHECKPOINT` before it; None when no checkpoint was asked for."""
    checkpoint_cpu_s: float | None = None
    """With a checkpoint: the CPU seconds the script had used when it printed `CHECKPOINT`, or
    when the first phase was cut short."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        """JSON-ready record for the database: outputs are reduced to their sizes."""
        record = asdict(self)
        record["outputs"] = {name: len(data) for name, data in self.outputs.items()}
        return record
