"""Run ``forge`` and SIGKILL it at the N-th file operation that changes ``.forge/``.

Usage: ``python crashpoint.py FORGE-ARGS...`` with ``CRASHPOINT_AT=N`` in the
environment (``0``: never crash, only count). Each operation on a path under a
``.forge`` folder that can change what is on disk is a *crash point*:

- after an ``os.open`` or ``open`` for writing (the file exists, maybe empty)
- halfway through an ``os.write`` (half the bytes written: a torn write)
- after an ``os.write``, after an ``os.fsync``
- before and after an ``os.replace``, before an ``os.rename`` / ``os.unlink``

At point N the process kills itself with SIGKILL, exactly like ``kill -9``
would at that instant, after appending ``N kind path`` to ``$CRASHPOINT_LOG``
(when set). Enumerating N = 1, 2, ... covers every instant between two state
operations deterministically, which random kills reach only by luck. Writes
made through a buffered file object are not intercepted one by one; the open
before them and the fsync after them are.
"""

from __future__ import annotations

import builtins
import io
import os
import signal
import sys
import threading
from typing import Any

_AT = int(os.environ.get("CRASHPOINT_AT", "0"))
_LOG = os.environ.get("CRASHPOINT_LOG")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_lock = threading.Lock()
_count = [0]

_real_io_open = io.open
_real_os_open = os.open
_real_write = os.write
_real_fsync = os.fsync
_real_replace = os.replace
_real_rename = os.rename
_real_unlink = os.unlink


def _watched(path: Any) -> bool:
    try:
        text = os.fsdecode(path)
    except TypeError:
        return False
    return "/.forge/" in os.path.abspath(text) + "/"


def _fd_watched(fd: int) -> bool:
    try:
        return _watched(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return False


def _point(kind: str, path: Any) -> None:
    """Count one crash point; die here when it is the chosen one."""
    with _lock:
        _count[0] += 1
        number = _count[0]
    if number != _AT and _AT:
        return
    if _LOG:
        fd = _real_os_open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _real_write(fd, f"{number} {kind} {os.fsdecode(path)}\n".encode())
        os.close(fd)
    if number == _AT:
        os.kill(os.getpid(), signal.SIGKILL)


def _os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
    fd = _real_os_open(path, flags, mode, dir_fd=dir_fd)
    if flags & _WRITE_FLAGS and _watched(path):
        _point("os.open", path)
    return fd


def _io_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
    handle = _real_io_open(file, mode, *args, **kwargs)
    writing = any(flag in mode for flag in "wax+")
    if writing and (_fd_watched(file) if isinstance(file, int) else _watched(file)):
        _point("open", file if not isinstance(file, int) else f"fd {file}")
    return handle


def _write(fd: int, data: Any) -> int:
    if not _fd_watched(fd):
        return _real_write(fd, data)
    view = memoryview(data)
    half = len(view) // 2
    if half:
        # The torn write: half the bytes reach the file, then the process dies.
        with _lock:
            torn = _count[0] + 1 == _AT
        if torn:
            _real_write(fd, view[:half])
        _point("os.write-half", f"fd {fd}")
    written = _real_write(fd, data)
    _point("os.write", f"fd {fd}")
    return written


def _fsync(fd: Any) -> None:
    _real_fsync(fd)
    if isinstance(fd, int) and _fd_watched(fd):
        _point("os.fsync", f"fd {fd}")


def _replace(src: Any, dst: Any, **kwargs: Any) -> None:
    watched = _watched(dst)
    if watched:
        _point("os.replace-before", dst)
    _real_replace(src, dst, **kwargs)
    if watched:
        _point("os.replace-after", dst)


def _rename(src: Any, dst: Any, **kwargs: Any) -> None:
    if _watched(dst):
        _point("os.rename-before", dst)
    _real_rename(src, dst, **kwargs)


def _unlink(path: Any, **kwargs: Any) -> None:
    if _watched(path):
        _point("os.unlink-before", path)
    _real_unlink(path, **kwargs)


def main() -> None:
    io.open = _io_open
    builtins.open = _io_open
    os.open = _os_open
    os.write = _write
    os.fsync = _fsync
    os.replace = _replace
    os.rename = _rename
    os.unlink = _unlink
    sys.argv = ["forge", *sys.argv[1:]]
    from orchestra._cli._entry import entry

    entry()


if __name__ == "__main__":
    main()
