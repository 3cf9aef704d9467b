"""The log as an array (orchestra/_ratelimit/_log.py) and the sqlite log's copy of it.

What is proven here: the array holds exactly what :meth:`SlidingWindow.settle`
would, a reading's bounded summary aged by the limiter's clock says what
settling the whole log would, the sqlite backend's in-process copy
always agrees with the file (several writers, shorter windows, a clock that
went back, an older Forge's schema), and an acquisition does not walk the
window (counted in operations, never timed).
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._ratelimit import (
    MemoryBackend,
    RateLimiter,
    SlidingWindow,
    SqliteBackend,
    _log,
    _sqlite,
)
from orchestra._ratelimit._backends import OLDEST_REPORTED, log_reading
from orchestra._ratelimit._log import StampLog, seen_use

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=60)
# Steps of a log's life: (seconds the clock moves, negative when it goes back; permits).
STEPS = st.lists(
    st.tuples(
        st.one_of(st.floats(-30, 30, allow_nan=False), st.sampled_from([0.0, 10.0, -10.0])),
        st.integers(0, 3),
    ),
    max_size=40,
)


@DETERMINISTIC
@given(window=st.sampled_from([1.0, 10.0, 25.5]), steps=STEPS)
def test_the_array_holds_what_settle_would(window: float, steps: list[tuple[float, int]]) -> None:
    rule = SlidingWindow(calls=10**6, window=window)
    log = StampLog()
    reference: tuple[float, ...] = ()
    now = 1000.0
    with mock.patch.object(_log, "_COMPACT_AFTER", 2):  # compact often
        for moved, permits in steps:
            now += moved
            log.settle(window, now)
            reference = rule.settle(reference, now)
            assert tuple(log) == reference
            assert len(log) == len(reference)
            if reference:
                assert (log[0], log[-1], log.newest) == (reference[0], reference[-1], reference[-1])
            if permits:
                log.append(now, permits)
                reference = reference + (now,) * permits


def test_a_log_reads_like_a_tuple_and_only_grows_at_its_end() -> None:
    log = StampLog([3.0, 1.0, 2.0])
    assert (log[0], log[-1], log[1:]) == (1.0, 3.0, [2.0, 3.0])
    with pytest.raises(IndexError):
        _ = log[3]
    with pytest.raises(ValueError, match="before the newest"):
        log.append(2.5, 1)


def runs_of(ages: tuple[float, ...]) -> tuple[tuple[float, int], ...]:
    """Equal ages side by side, counted: (age, how many), in the order given."""
    runs: list[tuple[float, int]] = []
    for age in ages:
        if runs and runs[-1][0] == age:
            runs[-1] = (age, runs[-1][1] + 1)
        else:
            runs.append((age, 1))
    return tuple(runs)


# Quarters of a second: exact in binary, so that an age read back as a stamp is that stamp.
QUARTERS = st.integers(0, 480).map(lambda quarters: quarters / 4)


@DETERMINISTIC
@given(
    ages=st.lists(QUARTERS, max_size=2 * OLDEST_REPORTED + 5),
    calls=st.integers(1, 40),
    window=QUARTERS.filter(lambda window: window > 0),
    later=QUARTERS,
)
def test_a_reading_aged_by_the_clock_is_what_settling_the_log_would_say(
    ages: list[float], calls: int, window: float, later: float
) -> None:
    rule = SlidingWindow(calls=calls, window=window)
    seen_at = 500.0
    log = StampLog(seen_at - age for age in ages)
    log.settle(window, seen_at)
    reading = log_reading(False, rule, log, seen_at, 0.0, None, "")
    assert reading.oldest == runs_of(tuple(seen_at - stamp for stamp in log))[:OLDEST_REPORTED]
    now = seen_at + later
    live = rule.settle(log, now)
    seen = reading.used, reading.oldest, reading.next_free
    used, next_free = seen_use(*seen, seen_at, now, window)
    if len(set(log)) <= OLDEST_REPORTED:
        assert used == len(live)
    else:  # past the reported oldest, use stays as read: never under the truth
        assert len(live) <= used <= reading.used
    assert next_free == rule.wait_for(live, now, 1)


class CountingFloat(float):
    """A float that counts the additions made with it: how much of a log was read."""

    additions = 0

    def __add__(self, other: float) -> float:
        CountingFloat.additions += 1
        return float(self) + other


def test_an_acquisition_does_not_walk_the_window() -> None:
    ticks = iter(range(10**6))
    backend = MemoryBackend(lambda: CountingFloat(1000.0 + next(ticks) * 1e-3))
    rule = SlidingWindow(calls=10**6, window=3600)
    assert backend.try_acquire(rule, 10_000, "prefill").granted
    CountingFloat.additions = 0
    reading = backend.try_acquire(rule, 1, "one more")
    assert reading.granted
    assert reading.used == 10_001
    (_, prefilled), newest = reading.oldest  # two instants: oldest first
    assert (prefilled, newest) == (10_000, (0.0, 1))
    # A bisection of 10,000 stamps, not one addition per permit.
    assert CountingFloat.additions < 64


async def test_statistics_of_a_large_window_age_with_the_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter = RateLimiter(MemoryBackend(trio.current_time), 10**6, 60.0, clock=trio.current_time)
    await limiter.acquire("a", 10_000)
    await trio.sleep(30)
    await limiter.acquire("b", 5)
    assert limiter.statistics().used == 10_005
    await trio.sleep(30)
    assert limiter.statistics().used == 5  # the first 10,000 left at exactly 60 s
    assert limiter.statistics().next_free_in == 0.0


# --- The sqlite log's copy --------------------------------------------------------------


@contextlib.contextmanager
def quick_folder() -> Iterator[Path]:
    """A fresh folder, in memory when the machine has one (a commit then costs no fsync)."""
    shm = Path("/dev/shm")
    place = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=place) as name:
        yield Path(name)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def rows_at(path: Path) -> list[float]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return [at for (at,) in connection.execute("SELECT at FROM grants ORDER BY at")]


# One step: which writer, how far its clock moves (it may go back), its window, permits.
WRITERS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from([0.0, 0.5, 3.0, 7.0, -4.0]),
        st.sampled_from([10.0, 4.0]),
        st.integers(0, 3),
    ),
    max_size=14,
)


@settings(derandomize=True, database=None, deadline=None, max_examples=25)
@given(steps=WRITERS)
def test_the_copy_of_each_writer_agrees_with_the_file(
    steps: list[tuple[int, float, float, int]],
) -> None:
    with quick_folder() as folder:
        path = folder / "log.sqlite3"
        clocks = [Clock(1_700_000_000.0) for _ in range(3)]
        writers = [SqliteBackend.open(path, clock=clock) for clock in clocks]
        for who, moved, window, permits in steps:
            clocks[who].now += moved
            now = clocks[who].now
            rule = SlidingWindow(calls=6, window=window)
            live = rule.settle(rows_at(path), now)
            if permits:
                reading = writers[who].try_acquire(rule, permits, f"w{who}")
                assert reading.granted == (len(live) + permits <= rule.calls)
                if reading.granted:
                    live += (now,) * permits
            else:
                reading = writers[who].peek(rule)
            ages = tuple(now - stamp for stamp in live)
            assert reading.used == len(ages)
            assert reading.oldest == runs_of(ages)[:OLDEST_REPORTED]
            assert reading.next_free == rule.wait_for(live, now, 1)
            assert rows_at(path) == list(live)


def test_the_copy_is_caught_up_not_read_again(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    clock = Clock(1_700_000_000.0)
    one, other = SqliteBackend.open(path, clock=clock), SqliteBackend.open(path, clock=clock)
    rule = SlidingWindow(calls=100, window=60)
    assert one.try_acquire(rule, 40, "one").granted
    assert other.try_acquire(rule, 1, "other").granted  # reads the 40 once, whole
    with mock.patch.object(_sqlite, "StampLog", side_effect=AssertionError("read whole")):
        for _ in range(5):
            clock.now += 1
            assert one.try_acquire(rule, 1, "one").granted
            assert other.try_acquire(rule, 2, "other").granted
        assert one.peek(rule).used == 56


def test_a_row_written_outside_forge_still_counts(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    clock = Clock(1_700_000_000.0)
    backend = SqliteBackend.open(path, clock=clock)
    rule = SlidingWindow(calls=2, window=60)
    assert backend.try_acquire(rule, 1, "forge").granted
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("INSERT INTO grants (at, who) VALUES (?, 'by hand')", (clock.now,))
    refused = backend.try_acquire(rule, 1, "forge")
    assert not refused.granted
    assert (refused.used, refused.oldest) == (2, ((0.0, 2),))


def test_a_log_of_schema_version_1_is_brought_to_2_with_its_permits(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        for statement in (
            "CREATE TABLE grants (at REAL NOT NULL, who TEXT NOT NULL)",
            "CREATE INDEX grants_by_time ON grants (at)",
            "CREATE TABLE pause ("
            " id INTEGER PRIMARY KEY CHECK (id = 1), until REAL NOT NULL, reason TEXT NOT NULL)",
            "PRAGMA user_version = 1",
            "PRAGMA journal_mode=WAL",
        ):
            connection.execute(statement)
        connection.executemany(
            "INSERT INTO grants (at, who) VALUES (?, 'v1')",
            [(1_700_000_000.0,), (1_700_000_010.0,), (1_700_000_005.0,)],
        )
        connection.execute("INSERT INTO pause VALUES (1, 1700000030.0, '429')")
    clock = Clock(1_700_000_020.0)
    backend = SqliteBackend.open(path, clock=clock)
    reading = backend.peek(SlidingWindow(calls=5, window=60))
    assert (reading.used, reading.oldest) == (3, ((20.0, 1), (15.0, 1), (10.0, 1)))
    assert (reading.paused_for, reading.pause_reason) == (10.0, "429")
    with contextlib.closing(sqlite3.connect(path)) as connection:
        assert connection.execute("PRAGMA user_version").fetchone() == (_sqlite.SCHEMA_VERSION,)
        assert connection.execute("SELECT live FROM tally").fetchone() == (3,)
    clock.now += 10
    assert backend.try_acquire(SlidingWindow(calls=5, window=60), 2, "v2").granted
    assert not backend.try_acquire(SlidingWindow(calls=5, window=60), 1, "v2").granted


@pytest.mark.parametrize(
    ("statement", "uses"),
    [
        (_sqlite.PRUNE, "INDEX grants_by_time"),
        (_sqlite.REWRITE_LATER, "INDEX grants_by_time"),
        (_sqlite.ADDED_SINCE, "INTEGER PRIMARY KEY"),
    ],
)
def test_each_statement_on_the_grants_reads_an_index(
    tmp_path: Path, statement: str, uses: str
) -> None:
    path = tmp_path / "log.sqlite3"
    SqliteBackend.open(path)
    with contextlib.closing(sqlite3.connect(path)) as connection:
        plan = connection.execute(
            f"EXPLAIN QUERY PLAN {statement}", (1.0,) * statement.count("?")
        ).fetchall()
    (step,) = [detail for *_, detail in plan]
    assert step.startswith("SEARCH"), step
    assert uses in step, step


@DETERMINISTIC
@given(
    granted=st.floats(1e9, 2e9, allow_nan=False),
    window=st.one_of(st.floats(1e-3, 1e6, allow_nan=False), st.sampled_from([0.3, 3600.0])),
    nudge=st.integers(-3, 3),
)
def test_the_prune_bound_covers_every_expired_permit(
    granted: float, window: float, nudge: int
) -> None:
    now = granted + window
    for _ in range(abs(nudge)):
        now = math.nextafter(now, math.inf if nudge > 0 else -math.inf)
    if granted + window <= now:
        assert granted <= _sqlite._expiry_bound(now, window)


def test_rows_pruned_by_a_writer_on_a_shorter_window_leave_every_copy(tmp_path: Path) -> None:
    path = tmp_path / "log.sqlite3"
    clock = Clock(1_700_000_000.0)
    hourly, minutely = SqliteBackend.open(path, clock=clock), SqliteBackend.open(path, clock=clock)
    assert hourly.try_acquire(SlidingWindow(calls=5, window=3600), 2, "hourly").granted
    clock.now += 120
    assert minutely.peek(SlidingWindow(calls=5, window=60)).used == 0  # pruned both
    assert hourly.peek(SlidingWindow(calls=5, window=3600)).oldest == ()


def test_rows_rewritten_by_a_writer_whose_clock_is_behind_reach_every_copy(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.sqlite3"
    ahead, behind = Clock(1_700_000_100.0), Clock(1_700_000_000.0)
    one, other = SqliteBackend.open(path, clock=ahead), SqliteBackend.open(path, clock=behind)
    rule = SlidingWindow(calls=5, window=3600)
    assert one.try_acquire(rule, 1, "ahead").granted
    assert other.peek(rule).oldest == ((0.0, 1),)  # rewrote it to its own now
    assert one.peek(rule).oldest == ((100.0, 1),)
