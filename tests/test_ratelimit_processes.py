"""Real processes sharing one sqlite rate-limit log.

These are the only rate-limit tests that take real time: the point is the wall
clock, the file locks and the scheduling of separate processes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from orchestra._ratelimit import SlidingWindow, SqliteBackend

from .test_ratelimit import max_in_any_window

ROOT = Path(__file__).resolve().parent.parent

# One process: open the shared log, wait for "go" on stdin (so that every process
# starts at once), then acquire through the async limiter and report the wall-clock
# time the backend stamped on each grant. The backend reads its clock once per
# transaction, after taking the write lock, so the last value read is that stamp.
CHILD = r"""
import json, os, sys, time
from pathlib import Path

import trio

from orchestra._ratelimit import RateLimiter, SqliteBackend

path, calls, window = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
count, patience = int(sys.argv[4]), float(sys.argv[5])
last_read = [0.0]

def clock():
    last_read[0] = time.time()
    return last_read[0]

async def main():
    limiter = RateLimiter(SqliteBackend(path, clock=clock), calls, window, clock=trio.current_time)
    before = (await limiter.refresh()).used
    stamps = []
    for _ in range(count):
        await limiter.acquire(f"pid-{os.getpid()}")
        stamps.append(last_read[0])
    with trio.move_on_after(patience) as scope:
        await limiter.acquire("one more")
    print(json.dumps({"before": before, "stamps": stamps, "extra": not scope.cancelled_caught}))

SqliteBackend.open(path)
print("ready", flush=True)
sys.stdin.readline()
trio.run(main)
"""


def start(
    path: Path, calls: int, window: float, count: int, patience: float
) -> subprocess.Popen[str]:
    """One child, blocked until :func:`run_together` says go."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(path),
            str(calls),
            str(window),
            str(count),
            str(patience),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_together(children: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Release the children at once and collect what each one reports."""
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                _, errors = child.communicate(timeout=30)
                raise AssertionError(f"a child failed to start:\n{errors}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        reports = []
        for child in children:
            output, errors = child.communicate(timeout=60)
            assert child.returncode == 0, errors
            reports.append(json.loads(output))
        return reports
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_eight_processes_never_exceed_one_window(tmp_path: Path) -> None:
    calls, window, each = 5, 1.0, 2
    path = tmp_path / "ratelimit.sqlite3"  # created by whichever child gets there first
    reports = run_together([start(path, calls, window, each, 0) for _ in range(8)])

    per_child: list[list[float]] = [report["stamps"] for report in reports]
    assert [len(child_stamps) for child_stamps in per_child] == [each] * 8
    stamps = sorted(stamp for child_stamps in per_child for stamp in child_stamps)
    assert len(stamps) == 8 * each
    assert max_in_any_window(stamps, window) <= calls
    # Everyone asked at once: the first window was filled, exactly.
    assert sum(1 for stamp in stamps if stamp < stamps[0] + window) == calls
    # 16 grants at 5 a window need three more windows after the first one.
    assert stamps[-1] - stamps[0] >= 3 * window


def test_a_restarted_process_still_counts_earlier_calls(tmp_path: Path) -> None:
    path = tmp_path / "ratelimit.sqlite3"
    (first,) = run_together([start(path, 5, 3600, 3, 0)])
    assert first["before"] == 0
    (second,) = run_together([start(path, 5, 3600, 2, 0.2)])
    assert second["before"] == 3
    assert second["extra"] is False  # the sixth call of the hour had to wait
    rule = SlidingWindow(calls=5, window=3600)
    assert SqliteBackend.open(path).peek(rule).used == 5
