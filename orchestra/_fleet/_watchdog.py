"""A process that kills a worker's executors when the worker dies, however it dies.

Every executor runs in a session of its own, so a worker killed with SIGKILL
(a machine's OOM killer, ``kill -9``) would leave its agents running: they
would go on editing while another host takes their loops over. The kernel's
parent-death signal does not fit: it is tied to the *thread* that forked the
child, and trio forks from worker threads that end after ten idle seconds.

So each worker starts one small watchdog process and keeps the write end of
a pipe to it. The worker writes ``+<pgid>`` when an executor or verify
command starts and ``-<pgid>`` once that group is stopped; the watchdog reads
until end of file, which comes when the worker exits or is killed (the kernel
closes its descriptors), and then sends SIGKILL to every group still listed.
A group that starts in the instant the worker dies may be missed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

from .._process import watch_process_groups

# Run with -S -I: no site packages, no environment, a fast start.
_WATCHDOG = """
import os, signal, sys
groups = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        groups.add(int(line[1:]))
    elif line[:1] == "-":
        groups.discard(int(line[1:]))
for group in groups:
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
"""


class Watchdog:
    """The watchdog process and the pipe that keeps it waiting."""

    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()  # not inherited by executors (O_CLOEXEC)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", _WATCHDOG],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                # Out of the worker's group: a Ctrl-C on the terminal must not end it
                # before the worker has stopped its executors.
                start_new_session=True,
            )
        finally:
            os.close(read_end)
        self._lock = threading.Lock()

    def watch(self, pgid: int, started: bool) -> None:
        """Tell the watchdog of a group that started (or ended)."""
        line = f"{'+' if started else '-'}{pgid}\n".encode()
        with self._lock, contextlib.suppress(OSError):
            os.write(self._write_end, line)

    def close(self) -> None:
        """Let the watchdog end (it kills what is still listed) and reap it."""
        with self._lock:
            os.close(self._write_end)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@contextlib.contextmanager
def executors_die_with_this_process() -> Iterator[None]:
    """Within the block, every command's group is killed if this process dies."""
    watchdog = Watchdog()
    try:
        with watch_process_groups(watchdog.watch):
            yield
    finally:
        watchdog.close()
