"""The in-process audit hook: the sandbox's second layer.

Python's audit hooks are not a security boundary (code in the same interpreter can find ways
around them), so this layer exists to turn a forbidden operation into an immediate, clearly
labelled refusal instead of a confusing OS error, and to catch what the namespaces would let
through by design (e.g. reading the read-only project tree under /proc). Each refusal is
reported to the parent over a pipe before the PermissionError is raised, so a script that
swallows the exception is still recorded as refused. Stdlib only: it runs in the sandbox.
"""

from __future__ import annotations

import json
import os
import sys

# Events refused outright: process creation, signals to others, networking, native code.
_REFUSED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn",
                     "http.client.", "urllib.", "ftplib.", "smtplib.", "telnetlib.",
                     "imaplib.", "poplib.", "nntplib.", "webbrowser.", "winreg.")
_REFUSED_EVENTS = frozenset({
    "os.system", "os.fork", "os.forkpty", "os.startfile", "os.kill", "os.killpg",
    "signal.pthread_kill", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.dlsym/handle",
    "ctypes.call_function", "ctypes.cdata", "ctypes.cdata/buffer", "ctypes.string_at",
    "ctypes.wstring_at", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.remote_exec",
})
# Events whose path arguments must lie in the writable dir (arg positions to check).
_WRITE_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1),
    "os.symlink": (1,), "os.link": (1,), "os.chmod": (0,), "os.chown": (0,),
    "os.truncate": (0,), "os.utime": (0,), "os.chflags": (0,), "os.lchflags": (0,),
    "os.setxattr": (0,), "os.removexattr": (0,), "shutil.rmtree": (0,),
    "shutil.copyfile": (1,), "shutil.copymode": (1,), "shutil.copystat": (1,),
    "shutil.move": (0, 1), "shutil.chown": (0,), "shutil.make_archive": (0,),
    "shutil.unpack_archive": (1,),
}
_LIST_EVENTS = ("os.listdir", "os.scandir")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class SandboxRefusal(PermissionError):
    """An operation the sandbox does not allow was attempted."""


def _as_path(value: object) -> str | None:
    if isinstance(value, int) or value is None:
        return None
    try:
        path = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.realpath(path)


def _within(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def install(writable: tuple[str, ...], status_fd: int | None, read_only: tuple[str, ...] = ()) -> None:
    """Install the hook; `writable` are the only directories a script may write into, minus
    the `read_only` paths mounted inside them."""
    writable = tuple(os.path.realpath(p) for p in writable) + ("/dev/null",)
    read_only = tuple(os.path.realpath(p) for p in read_only)

    def may_write(path: str) -> bool:
        return _within(path, writable) and not _within(path, read_only)

    forbidden_reads = ("/proc", "/sys")
    self_pid = os.getpid()
    write_report = os.write
    dumps = json.dumps

    def refuse(event: str, detail: str) -> None:
        message = f"sandbox refused {event}: {detail}"
        if status_fd is not None:
            try:
                write_report(status_fd, (dumps({"refused": message}) + "\n").encode())
            except OSError:
                pass
        raise SandboxRefusal(message)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = _as_path(args[0])
            if path is None:
                return
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool(
                flags & _WRITE_FLAGS
            )
            if writing and not may_write(path):
                refuse(event, f"writing {path!r} (only {writable[0]} is writable)")
            if _within(path, forbidden_reads):
                refuse(event, f"reading {path!r} (process and kernel information is private)")
            return
        if event in _REFUSED_EVENTS or event.startswith(_REFUSED_PREFIXES):
            if event in ("os.kill", "os.killpg") and args and args[0] in (self_pid, 0):
                return
            refuse(event, f"{event} is not allowed in the sandbox {_short(args)}")
        if event in _LIST_EVENTS and args:
            path = _as_path(args[0])
            if path is not None and _within(path, forbidden_reads):
                refuse(event, f"listing {path!r} (process information is private)")
            return
        positions = _WRITE_EVENTS.get(event)
        if positions:
            for position in positions:
                if position < len(args):
                    path = _as_path(args[position])
                    if path is not None and not may_write(path):
                        refuse(event, f"changing {path!r} (only {writable[0]} is writable)")
            return
        if event == "object.__setattr__" and len(args) >= 2 and args[1] in (
            "__code__", "__closure__", "__globals__"
        ):
            refuse(event, f"rebinding {args[1]} of a function")

    sys.addaudithook(hook)


def _short(args: tuple) -> str:
    text = repr(args)
    return text if len(text) <= 200 else text[:200] + "..."
