"""Running a command in its own process group, bounded in time and in memory.

Every command Forge runs (a verify check, an agent iteration) is the leader of
a new session, so its whole tree can be signalled at once. Stopping it follows
trio's own pattern (SIGTERM, a grace period, SIGKILL) but aimed at the process
group: trio signals only the direct child, and a grandchild that holds the
output pipe open would otherwise keep the read waiting forever.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from ._capture import CapturedOutput, OutputCapture
from ._errors import StateError
from ._redact import Redact, StreamRedactor

TIMEOUT_EXIT_CODE = 124  # what timeout(1) returns, for scripts that compare
_POLL_SECONDS = 0.02
_READ_CHUNK = 64 * 1024
_PROC = Path("/proc")
_PR_SET_CHILD_SUBREAPER = 36

# Called with (process group, True) when a command starts and (group, False)
# once it is stopped: a fleet worker tells a watchdog process which groups to
# kill should the worker itself be killed (see watch_process_groups).
_group_watchers: list[Callable[[int, bool], None]] = []


@contextlib.contextmanager
def watch_process_groups(watcher: Callable[[int, bool], None]) -> Iterator[None]:
    """Within the block, ``watcher(pgid, started)`` hears of every command's group.

    A process that must not leave its commands behind when it dies (even by
    SIGKILL, when nothing of it runs any more) hands the groups to a process
    that outlives it. The watcher runs on trio's thread and must not block.
    """
    _group_watchers.append(watcher)
    try:
        yield
    finally:
        _group_watchers.remove(watcher)


@attrs.frozen
class ProcessResult:
    """How a command ended.

    Exactly one of ``exit_code``, ``signal``, ``timed_out`` or ``start_error``
    describes the ending.
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    start_error: str | None
    duration: float
    output: CapturedOutput

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0

    def describe(self) -> str:
        """The ending in a few words: ``exit 1``, ``timed out``, ``killed by SIGKILL`` ..."""
        if self.start_error is not None:
            return f"could not start: {self.start_error}"
        if self.timed_out:
            return "timed out"
        if self.signal is not None:
            return f"killed by {signal_name(self.signal)}"
        if self.exit_code == 127:
            return "exit 127 (command not found)"
        return f"exit {self.exit_code}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    time_limit: float = math.inf,
    grace: float = 10.0,
    log_path: Path | None = None,
    capture: OutputCapture | None = None,
    on_output: Callable[[bytes], None] | None = None,
    redact: Redact | None = None,
    on_error_output: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion in a new process group and capture its output.

    stdout and stderr both go to the capture and the log, in the order they
    arrive, a whole line at a time (a line of one stream is never cut by the
    other's); stdout goes to ``on_output`` and stderr to ``on_error_output``,
    each apart (an agent's JSON is on stdout, and a warning on stderr must not
    be glued into it). stdin is empty. When
    ``time_limit`` elapses, or the caller is cancelled, the whole group gets
    SIGTERM, then SIGKILL after ``grace`` seconds; processes the command left
    behind in its group when it exited are stopped the same way, and output
    still held open from outside the group is read for ``grace`` at most.

    Args:
        argv: The program and its arguments.
        cwd: Where it runs.
        env: Its whole environment (None inherits Forge's).
        time_limit: Seconds before it is stopped and classified as timed out.
        grace: Seconds between SIGTERM and SIGKILL.
        log_path: Where to stream the full output, if anywhere.
        capture: The bounded capture to fill (a default-sized one otherwise).
        on_output: Called with every chunk of stdout as it arrives (a streaming parser).
        on_error_output: Called with every chunk of stderr as it arrives.
        redact: Applied to every line of output before the capture, the log and
            ``on_output`` see it (secrets an executor prints are kept nowhere).
    """
    capture = capture or OutputCapture()
    started = trio.current_time()
    try:
        process = await trio.lowlevel.open_process(
            list(argv),
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessResult(
            exit_code=None,
            signal=None,
            timed_out=False,
            start_error=f"{argv[0]}: {exc.strerror or exc}",
            duration=trio.current_time() - started,
            output=capture.snapshot(),
        )

    for watcher in _group_watchers:
        watcher(process.pid, True)
    log = _Log(log_path)
    timed_out = False
    ended = False  # the command ended by itself (or by its time limit), not by cancellation
    emptied = False  # its group was found empty after it: nothing can join a group that is gone
    try:
        async with trio.open_nursery() as nursery:
            for stream, listener in (
                (process.stdout, on_output),
                (process.stderr, on_error_output),
            ):
                redactor = StreamRedactor(redact) if redact is not None else None
                nursery.start_soon(_pump, stream, capture, log, listener, redactor)
            with trio.move_on_after(time_limit) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            # Whatever the command left running in its group goes too, or a
            # grandchild holding the pipe would keep the pump waiting for EOF.
            with trio.CancelScope(shield=True):
                emptied = await stop_process_group(process, grace, whole_session=timed_out)
            # A process outside the group (it called setsid) may still hold the
            # pipes: give the output a grace period to end, then stop reading.
            nursery.cancel_scope.deadline = trio.current_time() + grace
        ended = True
    finally:
        if not (ended and emptied):
            with trio.CancelScope(shield=True):
                await stop_process_group(process, grace, whole_session=not ended or timed_out)
        for watcher in _group_watchers:
            watcher(process.pid, False)
        log.close()
    if log.error is not None:
        # The command ran to its end (its output was still read, so it never
        # blocked on a full pipe); what it printed could not be kept.
        raise StateError(f"cannot write {log_path}: {log.error.strerror or log.error} (disk full?)")

    code = process.returncode
    return ProcessResult(
        exit_code=code if (code is not None and code >= 0 and not timed_out) else None,
        signal=-code if (code is not None and code < 0 and not timed_out) else None,
        timed_out=timed_out,
        start_error=None,
        duration=trio.current_time() - started,
        output=capture.snapshot(),
    )


async def stop_process_group(
    process: trio.Process, grace: float, *, whole_session: bool = True
) -> bool:
    """SIGTERM the process's group, wait up to ``grace``, then SIGKILL what is left.

    With ``whole_session``, then the same for the rest of its session:
    processes that moved to a group of their own (``set -m`` jobs, ``setpgid``)
    but stayed in the session. That takes a scan of /proc, so after a command
    that simply exited it is left to the end-of-command sweep instead.

    Returns:
        True when the process had ended and its group was already empty
        (nothing signalled, nothing waited for), and no session was swept:
        stopping it again would find nothing either.
    """
    empty = await _stop_group(process, grace)
    if not whole_session:
        return empty
    for pid in _session_members(process.pid):
        _signal(pid, signal.SIGTERM)
    with trio.move_on_after(grace):
        while _session_members(process.pid):  # noqa: ASYNC110 - no event tells when they end
            await trio.sleep(_POLL_SECONDS)
    for pid in _session_members(process.pid):
        _signal(pid, signal.SIGKILL)
    return False


async def _stop_group(process: trio.Process, grace: float) -> bool:
    """Stop the group; True when there was nothing to stop (ended, group empty)."""
    pgid = process.pid  # the leader of a new session: its pid is the group id
    if process.returncode is not None and not _group_alive(pgid):
        # The usual end: the command exited and left nothing behind. No signal,
        # no wait, no /proc scan beyond the one probe.
        return True
    _signal_group(pgid, signal.SIGTERM)
    with trio.move_on_after(grace):
        await process.wait()
        while _group_alive(pgid):  # noqa: ASYNC110 - no event tells when a group empties
            await trio.sleep(_POLL_SECONDS)
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
    await process.wait()
    while _group_alive(pgid):  # noqa: ASYNC110 - no event tells when a group empties
        await trio.sleep(_POLL_SECONDS)
    return False


async def _pump(
    stream: trio.abc.ReceiveStream | None,
    capture: OutputCapture,
    log: _Log,
    on_output: Callable[[bytes], None] | None,
    redactor: StreamRedactor | None = None,
) -> None:
    if stream is None:  # pragma: no cover - both are pipes here
        return

    pending = bytearray()  # the log's unfinished line of this stream

    def keep(data: bytes | bytearray) -> None:
        if not data:
            return
        capture.feed(data)
        if on_output is not None:
            on_output(bytes(data))
        if log.writing:
            # Whole lines only: the other stream's bytes never land inside one.
            pending.extend(data)
            end = pending.rfind(b"\n")
            if end != -1:
                log.write(pending[: end + 1])
                del pending[: end + 1]
            elif len(pending) > _READ_CHUNK:
                log.write(pending)  # no newline in sight: bounded, written as is
                pending.clear()

    try:
        async with stream:
            while chunk := await stream.receive_some(_READ_CHUNK):
                keep(redactor.feed(chunk) if redactor is not None else chunk)
    finally:
        # The last partial line, also when reading was cut short (cancelled).
        if redactor is not None:
            keep(redactor.flush())
        if pending:
            log.write(pending)


class _Log:
    """A command's log file, written until the disk refuses; then the error is kept.

    A full disk must not stop the reading (the command would block on its
    pipe) nor escape as a traceback: the caller raises it once the command
    has ended.
    """

    def __init__(self, path: Path | None) -> None:
        self.fd: int | None = None
        self.error: OSError | None = None
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self.error = exc

    @property
    def writing(self) -> bool:
        return self.fd is not None

    def write(self, data: bytes | bytearray) -> None:
        if self.fd is None:
            return
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self.error = exc
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count).

    ``killpg(pgid, 0)`` answers cheaply when the group is empty. When it finds a
    member, that may be an orphan that died and waits, a zombie, for its new
    parent to reap it; where /proc exists, Forge reads the process states then,
    so it never waits on the dead.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _proc_group_alive(pgid) if _PROC.is_dir() else True


def _proc_group_alive(pgid: int) -> bool:
    return any(pgrp == pgid and _live(state) for _, state, _, pgrp, _ in _proc_stats())


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _proc_stats() -> list[tuple[int, bytes, int, int, int]]:
    """(pid, state, ppid, pgrp, session) of every process, from /proc."""
    if not _PROC.is_dir():
        return []
    with os.scandir(_PROC) as entries:
        pids = [int(entry.name) for entry in entries if entry.name.isdigit()]
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 4:
            found.append((pid, fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
    return found


def _live(state: bytes) -> bool:
    return state not in (b"Z", b"X")  # a zombie has ended; only its parent's reaping is left


def _session_members(sid: int) -> list[int]:
    """Live processes of session ``sid`` (zombies do not count)."""
    return [
        pid
        for pid, state, _, _, session in _proc_stats()
        if session == sid and state not in (b"Z", b"X")
    ]


def become_subreaper() -> bool:
    """Adopt orphaned descendants instead of letting them go to init (Linux only).

    An executor's grandchild that calls ``setsid`` and outlives its parent
    leaves the executor's session and group; as a subreaper Forge still finds
    it among its own children, and :func:`sweep_orphans` stops it at the end.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def sweep_orphans(grace: float = 1.0) -> list[int]:
    """Stop and reap every child of Forge still alive: call when no executor runs any more.

    Returns:
        The pids that were stopped.
    """
    me = os.getpid()
    orphans = [
        pid for pid, state, ppid, _, _ in _proc_stats() if ppid == me and state not in (b"Z", b"X")
    ]
    for pid in orphans:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(
        ppid == me and _live(state) for _, state, ppid, _, _ in _proc_stats()
    ):
        time.sleep(_POLL_SECONDS)  # no event loop any more: a plain wait
    for pid, state, ppid, _, _ in _proc_stats():
        if ppid == me:
            if _live(state):
                _signal(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
    return orphans
