"""Rate limiter: acquires per second of its bookkeeping, against the floor of each backend.

Drives the public API (``open_limiter`` from a ``[rate_limit]`` policy, then
``RateLimiter.acquire``) with ``calls`` so large and ``window`` so long that no
acquire ever waits: what is timed is the bookkeeping alone. The sliding log keeps
every permit of the window, so each backend is timed with the log already
holding K live permits (taken in one untimed ``acquire(permits=K)`` on a fresh
limiter; the default ``calls`` is 100), growing by the M timed acquires. Forge
and its baselines are timed in interleaved rounds, so that this shared machine's
disk (every sqlite commit is an fsync) weighs on both alike.

- memory backend, 1 process; baseline: ``deque.append`` in a loop (and, for
  scale, the trio floor: an uncontended ``trio.Lock`` plus a checkpoint).
- sqlite backend, 1 process and 8 processes sharing one file (released together,
  as in tests/test_ratelimit_processes.py); baseline: a bare
  ``BEGIN IMMEDIATE; INSERT; COMMIT`` loop on a file in the same folder, same
  journal mode and busy timeout (and, for scale, the same with a connection per
  transaction, as the backend opens one per call). The sqlite figures are taken
  in the temporary folder (or --dir) and again in /dev/shm, where a commit costs
  no fsync and what is left is the CPU's share.

    .venv/bin/python bench/limiter.py [--acquires 100] [--rounds 5] [--processes 8] [--dir D]
        [--no-tmpfs] [--quick]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio
from _quick import parse_args

from orchestra._durations import Duration
from orchestra._policy import RateLimitPolicy
from orchestra._ratelimit import RateLimiter, open_limiter

ROOT = Path(__file__).resolve().parent.parent
CALLS = 10**9  # never reached: nothing waits
WINDOW = Duration(86400)  # a day: nothing leaves the log while it is timed
TABLE = "CREATE TABLE grants (at REAL NOT NULL, who TEXT NOT NULL)"
INDEX = "CREATE INDEX grants_by_time ON grants (at)"
SIZES = (0, 100, 1000, 10_000)  # K: the permits the log holds before the timed acquires
QUICK_SIZES = (0, 100)


def limiter(backend: str, folder: Path) -> RateLimiter:
    policy = RateLimitPolicy(calls=CALLS, window=WINDOW, backend=backend, path="rl.sqlite3")
    folder.mkdir(exist_ok=True)
    return open_limiter(policy, folder)


async def forge_acquires(backend: str, folder: Path, live: int, count: int) -> float:
    """Seconds for ``count`` acquires on a fresh limiter whose log holds ``live`` permits."""
    rate_limiter = await trio.to_thread.run_sync(limiter, backend, folder)
    if live:
        await rate_limiter.acquire("prefill", permits=live)
    started = time.perf_counter()
    for _ in range(count):
        await rate_limiter.acquire("bench")
    elapsed = time.perf_counter() - started
    used = (await rate_limiter.refresh()).used
    if used != live + count:
        raise SystemExit(f"{backend}: {used} permits in the log, expected {live + count}")
    return elapsed


def deque_appends(count: int) -> float:
    log: collections.deque[float] = collections.deque()
    started = time.perf_counter()
    for _ in range(count):
        log.append(time.monotonic())
    return time.perf_counter() - started


async def trio_floor(count: int) -> float:
    lock = trio.Lock()
    started = time.perf_counter()
    for _ in range(count):
        async with lock:
            await trio.lowlevel.checkpoint()
    return time.perf_counter() - started


def bare_sqlite(path: Path, count: int, per_transaction: bool) -> float:
    """Seconds for ``count`` BEGIN IMMEDIATE; INSERT; COMMIT, on one connection or one each."""
    fresh = not path.exists()
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    if fresh:
        connection.execute(TABLE)
        connection.execute(INDEX)
    started = time.perf_counter()
    for _ in range(count):
        if per_transaction:
            connection.close()
            connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO grants (at, who) VALUES (?, ?)", (time.time(), "bench"))
        connection.execute("COMMIT")
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


# One process of the shared-file runs: get ready, wait for "go" on stdin, then make
# `count` acquisitions (forge: through the limiter; bare: BEGIN IMMEDIATE, INSERT,
# COMMIT on one connection), and report when it started and finished.
CHILD = r"""
import json, sqlite3, sys, time
from pathlib import Path

import trio

from orchestra._durations import Duration
from orchestra._policy import RateLimitPolicy
from orchestra._ratelimit import open_limiter

mode, folder, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])

async def forge(rate_limiter):
    for _ in range(count):
        await rate_limiter.acquire("bench")

if mode == "forge":
    policy = RateLimitPolicy(calls=10**9, window=Duration(86400), path="rl.sqlite3")
    rate_limiter = open_limiter(policy, folder)
else:
    connection = sqlite3.connect(folder / "bare.sqlite3", timeout=10.0, isolation_level=None)
print("ready", flush=True)
sys.stdin.readline()
started = time.time()
if mode == "forge":
    trio.run(forge, rate_limiter)
else:
    for _ in range(count):
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT INTO grants (at, who) VALUES (?, ?)", (time.time(), "b"))
        connection.execute("COMMIT")
print(json.dumps({"started": started, "finished": time.time()}))
"""


def shared_file(mode: str, folder: Path, processes: int, count: int) -> float:
    """Seconds for ``processes`` processes at once to make ``count`` acquisitions each."""
    folder.mkdir()
    if mode == "forge":
        limiter("sqlite", folder)  # create the log before anyone races for it
    else:
        with sqlite3.connect(folder / "bare.sqlite3") as connection:
            connection.execute(TABLE)
            connection.execute(INDEX)
        connection.close()
    argv = [sys.executable, "-c", CHILD, mode, str(folder), str(count)]
    children = [
        subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise SystemExit(f"a {mode} child failed to start")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        reports = []
        for child in children:
            output, _ = child.communicate(timeout=120)
            if child.returncode != 0:
                raise SystemExit(f"a {mode} child exited {child.returncode}")
            reports.append(json.loads(output))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return max(r["finished"] for r in reports) - min(r["started"] for r in reports)


def line(label: str, rate: float, base: float | None = None) -> None:
    ratio = ""
    if base:
        ratio = f"{rate / base:.2f}x" if rate >= base / 100 else f"1/{base / rate:,.0f}"
        ratio = f"  {ratio:>8s} baseline"
    print(f"  {label:44s} {rate:11,.0f} /s{ratio}")


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on, from /proc/mounts ("?" elsewhere)."""
    best, kind = "", "?"
    with contextlib.suppress(OSError), open("/proc/mounts") as mounts:
        for entry in mounts:
            _, point, fs_type, *_ = entry.split()
            if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
                best, kind = point, fs_type
    return kind


def sqlite_figures(
    folder: Path, count: int, rounds: int, processes: int, sizes: tuple[int, ...]
) -> None:
    run = iter(range(10**9))  # a fresh folder name for every measurement
    where = f"{folder.parent} ({filesystem(folder)})"
    print(f"sqlite backend, 1 process, in {where}")
    seconds = collections.Counter[str | int]()
    for _ in range(rounds):
        seconds["bare"] += bare_sqlite(folder / "bare.sqlite3", count, False)
        seconds["connect"] += bare_sqlite(folder / "connect.sqlite3", count, True)
        for live in sizes:
            fresh = folder / f"run-{next(run)}"
            seconds[live] += trio.run(forge_acquires, "sqlite", fresh, live, count)
    total = rounds * count
    base = total / seconds["bare"]
    line("baseline: BEGIN IMMEDIATE; INSERT; COMMIT", base)
    line("(the same, a connection per transaction)", total / seconds["connect"], base)
    for live in sizes:
        line(f"forge, K = {live}", total / seconds[live], base)

    each, shared_rounds = max(1, count // 2), max(1, rounds // 2)
    print(f"sqlite backend, {processes} processes on one file, {each} acquires each, in {where}")
    seconds.clear()
    for _ in range(shared_rounds):
        for mode in ("bare", "forge"):
            fresh = folder / f"run-{next(run)}"
            seconds[mode] += shared_file(mode, fresh, processes, each)
    total = shared_rounds * processes * each
    base = total / seconds["bare"]
    line("baseline: BEGIN IMMEDIATE; INSERT; COMMIT", base)
    line(f"forge, K = 0 (-> {processes * each})", total / seconds["forge"], base)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acquires", type=int, default=100, help="timed acquires per figure")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per figure")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--dir", default=None, help="where the sqlite files go (default: tmp)")
    parser.add_argument("--no-tmpfs", action="store_true", help="skip the run in /dev/shm")
    args = parse_args(parser, acquires=10, rounds=1, processes=2, no_tmpfs=True)
    count, rounds, processes = args.acquires, args.rounds, args.processes
    sizes = QUICK_SIZES if args.quick else SIZES

    print(f"machine: {os.cpu_count()} cores; sqlite {sqlite3.sqlite_version}")
    print(
        f"calls {CALLS:.0e}, window {WINDOW.seconds:.0f} s: no acquire waits; "
        f"each figure: {rounds} rounds of {count} acquires, the log holding K -> K+{count}"
    )
    print("memory backend, 1 process")
    seconds = collections.Counter[str | int]()
    with tempfile.TemporaryDirectory() as name:
        for run in range(rounds):
            seconds["deque"] += deque_appends(count)
            seconds["trio"] += trio.run(trio_floor, count)
            for live in sizes:
                fresh = Path(name) / f"run-{run}-{live}"
                seconds[live] += trio.run(forge_acquires, "memory", fresh, live, count)
    total = rounds * count
    base = total / seconds["deque"]
    line("baseline: deque.append", base)
    line("(trio floor: uncontended Lock + checkpoint)", total / seconds["trio"], base)
    for live in sizes:
        line(f"forge, K = {live}", total / seconds[live], base)

    places = [args.dir]
    shm = Path("/dev/shm")
    if not args.no_tmpfs and shm.is_dir() and os.access(shm, os.W_OK):
        places.append(str(shm))  # no fsync cost: the bookkeeping alone
    for place in places:
        with tempfile.TemporaryDirectory(dir=place) as name:
            sqlite_figures(Path(name), count, rounds, processes, sizes)


if __name__ == "__main__":
    main()
