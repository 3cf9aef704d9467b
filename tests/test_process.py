"""The process runner: own process group, SIGTERM -> grace -> SIGKILL, bounded capture."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
import trio.testing

from orchestra._capture import OutputCapture
from orchestra._errors import StateError
from orchestra._process import run_process

from .reliability.harness import pids_in, wait_until

# A child that ignores SIGTERM, forks a grandchild that ignores it too and keeps
# the output pipe open, and records both pids so the test can look for them.
STUBBORN_TREE = r"""
trap '' TERM
( trap '' TERM; echo "grandchild $$" ; exec sleep 300 ) &
echo $! > "$PIDS"
echo $$ >> "$PIDS"
echo started
sleep 300
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


async def test_exit_code_and_output(tmp_path: Path) -> None:
    result = await run_process(["sh", "-c", "echo out; echo err >&2; exit 3"], cwd=tmp_path)
    assert result.exit_code == 3
    assert not result.timed_out
    assert result.signal is None
    # Two pipes: each line arrives whole, in an order the scheduler picks.
    assert sorted(result.output.text().splitlines()) == ["err", "out"]
    assert result.output.total_lines == 2
    assert result.describe() == "exit 3"


async def test_command_that_cannot_start(tmp_path: Path) -> None:
    result = await run_process(["/nonexistent/program"], cwd=tmp_path)
    assert result.exit_code is None
    assert result.start_error is not None
    assert result.describe().startswith("could not start")


async def test_killed_by_a_signal_is_not_an_exit(tmp_path: Path) -> None:
    result = await run_process(["sh", "-c", "kill -KILL $$"], cwd=tmp_path)
    assert result.signal == signal.SIGKILL
    assert result.exit_code is None
    assert result.describe() == "killed by SIGKILL"


async def test_timeout_stops_the_whole_tree(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    pids = tmp_path / "pids"
    env = {**os.environ, "PIDS": str(pids)}
    # The mock clock stands still until the tree is up (it prints "started" once
    # both pids are recorded): autojump would otherwise reach the time limit
    # while a shell slow to start under load has not forked its grandchild yet.
    autojump_clock.autojump_threshold = float("inf")

    def on_output(chunk: bytes) -> None:
        if b"started" in chunk:
            autojump_clock.autojump_threshold = 0

    result = await run_process(
        ["sh", "-c", STUBBORN_TREE],
        cwd=tmp_path,
        env=env,
        time_limit=60,
        grace=10,
        on_output=on_output,
    )
    assert result.timed_out
    assert result.exit_code is None
    assert result.describe() == "timed out"
    # The mock clock measures what a real run would have waited: the limit and the grace.
    assert 70 <= result.duration < 75
    recorded = [int(x) for x in pids.read_text().split()]
    assert len(recorded) == 2
    assert not any(alive(pid) for pid in recorded)


async def test_leftovers_of_a_finished_command_are_stopped(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    env = {**os.environ, "PIDS": str(pids)}
    script = '( exec sleep 300 ) & echo $! > "$PIDS"; echo done'
    result = await run_process(["sh", "-c", script], cwd=tmp_path, env=env, grace=5)
    assert result.exit_code == 0
    assert not alive(int(pids.read_text()))


async def test_cancellation_stops_the_tree(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    pids = tmp_path / "pids"
    env = {**os.environ, "PIDS": str(pids)}

    async def stubborn() -> None:
        await run_process(["sh", "-c", STUBBORN_TREE], cwd=tmp_path, env=env, grace=10)
        pytest.fail("the cancel should have ended the run")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stubborn)
        # Cancelled once the whole tree is up: a deadline on the mock clock
        # would jump past a shell that is slow to start under load.
        await trio.to_thread.run_sync(wait_until, lambda: len(pids_in(pids)) == 2)
        nursery.cancel_scope.cancel()
    recorded = [int(x) for x in pids.read_text().split()]
    assert recorded
    assert not any(alive(pid) for pid in recorded)


async def test_output_is_bounded_and_logged(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "iteration-1.log"
    capture = OutputCapture(head_limit=1000, tail_limit=1000)
    script = "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done"
    result = await run_process(["sh", "-c", script], cwd=tmp_path, log_path=log, capture=capture)
    expected = "".join(f"line-{i}\n" for i in range(20000))
    assert result.output.total_bytes == len(expected)
    assert result.output.total_lines == 20000
    assert len(result.output.head) == 1000
    assert len(result.output.tail) == 1000
    assert result.output.text().startswith("line-0\nline-1\n")
    assert result.output.text().endswith("line-19999\n")
    assert log.read_text() == expected


async def test_a_log_the_disk_refuses_is_a_state_error_once_the_command_ends(
    tmp_path: Path,
) -> None:
    # /dev/full answers every write with ENOSPC, as a full disk would.
    done = tmp_path / "done"
    script = f"i=0; while [ $i -lt 5000 ]; do echo line-$i; i=$((i+1)); done; touch {done}"
    with pytest.raises(StateError, match="cannot write /dev/full: No space left on device"):
        await run_process(["sh", "-c", script], cwd=tmp_path, log_path=Path("/dev/full"))
    assert done.exists()  # the output was still read to its end: nothing blocked


async def test_stdout_alone_goes_to_the_parser(tmp_path: Path) -> None:
    seen: list[bytes] = []
    await run_process(
        ["sh", "-c", "printf 'warning ' >&2; echo '{\"a\": 1}'"],
        cwd=tmp_path,
        on_output=seen.append,
    )
    assert b"".join(seen) == b'{"a": 1}\n'


async def test_output_held_open_outside_the_group_is_bounded(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = f"setsid sh -c 'echo $$ > {pids}; exec sleep 300' & sleep 0.2; echo started; exit 0"
    result = await run_process(["sh", "-c", script], cwd=tmp_path, grace=0.5)
    assert result.exit_code == 0
    assert "started" in result.output.text()
    escaped = int(pids.read_text())
    # Outside the group, it is beyond run_process; the command's own sweep stops it.
    os.kill(escaped, signal.SIGKILL)


async def test_stderr_goes_to_its_own_listener_and_never_splits_a_logged_line(
    tmp_path: Path,
) -> None:
    # stdout writes half a line, stderr a whole one, then stdout ends its line:
    # the log keeps each line whole, and each listener sees only its stream.
    script = (
        "printf 'half of a ' ; sleep 0.2; echo 'stderr line' >&2; sleep 0.2; echo 'stdout line'"
    )
    stdout: list[bytes] = []
    stderr: list[bytes] = []
    log = tmp_path / "out.log"
    result = await run_process(
        ["sh", "-c", script],
        cwd=tmp_path,
        log_path=log,
        on_output=stdout.append,
        on_error_output=stderr.append,
    )
    assert result.exit_code == 0
    assert b"".join(stdout) == b"half of a stdout line\n"
    assert b"".join(stderr) == b"stderr line\n"
    assert log.read_text().splitlines() == ["stderr line", "half of a stdout line"]
