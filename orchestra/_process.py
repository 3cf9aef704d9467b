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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import attrs
import trio

from ._capture import CapturedOutput, OutputCapture

TIMEOUT_EXIT_CODE = 124  # what timeout(1) returns, for scripts that compare
_POLL_SECONDS = 0.02
_READ_CHUNK = 64 * 1024
_PROC = Path("/proc")


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
) -> ProcessResult:
    """Run ``argv`` to completion in a new process group and capture its output.

    stdout and stderr are merged (their order is what a person reads), stdin is
    empty. When ``time_limit`` elapses, or the caller is cancelled, the whole group
    gets SIGTERM, then SIGKILL after ``grace`` seconds; processes the command
    left behind in its group when it exited are stopped the same way.

    Args:
        argv: The program and its arguments.
        cwd: Where it runs.
        env: Its whole environment (None inherits Forge's).
        time_limit: Seconds before it is stopped and classified as timed out.
        grace: Seconds between SIGTERM and SIGKILL.
        log_path: Where to stream the full output, if anywhere.
        capture: The bounded capture to fill (a default-sized one otherwise).
        on_output: Called with every chunk of output as it arrives (a streaming parser).
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
            stderr=subprocess.STDOUT,
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

    log_fd = _open_log(log_path)
    timed_out = False
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pump, process, capture, log_fd, on_output)
            with trio.move_on_after(time_limit) as deadline:
                await process.wait()
            timed_out = deadline.cancelled_caught
            # Whatever the command left running in its group goes too, or a
            # grandchild holding the pipe would keep the pump waiting for EOF.
            with trio.CancelScope(shield=True):
                await stop_process_group(process, grace)
    finally:
        with trio.CancelScope(shield=True):
            await stop_process_group(process, grace)
        if log_fd is not None:
            os.close(log_fd)

    code = process.returncode
    return ProcessResult(
        exit_code=code if (code is not None and code >= 0 and not timed_out) else None,
        signal=-code if (code is not None and code < 0 and not timed_out) else None,
        timed_out=timed_out,
        start_error=None,
        duration=trio.current_time() - started,
        output=capture.snapshot(),
    )


async def stop_process_group(process: trio.Process, grace: float) -> None:
    """SIGTERM the process's group, wait up to ``grace``, then SIGKILL what is left."""
    pgid = process.pid  # the leader of a new session: its pid is the group id
    if not _group_alive(pgid) and process.returncode is not None:
        return
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


async def _pump(
    process: trio.Process,
    capture: OutputCapture,
    log_fd: int | None,
    on_output: Callable[[bytes], None] | None,
) -> None:
    stream = process.stdout
    if stream is None:  # pragma: no cover - stdout is always a pipe here
        return
    async with stream:
        while chunk := await stream.receive_some(_READ_CHUNK):
            capture.feed(chunk)
            if on_output is not None:
                on_output(bytes(chunk))
            if log_fd is not None:
                _write_all(log_fd, chunk)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _open_log(log_path: Path | None) -> int | None:
    if log_path is None:
        return None
    log_path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies do not count).

    An orphan that died stays a zombie until its new parent reaps it, and
    ``killpg(pgid, 0)`` still finds it; where /proc exists, Forge reads the
    process states instead, so it never waits on the dead.
    """
    if _PROC.is_dir():
        return _proc_group_alive(pgid)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _proc_group_alive(pgid: int) -> bool:
    with os.scandir(_PROC) as entries:
        pids = [entry.name for entry in entries if entry.name.isdigit()]
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # it exited while we looked
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
