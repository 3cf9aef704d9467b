"""A process that kills a worker's executors when the worker dies or stops renewing its leases.

Every executor runs in a session of its own, so a worker killed with SIGKILL
(a machine's OOM killer, ``kill -9``) would leave its agents running: they
would go on editing while another host takes their loops over. The kernel's
parent-death signal does not fit: it is tied to the *thread* that forked the
child, and trio forks from worker threads that end after ten idle seconds.

A worker that is alive but frozen (SIGSTOP, a suspended VM, a stuck event
loop) is the same danger in another form: its lease lapses, another host
claims the loop, and the frozen worker cannot stop its own agents. So the
watchdog also holds a **deadline**: the moment the worker's oldest lease
renewal can no longer be trusted. The worker moves it on after every
successful renewal; when it passes first, the watchdog kills every group.

So each worker starts one small watchdog process and keeps the write end of
a pipe to it. The worker writes lines:

- ``+<pgid>`` when an executor or verify command starts, ``-<pgid>`` once
  that group is stopped;
- ``d<seconds>``: the deadline, on this host's boot clock (``CLOCK_BOOTTIME``,
  which counts suspended time, see :func:`._deadline.boot_clock`; an absolute
  time, not a delay: a line written or read late cannot move it);
- ``x``: no deadline (the worker holds no lease, nothing can be taken over).

When the deadline passes, the watchdog sends SIGKILL to every group listed,
and to every group announced afterwards, until a new deadline comes. At end
of file, which comes when the worker exits or is killed (the kernel closes
its descriptors), it kills every group still listed and ends. A group that
starts in the instant the worker dies may be missed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator

from .._process import watch_process_groups
from ._deadline import boot_clock

# Run with -S -I: no site packages, no environment, a fast start. The clock is
# boot_clock's (CLOCK_BOOTTIME, else monotonic): the leases lapse on the server
# while this host is suspended, so the deadline must pass then too. argv[1] is
# the worker's boot clock when it started this process: a clock faked per
# process (libfaketime) reads behind the worker's here, and the deadlines are
# moved earlier by as much; the clocks of one host otherwise agree.
_WATCHDOG = """
import os, select, signal, sys, time
BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)

def now():
    return time.monotonic() if BOOTTIME is None else time.clock_gettime(BOOTTIME)

behind = min(0.0, now() - float(sys.argv[1]))
groups = set()
deadline = None
lapsed = False
pending = b""

def kill(targets):
    for group in targets:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass

def lapse():
    global lapsed
    if deadline is not None and not lapsed and now() >= deadline:
        lapsed = True
        kill(groups)

def obey(line):
    global deadline, lapsed
    head, rest = line[:1], line[1:]
    if head == b"+":
        groups.add(int(rest))
        if lapsed:
            kill([int(rest)])
    elif head == b"-":
        groups.discard(int(rest))
    elif head == b"d":
        deadline, lapsed = float(rest) + behind, False
    elif head == b"x":
        deadline, lapsed = None, False

poller = select.poll()
poller.register(0, select.POLLIN)
while True:
    wait = None
    if deadline is not None and not lapsed:
        wait = max(0, int((deadline - now()) * 1000) + 1)
    ready = poller.poll(wait)
    # The deadline is judged before reading: a renewal that arrives after it is too late.
    lapse()
    if not ready:
        continue
    chunk = os.read(0, 4096)
    if not chunk:
        break
    *lines, pending = (pending + chunk).split(b"\\n")
    for line in lines:
        try:
            obey(line.strip())
        except ValueError:
            pass
    lapse()
kill(groups)
"""


class Watchdog:
    """The watchdog process and the pipe that keeps it waiting."""

    def __init__(self) -> None:
        read_end, self._write_end = os.pipe()  # not inherited by executors (O_CLOEXEC)
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-S", "-I", "-c", _WATCHDOG, repr(boot_clock())],
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

    @property
    def pid(self) -> int:
        """The watchdog's process id."""
        return self._process.pid

    def watch(self, pgid: int, started: bool) -> None:
        """Tell the watchdog of a group that started (or ended)."""
        self._send(f"{'+' if started else '-'}{pgid}\n")

    def kill_at(self, deadline: float | None) -> None:
        """Kill every group at ``deadline`` (:func:`._deadline.boot_clock` seconds) unless moved on.

        None: no deadline (nothing this worker runs may be taken over).
        """
        self._send("x\n" if deadline is None else f"d{deadline!r}\n")

    def close(self) -> None:
        """Let the watchdog end (it kills what is still listed) and reap it."""
        with self._lock:
            os.close(self._write_end)
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def _send(self, line: str) -> None:
        # One write of a short line: a pipe takes it whole (PIPE_BUF), never interleaved.
        with self._lock, contextlib.suppress(OSError):
            os.write(self._write_end, line.encode())


@contextlib.contextmanager
def executors_die_with_this_process() -> Iterator[Watchdog]:
    """Within the block, every command's group is killed if this process dies.

    The watchdog is yielded: :meth:`Watchdog.kill_at` also has the groups
    killed when this process, alive but frozen, stops moving the deadline on.
    """
    watchdog = Watchdog()
    try:
        with watch_process_groups(watchdog.watch):
            yield watchdog
    finally:
        watchdog.close()
