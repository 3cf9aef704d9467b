"""Rate limiter: the cost of one acquire with 0, 1,000 and 10,000 permits live in the window.

Drives the public API (``open_limiter`` from a ``[rate_limit]`` policy, then
``RateLimiter.acquire``) with ``calls`` so large and ``window`` so long that no
acquire ever waits: what is timed is the bookkeeping alone. Each figure is a
fresh limiter whose log is first filled with K live permits (one untimed
``acquire(permits=K)``), then timed over M acquires (the log grows K -> K+M);
the sizes are interleaved within a run, so that this shared machine's load
weighs on each alike. Each cost is taken in wall time and in the process's CPU
time (every thread's: the sqlite backend runs in a worker thread), which a
loaded machine disturbs less. The ratio is each K's cost to the empty window's
(K = 0) in the same run; the goal is the largest K within 2x of it, in the
median run, in wall time and in CPU alike.

- memory backend; for scale, ``deque.append`` of a monotonic time.
- sqlite backend in the temporary folder (or --dir) and again in /dev/shm, where
  a commit costs no fsync and what is left is the CPU's share; for scale, a bare
  ``BEGIN IMMEDIATE; INSERT; COMMIT`` on a connection of its own per
  transaction, as the backend opens one per call, in the same journal mode and
  sync level.

Every figure is the min/median/max of the runs (three by default).

    .venv/bin/python bench/limiter.py [--runs 3] [--rounds 3] [--acquires 100] [--dir D]
        [--no-tmpfs] [--quick]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import trio
from _quick import parse_args, verdict
from _spread import spread

from orchestra._durations import Duration
from orchestra._policy import RateLimitPolicy
from orchestra._ratelimit import RateLimiter, open_limiter

CALLS = 10**9  # never reached: nothing waits
WINDOW = Duration(86400)  # a day: nothing leaves the log while it is timed
SIZES = (0, 1000, 10_000)  # K: the permits live in the window before the timed acquires
QUICK_SIZES = (0, 100, 1000)
GOAL = 2.0  # the largest K within this many times the empty window's cost


def limiter(backend: str, folder: Path) -> RateLimiter:
    policy = RateLimitPolicy(calls=CALLS, window=WINDOW, backend=backend, path="rl.sqlite3")
    folder.mkdir(exist_ok=True)
    return open_limiter(policy, folder)


@attrs.frozen
class Cost:
    """Seconds of wall time and of this process's CPU (every thread's) for some work."""

    wall: float = 0.0
    cpu: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.wall + other.wall, self.cpu + other.cpu)


@contextlib.contextmanager
def timing() -> Iterator[list[Cost]]:
    """Time the block; the cost is in the list's one item once it ends."""
    cost: list[Cost] = []
    wall, cpu = time.perf_counter(), time.process_time()
    yield cost
    cost.append(Cost(time.perf_counter() - wall, time.process_time() - cpu))


async def forge_acquires(backend: str, folder: Path, live: int, count: int) -> Cost:
    """The cost of ``count`` acquires on a fresh limiter whose log holds ``live`` permits."""
    rate_limiter = await trio.to_thread.run_sync(limiter, backend, folder)
    if live:
        await rate_limiter.acquire("prefill", permits=live)
    with timing() as cost:
        for _ in range(count):
            await rate_limiter.acquire("bench")
    used = (await rate_limiter.refresh()).used
    if used != live + count:
        raise SystemExit(f"{backend}: {used} permits in the log, expected {live + count}")
    return cost[0]


def deque_appends(count: int) -> Cost:
    log: collections.deque[float] = collections.deque()
    with timing() as cost:
        for _ in range(count):
            log.append(time.monotonic())
    return cost[0]


def bare_sqlite(path: Path, count: int) -> Cost:
    """The cost of ``count`` connect; BEGIN IMMEDIATE; INSERT; COMMIT; close."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE IF NOT EXISTS grants (at REAL NOT NULL, who TEXT)")
    with timing() as cost:
        for _ in range(count):
            connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("INSERT INTO grants (at, who) VALUES (?, ?)", (time.time(), "b"))
            connection.execute("COMMIT")
            connection.close()
    return cost[0]


def measure(
    backend: str,
    folder: Path,
    sizes: tuple[int, ...],
    args: argparse.Namespace,
    floor: tuple[str, Callable[[int, int], Cost]],
) -> None:
    """Print one backend's figures: µs per acquire at each K, ratios to K = 0, the goal.

    ``floor`` is a label and what it times (run number, acquires -> cost), for scale.
    """
    floor_label, floor_cost = floor
    count = args.acquires * args.rounds
    wall: dict[str | int, list[float]] = collections.defaultdict(list)
    cpu: dict[str | int, list[float]] = collections.defaultdict(list)
    fresh = iter(range(10**9))  # a folder of its own for every limiter
    # Untimed: the first limiter of a process pays for imports and the worker thread.
    trio.run(forge_acquires, backend, folder / f"{backend}-warm-up", 0, args.acquires)
    for run in range(args.runs):
        costs = collections.defaultdict[str | int, Cost](Cost)
        for _ in range(args.rounds):
            costs["floor"] += floor_cost(run, args.acquires)
            for live in sizes:
                where = folder / f"{backend}-{next(fresh)}"
                costs[live] += trio.run(forge_acquires, backend, where, live, args.acquires)
        for key, total in costs.items():
            wall[key].append(total.wall / count * 1e6)
            cpu[key].append(total.cpu / count * 1e6)
    runs = f"min/median/max of {args.runs} run{'s' if args.runs > 1 else ''}"
    heading = f"µs per acquire, {runs} of {count} acquires each"
    print(f"  {heading:53s}{'wall':>15s}{'CPU':>27s}")
    for key in ("floor", *sizes):
        label = floor_label if key == "floor" else f"forge, K = {key:,} live permits"
        figures = f"{spread(wall[key], '{:,.1f}'):>27s}{spread(cpu[key], '{:,.1f}'):>27s}"
        print(f"  {label:53s}{figures}")
    medians: list[float] = []
    for live in sizes[1:]:
        line = []
        for kind, figures in (("wall", wall), ("CPU", cpu)):
            ratios = [
                cost / empty for cost, empty in zip(figures[live], figures[sizes[0]], strict=True)
            ]
            line.append(f"{kind} {spread(ratios)}x")
            if live == sizes[-1]:
                medians.append(statistics.median(ratios))
        print(f"  ratio K = {live:,} to K = 0: {', '.join(line)}")
    met = max(medians) <= GOAL
    print(f"  goal: K = {sizes[-1]:,} within {GOAL:.1f}x of K = 0 (medians): {verdict(args, met)}")


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on, from /proc/mounts ("?" elsewhere)."""
    best, kind = "", "?"
    with contextlib.suppress(OSError), open("/proc/mounts") as mounts:
        for entry in mounts:
            _, point, fs_type, *_ = entry.split()
            if str(path).startswith(point.rstrip("/") + "/") and len(point) > len(best):
                best, kind = point, fs_type
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs each figure is spread over")
    parser.add_argument("--rounds", type=int, default=3, help="fresh limiters per size per run")
    parser.add_argument("--acquires", type=int, default=100, help="timed acquires per limiter")
    parser.add_argument("--dir", default=None, help="where the sqlite files go (default: tmp)")
    parser.add_argument("--no-tmpfs", action="store_true", help="skip the run in /dev/shm")
    args = parse_args(parser, runs=1, rounds=1, acquires=10, no_tmpfs=True)
    sizes = QUICK_SIZES if args.quick else SIZES

    print(f"machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}; ", end="")
    print(f"sqlite {sqlite3.sqlite_version}")
    print(f"calls {CALLS:.0e}, window {WINDOW.seconds:.0f} s: no acquire waits")

    with tempfile.TemporaryDirectory() as name:
        print("memory backend, 1 process")
        floor = ("for scale: deque.append", lambda _run, count: deque_appends(count))
        measure("memory", Path(name), sizes, args, floor)

    places = [args.dir]
    shm = Path("/dev/shm")
    if not args.no_tmpfs and shm.is_dir() and os.access(shm, os.W_OK):
        places.append(str(shm))  # no fsync cost: the bookkeeping alone
    for place in places:
        with tempfile.TemporaryDirectory(dir=place) as name:
            folder = Path(name)

            print(f"sqlite backend, 1 process, in {folder.parent} ({filesystem(folder)})")
            floor = (
                "for scale: connect; BEGIN IMMEDIATE; INSERT; COMMIT",
                lambda run, count, folder=folder: bare_sqlite(folder / f"bare-{run}", count),
            )
            measure("sqlite", folder, sizes, args, floor)


if __name__ == "__main__":
    main()
