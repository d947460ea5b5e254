"""A kernel syscall filter the bootstrap installs in the sandboxed process.

Why: inside bubblewrap the script runs as uid 0 of its user namespace, which is real root when
the parent is root, and the kernel does not enforce RLIMIT_NPROC for root. A seccomp filter
closes that gap independently of uids: no fork/vfork, no clone without CLONE_THREAD (threads
stay allowed, numpy and torch need them), no execve, no sockets except AF_UNIX, and no
namespace, ptrace, io_uring or BPF tricks. It is kernel-enforced, so a script that subverts the
Python-level guard still meets it. Loaded through ctypes before untrusted code runs (and
before the guard forbids ctypes); stdlib only, because it runs in the sandbox.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000

_CLONE_THREAD = 0x00010000
_AF_UNIX = 1

_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

# Per architecture: audit arch id, seccomp syscall number, and the syscall table entries used.
_ARCHES = {
    "x86_64": {
        "audit": 0xC000003E,
        "seccomp": 317,
        "x32_bit": 0x40000000,
        "clone": 56,
        "socket": 41,
        "clone3": 435,
        "deny": {
            "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
            "process_vm_readv": 310, "process_vm_writev": 311, "unshare": 272, "setns": 308,
            "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "bpf": 321,
            "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248,
            "request_key": 249, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "kexec_load": 246, "init_module": 175,
            "finit_module": 313, "personality": 135,
        },
    },
    "aarch64": {
        "audit": 0xC00000B7,
        "seccomp": 277,
        "x32_bit": None,
        "clone": 220,
        "socket": 198,
        "clone3": 435,
        "deny": {
            "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270,
            "process_vm_writev": 271, "unshare": 97, "setns": 268, "mount": 40,
            "umount2": 39, "pivot_root": 41, "chroot": 51, "bpf": 280,
            "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217,
            "request_key": 218, "io_uring_setup": 425, "io_uring_enter": 426,
            "io_uring_register": 427, "kexec_load": 104, "init_module": 105,
            "finit_module": 273, "personality": 92,
        },
    },
}


class SeccompUnavailable(RuntimeError):
    """The filter could not be installed (unknown architecture or kernel refusal)."""


def _assemble(arch: dict) -> bytes:
    """Build the filter as raw `struct sock_filter` records, resolving jumps to labels."""
    prog: list[tuple[int, object, object, int]] = []  # (code, jt, jf, k); jt/jf: label or 0

    def op(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k))

    op(_LD_W_ABS, 4)  # seccomp_data.arch
    op(_JEQ_K, arch["audit"], 0, "kill")
    op(_LD_W_ABS, 0)  # seccomp_data.nr
    if arch["x32_bit"] is not None:
        op(_JGE_K, arch["x32_bit"], "kill", 0)
    op(_JEQ_K, arch["clone"], "clone", 0)
    op(_JEQ_K, arch["socket"], "socket", 0)
    op(_JEQ_K, arch["clone3"], "enosys", 0)
    for number in arch["deny"].values():
        op(_JEQ_K, number, "eperm", 0)
    op(_RET_K, _RET_ALLOW)
    labels = {}
    labels["clone"] = len(prog)
    op(_LD_W_ABS, 16)  # low half of args[0]: clone flags
    op(_JSET_K, _CLONE_THREAD, "allow", "eperm")
    labels["socket"] = len(prog)
    op(_LD_W_ABS, 16)  # args[0]: address family
    op(_JEQ_K, _AF_UNIX, "allow", "eperm")
    labels["eperm"] = len(prog)
    op(_RET_K, _RET_ERRNO | errno.EPERM)
    labels["enosys"] = len(prog)  # glibc then falls back to clone(), which is checked above
    op(_RET_K, _RET_ERRNO | errno.ENOSYS)
    labels["kill"] = len(prog)
    op(_RET_K, _RET_KILL_PROCESS)
    labels["allow"] = len(prog)
    op(_RET_K, _RET_ALLOW)

    out = bytearray()
    for index, (code, jt, jf, k) in enumerate(prog):
        offsets = []
        for target in (jt, jf):
            if isinstance(target, str):
                delta = labels[target] - index - 1
                if not 0 <= delta <= 255:
                    raise SeccompUnavailable(f"jump to {target} out of range")
                offsets.append(delta)
            else:
                offsets.append(int(target))
        out += struct.pack("=HBBI", code, offsets[0], offsets[1], k)
    return bytes(out)


def filter_program(machine: str | None = None) -> bytes:
    """The filter for this machine's architecture, as bytes (one 8-byte record per op)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise SeccompUnavailable(f"no seccomp syscall table for architecture {machine!r}")
    return _assemble(_ARCHES[machine])


def install() -> None:
    """Install the filter on every thread of this process. Irreversible by design."""
    machine = platform.machine()
    program = filter_program(machine)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompUnavailable(f"prctl(NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(
        ctypes.c_long(_ARCHES[machine]["seccomp"]),
        ctypes.c_long(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if rc != 0:
        raise SeccompUnavailable(f"seccomp(SET_MODE_FILTER) failed: errno {ctypes.get_errno()}")
