"""The rolling-window rate limiter: arithmetic, FIFO service, events, backends.

Everything here runs on trio's MockClock (or a fake wall clock for sqlite):
nothing sleeps for real. The cross-process test is in test_ratelimit_processes.py.
"""

from __future__ import annotations

import math
import sqlite3
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import orchestra._ratelimit as ratelimit
from orchestra._durations import Duration
from orchestra._errors import ConfigError, StateError
from orchestra._policy import RateLimitPolicy
from orchestra._ratelimit import (
    BackendReading,
    LimiterStatistics,
    LimitTooLarge,
    MemoryBackend,
    RateLimiter,
    RateLimitStoreError,
    SlidingWindow,
    SqliteBackend,
    open_limiter,
    warn_threshold,
)

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None, max_examples=60)


def max_in_any_window(stamps: Sequence[float], window: float) -> int:
    """The most stamps any half-open span ``[a, a + window)`` holds.

    A busiest span can always be slid right until it starts at one of its stamps,
    so the spans starting at each stamp are the only ones to count.
    """
    ordered = sorted(stamps)
    busiest = 0
    for first, start in enumerate(ordered):
        inside = sum(1 for stamp in ordered[first:] if stamp < start + window)
        busiest = max(busiest, inside)
    return busiest


class RecordingBackend:
    """A memory backend that also remembers every permit it ever granted."""

    name = "recording"
    blocking = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self.inner = MemoryBackend(clock)
        self.clock = clock
        self.grants: list[float] = []

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        reading = self.inner.try_acquire(rule, permits, who)
        if reading.granted:
            self.grants.extend([self.clock()] * permits)
        return reading

    def peek(self, rule: SlidingWindow) -> BackendReading:
        return self.inner.peek(rule)

    def pause(self, seconds: float, reason: str) -> None:
        self.inner.pause(seconds, reason)


class Events:
    """Collects the limiter's events."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, LimiterStatistics]] = []

    def __call__(self, kind: str, stats: LimiterStatistics) -> None:
        self.seen.append((kind, stats))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.seen]

    def of(self, kind: str) -> list[LimiterStatistics]:
        return [stats for seen_kind, stats in self.seen if seen_kind == kind]


def memory_limiter(
    calls: int,
    window: float,
    warn_at: float = 0.8,
    *,
    on_event: Events | None = None,
    wall_clock: Callable[[], float] = lambda: 1_700_000_000.0,
) -> tuple[RateLimiter, RecordingBackend]:
    backend = RecordingBackend(trio.current_time)
    limiter = RateLimiter(
        backend,
        calls,
        window,
        warn_at,
        clock=trio.current_time,
        on_event=on_event,
        wall_clock=wall_clock,
    )
    return limiter, backend


# --- The pure arithmetic -------------------------------------------------------------


@DETERMINISTIC
@given(
    granted_at=st.floats(min_value=0, max_value=1e7, allow_nan=False),
    window=st.floats(min_value=1e-3, max_value=1e5, allow_nan=False),
)
def test_a_permit_frees_at_exactly_t_plus_window(granted_at: float, window: float) -> None:
    rule = SlidingWindow(calls=1, window=window)
    edge = granted_at + window
    just_before = math.nextafter(edge, -math.inf)

    refused = rule.take([granted_at], just_before)
    assert not refused.granted
    assert refused.wait == edge - just_before > 0
    assert rule.settle([granted_at], just_before) == (granted_at,)

    allowed = rule.take([granted_at], edge)
    assert allowed.granted
    assert allowed.live == (edge,)
    assert rule.settle([granted_at], edge) == ()


def test_the_wait_is_for_the_oldest_permits_that_must_free() -> None:
    rule = SlidingWindow(calls=3, window=10)
    live = (1.0, 2.0, 4.0)
    assert rule.wait_for(live, 5.0, 1) == 6.0  # the permit of t=1 frees at 11
    assert rule.wait_for(live, 5.0, 2) == 7.0  # and the one of t=2 at 12
    assert rule.wait_for(live, 5.0, 3) == 9.0
    assert rule.wait_for((), 5.0, 3) == 0.0
    assert rule.wait_for((), 5.0, 1, paused_until=8.0) == 3.0
    assert rule.wait_for(live, 5.0, 1, paused_until=8.0) == 6.0


def test_a_stamp_from_the_future_counts_as_now() -> None:
    # A wall clock that went back an hour: the permit is held one window from now.
    rule = SlidingWindow(calls=1, window=60)
    assert rule.settle([5000.0], 1400.0) == (1400.0,)
    assert rule.take([5000.0], 1400.0).wait == 60.0


@pytest.mark.parametrize(
    ("calls", "window", "field"),
    [(0, 1.0, "calls"), (True, 1.0, "calls"), (1, 0.0, "window"), (1, math.inf, "window")],
)
def test_the_rule_refuses_values_out_of_range(calls: int, window: float, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        SlidingWindow(calls=calls, window=window)


@DETERMINISTIC
@given(calls=st.integers(1, 200), warn_at=st.floats(0, 1))
def test_the_warn_threshold_is_the_smallest_count_at_the_share(calls: int, warn_at: float) -> None:
    threshold = warn_threshold(calls, warn_at)
    assert 1 <= threshold <= calls
    share = warn_at * calls
    assert threshold >= share - 1e-6
    assert threshold == 1 or threshold - 1 < share - 1e-6


def test_warn_threshold_is_not_fooled_by_float_products() -> None:
    assert 0.07 * 100 > 7  # the trap
    assert warn_threshold(100, 0.07) == 7
    assert warn_threshold(100, 0.57) == 57
    assert warn_threshold(100, 0.8) == 80
    assert warn_threshold(5, 0.0) == 1


# --- The limiter on the mock clock -----------------------------------------------------


@attrs.frozen
class Request:
    arrival: float
    permits: int
    cancel_after: float | None = None

    @property
    def cancel_at(self) -> float:
        return math.inf if self.cancel_after is None else self.arrival + self.cancel_after


@attrs.frozen
class Run:
    order: list[int]  # request indices, in the order acquire() was called
    granted: list[tuple[int, float]]  # (index, time), in the order acquire() returned
    cancelled: dict[int, float]
    backend_grants: list[float]  # every permit the backend handed out


def run_requests(calls: int, window: float, requests: Sequence[Request]) -> Run:
    order: list[int] = []
    granted: list[tuple[int, float]] = []
    cancelled: dict[int, float] = {}
    backend = RecordingBackend(trio.current_time)

    async def one(limiter: RateLimiter, index: int, request: Request) -> None:
        await trio.sleep_until(request.arrival)
        with trio.move_on_at(request.cancel_at) as scope:
            order.append(index)
            await limiter.acquire(f"task-{index}", request.permits)
            granted.append((index, trio.current_time()))
        if scope.cancelled_caught:
            cancelled[index] = trio.current_time()

    async def main() -> None:
        limiter = RateLimiter(backend, calls, window, clock=trio.current_time)
        async with trio.open_nursery() as nursery:
            for index, request in enumerate(requests):
                nursery.start_soon(one, limiter, index, request)
        assert limiter.statistics().tasks_waiting == 0

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return Run(order, granted, cancelled, backend.grants)


def earliest_grant(
    stamps: Sequence[float], start: float, permits: int, rule: SlidingWindow
) -> float:
    """Brute force: the first instant from ``start`` with room for ``permits``."""
    candidates = sorted({start} | {s + rule.window for s in stamps if s + rule.window > start})
    for moment in candidates:
        in_use = sum(1 for s in stamps if s <= moment < s + rule.window)
        if in_use + permits <= rule.calls:
            return moment
    raise AssertionError("unreachable: every permit frees eventually")


def reference_schedule(
    rule: SlidingWindow, requests: Sequence[Request], order: Sequence[int]
) -> dict[int, float | None]:
    """When each request should be granted (None: cancelled first), served in ``order``."""
    stamps: list[float] = []
    line_free_at = 0.0  # when the previous head of the line left it
    schedule: dict[int, float | None] = {}
    for index in order:
        request = requests[index]
        start = max(request.arrival, line_free_at)
        if request.cancel_at < start:  # cancelled while queued behind others
            schedule[index] = None
            continue
        grant = earliest_grant(stamps, start, request.permits, rule)
        if request.cancel_at < grant:  # cancelled at the head of the line
            schedule[index] = None
            line_free_at = request.cancel_at
            continue
        stamps.extend([grant] * request.permits)
        schedule[index] = grant
        line_free_at = grant
    return schedule


def check_invariants(run: Run, calls: int, window: float, requests: Sequence[Request]) -> None:
    # Never more than `calls` permits in any span of `window`.
    assert max_in_any_window(run.backend_grants, window) <= calls
    # Served first come, first served: grants keep the order of arrival.
    granted_indices = [index for index, _ in run.granted]
    assert granted_indices == [index for index in run.order if index not in run.cancelled]
    assert [time for _, time in run.granted] == sorted(time for _, time in run.granted)
    # Every request was either served or cancelled, and only served ones consumed.
    assert set(granted_indices) | set(run.cancelled) == set(range(len(requests)))
    assert not set(granted_indices) & set(run.cancelled)
    expected_permits = sorted(
        time for index, time in run.granted for _ in range(requests[index].permits)
    )
    assert sorted(run.backend_grants) == expected_permits


WINDOWS = st.sampled_from([1.0, 2.5, 60.0, 3600.0])


@st.composite
def grid_scenarios(draw: st.DrawFn) -> tuple[int, float, list[Request]]:
    """Arrivals on a grid of window/8 and cancellations half a step off it.

    Every time involved is then exact in binary floating point, and no
    cancellation can tie with a grant, so the schedule is fully determined.
    """
    calls = draw(st.integers(1, 4))
    window = draw(WINDOWS)
    step = window / 8
    requests = draw(
        st.lists(
            st.builds(
                Request,
                arrival=st.integers(0, 24).map(lambda k: k * step),
                permits=st.integers(1, calls),
                cancel_after=st.none() | st.integers(0, 24).map(lambda k: k * step + step / 2),
            ),
            min_size=1,
            max_size=12,
        )
    )
    return calls, window, requests


@DETERMINISTIC
@given(grid_scenarios())
def test_grants_follow_the_reference_schedule(scenario: tuple[int, float, list[Request]]) -> None:
    calls, window, requests = scenario
    run = run_requests(calls, window, requests)
    check_invariants(run, calls, window, requests)
    expected = reference_schedule(SlidingWindow(calls, window), requests, run.order)
    actual: dict[int, float | None] = dict(run.granted)
    actual.update(dict.fromkeys(run.cancelled))
    assert actual == expected
    for index, cancelled_at in run.cancelled.items():
        assert cancelled_at == requests[index].cancel_at


@DETERMINISTIC
@given(
    calls=st.integers(1, 5),
    window=st.floats(min_value=0.01, max_value=5000, allow_nan=False),
    shape=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=3, allow_nan=False),  # arrival, in windows
            st.integers(1, 5),
            st.none() | st.floats(min_value=0, max_value=3, allow_nan=False),  # patience
        ),
        min_size=1,
        max_size=15,
    ),
)
def test_no_window_ever_holds_more_than_calls(
    calls: int, window: float, shape: list[tuple[float, int, float | None]]
) -> None:
    requests = [
        Request(
            arrival=arrival * window,
            permits=min(permits, calls),
            cancel_after=None if patience is None else patience * window,
        )
        for arrival, permits, patience in shape
    ]
    run = run_requests(calls, window, requests)
    check_invariants(run, calls, window, requests)


async def test_the_edge_of_the_window(autojump_clock: trio.testing.MockClock) -> None:
    limiter, backend = memory_limiter(calls=2, window=10.0)
    await limiter.acquire("a", 2)
    with trio.move_on_at(math.nextafter(10.0, 0)) as scope:
        await limiter.acquire("b")
    assert scope.cancelled_caught
    assert limiter.statistics().used == 2
    await limiter.acquire("b")
    assert trio.current_time() == 10.0
    assert backend.grants == [0.0, 0.0, 10.0]


async def test_a_request_larger_than_the_limit_is_refused_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter, backend = memory_limiter(calls=3, window=60.0)
    await limiter.acquire("a", 2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(limiter.acquire, "b", 3)  # waits for the window
        await trio.sleep(1)
        before = limiter.statistics()
        with pytest.raises(LimitTooLarge) as refused:
            await limiter.acquire("greedy", 4)
        assert trio.current_time() == 1.0
        assert limiter.statistics() == before
        assert before.tasks_waiting == 1
    assert backend.grants == [0.0, 0.0, 60.0, 60.0, 60.0]
    assert isinstance(refused.value, ValueError)
    assert isinstance(refused.value, ConfigError)
    assert "4 permits" in refused.value.render()
    with pytest.raises(ValueError, match="permits"):
        await limiter.acquire("nothing", 0)


async def test_a_cancelled_waiter_does_not_hold_up_those_behind(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter, backend = memory_limiter(calls=1, window=10.0)
    served: dict[str, float] = {}

    async def wait_for_turn(who: str, arrive: float, give_up: float = math.inf) -> None:
        await trio.sleep_until(arrive)
        with trio.move_on_at(give_up):
            await limiter.acquire(who)
            served[who] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_for_turn, "holder", 0)
        nursery.start_soon(wait_for_turn, "impatient", 1, 5)  # head of the line, gives up
        nursery.start_soon(wait_for_turn, "patient", 2)
        nursery.start_soon(wait_for_turn, "late", 3)
        await trio.sleep(4)
        assert limiter.statistics().tasks_waiting == 3
        await trio.sleep(2)
        assert limiter.statistics().tasks_waiting == 2
    assert served == {"holder": 0.0, "patient": 10.0, "late": 20.0}
    assert backend.grants == [0.0, 10.0, 20.0]


async def test_a_small_request_does_not_overtake_a_large_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    limiter, _ = memory_limiter(calls=3, window=10.0)
    served: dict[str, float] = {}

    async def take(who: str, arrive: float, permits: int) -> None:
        await trio.sleep_until(arrive)
        await limiter.acquire(who, permits)
        served[who] = trio.current_time()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, "first", 0, 2)
        nursery.start_soon(take, "large", 1, 3)
        nursery.start_soon(take, "small", 2, 1)  # would fit at t=2, but arrived later
    assert served == {"first": 0.0, "large": 10.0, "small": 20.0}


async def test_one_warning_when_use_reaches_warn_at(autojump_clock: trio.testing.MockClock) -> None:
    events = Events()
    limiter, _ = memory_limiter(calls=10, window=60.0, warn_at=0.8, on_event=events)
    for _ in range(8):
        await limiter.acquire("a")
    assert events.kinds() == ["warn"]
    (warning,) = events.of("warn")
    assert (warning.used, warning.remaining, warning.warned) == (8, 2, True)
    await limiter.acquire("a", 2)
    assert events.kinds() == ["warn"]  # still above: no second warning
    assert limiter.statistics().warned

    await trio.sleep(60)  # the window empties; the next reading re-arms the warning
    for _ in range(7):
        await limiter.acquire("a")
    assert not limiter.statistics().warned
    await limiter.acquire("a")
    assert events.kinds() == ["warn", "warn"]


@DETERMINISTIC
@given(calls=st.integers(1, 30), warn_at=st.floats(0, 1))
def test_filling_the_window_warns_once_at_the_threshold(calls: int, warn_at: float) -> None:
    events = Events()

    async def main() -> None:
        limiter, _ = memory_limiter(calls=calls, window=60.0, warn_at=warn_at, on_event=events)
        for _ in range(calls):
            await limiter.acquire("a")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [stats.used for stats in events.of("warn")] == [warn_threshold(calls, warn_at)]


async def test_a_caller_that_must_wait_is_announced_with_its_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events = Events()
    limiter, _ = memory_limiter(calls=1, window=10.0, warn_at=1.0, on_event=events)
    await limiter.acquire("a")
    await trio.sleep(3)
    await limiter.acquire("b")
    assert trio.current_time() == 10.0
    (waiting,) = events.of("wait")
    assert waiting.head_wait == 7.0
    assert waiting.next_free_in == 7.0
    assert waiting.tasks_waiting == 1
    assert (waiting.used, waiting.remaining) == (1, 0)
    # One announcement per waiting caller, however many times it re-checks.
    await limiter.acquire("c")
    assert trio.current_time() == 20.0
    assert [stats.head_wait for stats in events.of("wait")] == [7.0, 10.0]


async def test_statistics_age_with_the_clock(autojump_clock: trio.testing.MockClock) -> None:
    limiter, _ = memory_limiter(calls=3, window=30.0)
    empty = limiter.statistics()
    assert (empty.used, empty.remaining, empty.next_free_in, empty.head_wait) == (0, 3, 0.0, 0.0)
    await limiter.acquire("a", 2)
    await trio.sleep(10)
    await limiter.acquire("b")
    full = limiter.statistics()
    assert (full.used, full.remaining, full.next_free_in) == (3, 0, 20.0)
    assert (full.calls, full.window, full.paused_until, full.pause_reason) == (3, 30.0, None, None)
    await trio.sleep(20)
    assert (limiter.statistics().used, limiter.statistics().remaining) == (1, 2)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        full.used = 0  # type: ignore[misc]  # the point: a snapshot cannot be changed


async def test_pause_until_delays_everyone(autojump_clock: trio.testing.MockClock) -> None:
    events = Events()
    epoch = 1_700_000_000.0
    limiter, backend = memory_limiter(
        calls=5,
        window=10.0,
        on_event=events,
        wall_clock=lambda: epoch + trio.current_time(),
    )
    served: list[float] = []

    async def take(arrive: float) -> None:
        await trio.sleep_until(arrive)
        await limiter.acquire(f"at-{arrive}")
        served.append(trio.current_time())

    await trio.sleep(1)
    await limiter.pause_until(epoch + 60, "429 from the provider")
    paused = limiter.statistics()
    assert paused.paused_until == epoch + 60
    assert paused.pause_reason == "429 from the provider"
    assert paused.next_free_in == 59.0
    assert paused.remaining == 5  # the window has room; the pause alone holds us
    await limiter.pause_until(epoch + 30, "an earlier reset never shortens a pause")
    assert limiter.statistics().pause_reason == "429 from the provider"
    async with trio.open_nursery() as nursery:
        for arrive in (2.0, 3.0, 40.0):
            nursery.start_soon(take, arrive)
    assert served == [60.0, 60.0, 60.0]
    assert backend.grants == [60.0, 60.0, 60.0]
    assert events.kinds().count("pause") == 2
    assert events.of("wait")[0].head_wait == 58.0
    after = limiter.statistics()
    assert (after.paused_until, after.pause_reason) == (None, None)
    await limiter.pause_until(epoch, "in the past")  # ignored
    assert limiter.statistics().paused_until is None
    with pytest.raises(ValueError, match="wall_epoch"):
        await limiter.pause_until(math.nan, "nonsense")


class CancelledMidTransaction:
    """A blocking backend that grants while its caller is being cancelled."""

    name = "cancelled-mid-transaction"
    blocking = True

    def __init__(self) -> None:
        self.scope = trio.CancelScope()

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        trio.from_thread.run_sync(self.scope.cancel)
        return BackendReading(granted=True, wait=0.0, used=permits, oldest=((0.0, permits),))

    def peek(self, rule: SlidingWindow) -> BackendReading:
        raise NotImplementedError

    def pause(self, seconds: float, reason: str) -> None:
        raise NotImplementedError


async def test_a_permit_granted_as_the_caller_is_cancelled_reaches_it() -> None:
    backend = CancelledMidTransaction()
    limiter = RateLimiter(backend, 1, 10.0, clock=trio.current_time)
    returned = False
    with backend.scope:
        await limiter.acquire("a")
        returned = True
        await trio.lowlevel.checkpoint()  # where the cancellation lands
    assert returned
    assert backend.scope.cancelled_caught
    assert limiter.statistics().used == 1


def test_the_limiter_refuses_bad_settings() -> None:
    backend = MemoryBackend(lambda: 0.0)
    with pytest.raises(ValueError, match=r"^calls: "):
        RateLimiter(backend, 0, 10.0, clock=lambda: 0.0)
    with pytest.raises(ValueError, match=r"^window: "):
        RateLimiter(backend, 1, -1.0, clock=lambda: 0.0)
    with pytest.raises(ValueError, match=r"^warn_at: "):
        RateLimiter(backend, 1, 10.0, 1.5, clock=lambda: 0.0)
    limiter = RateLimiter(backend, 1, Duration(3600), clock=lambda: 0.0)
    assert limiter.rule == SlidingWindow(1, 3600.0)


# --- The sqlite backend ------------------------------------------------------------------


class FakeWallClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_sqlite_counts_calls_made_before_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ratelimit.sqlite3"
    clock = FakeWallClock()
    rule = SlidingWindow(calls=3, window=3600)
    first = SqliteBackend.open(path, clock=clock)
    assert first.try_acquire(rule, 2, "a").granted
    clock.now += 100
    assert first.try_acquire(rule, 1, "b").granted
    del first

    clock.now += 500
    restarted = SqliteBackend.open(path, clock=clock)
    refused = restarted.try_acquire(rule, 1, "c")
    assert not refused.granted
    assert (refused.used, refused.oldest) == (3, ((600.0, 2), (500.0, 1)))
    assert refused.next_free == 3000.0
    assert refused.wait == 3000.0
    clock.now += 3000
    assert restarted.try_acquire(rule, 2, "c").granted
    assert restarted.count_rows() == 3  # the two permits that left the window are pruned


def test_sqlite_frees_a_permit_at_exactly_t_plus_window(tmp_path: Path) -> None:
    clock = FakeWallClock(1_700_000_000.1)
    rule = SlidingWindow(calls=1, window=0.3)
    backend = SqliteBackend.open(tmp_path / "log.sqlite3", clock=clock)
    assert backend.try_acquire(rule, 1, "a").granted
    edge = 1_700_000_000.1 + 0.3
    clock.now = math.nextafter(edge, 0)
    assert not backend.try_acquire(rule, 1, "b").granted
    assert backend.count_rows() == 1
    clock.now = edge
    assert backend.try_acquire(rule, 1, "b").granted
    assert backend.count_rows() == 1


def test_sqlite_after_the_wall_clock_went_back(tmp_path: Path) -> None:
    clock = FakeWallClock(1_700_005_000.0)
    rule = SlidingWindow(calls=1, window=60)
    backend = SqliteBackend.open(tmp_path / "log.sqlite3", clock=clock)
    assert backend.try_acquire(rule, 1, "a").granted
    clock.now -= 3600
    refused = backend.try_acquire(rule, 1, "b")
    assert refused.wait == 60.0  # one window from now, not an hour and a window
    clock.now += 60
    assert backend.try_acquire(rule, 1, "b").granted


def test_sqlite_pause_is_shared_and_never_shortened(tmp_path: Path) -> None:
    clock = FakeWallClock()
    rule = SlidingWindow(calls=5, window=60)
    path = tmp_path / "log.sqlite3"
    one, other = SqliteBackend.open(path, clock=clock), SqliteBackend.open(path, clock=clock)
    one.pause(120, "429")
    other.pause(30, "shorter")
    seen = other.peek(rule)
    assert (seen.paused_for, seen.pause_reason, seen.wait) == (120.0, "429", 120.0)
    refused = other.try_acquire(rule, 1, "b")
    assert (refused.granted, refused.wait) == (False, 120.0)
    clock.now += 120
    assert other.try_acquire(rule, 1, "b").granted
    assert one.peek(rule).paused_for == 0.0


def test_sqlite_refuses_a_request_too_large_without_writing(tmp_path: Path) -> None:
    backend = SqliteBackend.open(tmp_path / "log.sqlite3", clock=FakeWallClock())
    with pytest.raises(LimitTooLarge):
        backend.try_acquire(SlidingWindow(calls=2, window=60), 3, "greedy")
    assert backend.count_rows() == 0


def test_a_corrupt_log_is_reported_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ratelimit.sqlite3"
    garbage = b"this is not a database, it is a shopping list\n" * 40
    path.write_bytes(garbage)
    with pytest.raises(RateLimitStoreError) as caught:
        SqliteBackend.open(path)
    assert isinstance(caught.value, StateError)
    assert caught.value.path == path
    assert "corrupt" in caught.value.message
    assert str(path) in caught.value.render()
    assert path.read_bytes() == garbage


def test_a_log_damaged_while_in_use_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "ratelimit.sqlite3"
    backend = SqliteBackend.open(path, clock=FakeWallClock())
    rule = SlidingWindow(calls=5, window=60)
    assert backend.try_acquire(rule, 1, "a").granted
    damaged = b"\x00" * 16 + path.read_bytes()[16:]  # the header of the file, wiped
    path.write_bytes(damaged)
    with pytest.raises(RateLimitStoreError, match="corrupt") as caught:
        backend.try_acquire(rule, 1, "b")
    assert caught.value.path == path
    assert path.read_bytes() == damaged


def test_a_deleted_log_is_not_silently_recreated(tmp_path: Path) -> None:
    path = tmp_path / "ratelimit.sqlite3"
    backend = SqliteBackend.open(path, clock=FakeWallClock())
    path.unlink()
    with pytest.raises(RateLimitStoreError):
        backend.peek(SlidingWindow(calls=5, window=60))
    assert not path.exists()


def test_another_sqlite_database_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE customers (name TEXT)")
    connection.commit()
    connection.close()
    with pytest.raises(RateLimitStoreError, match="not a Forge rate-limit log"):
        SqliteBackend.open(path)
    connection = sqlite3.connect(path)
    tables = connection.execute("SELECT name FROM sqlite_master").fetchall()
    connection.close()
    assert tables == [("customers",)]


def test_a_log_from_a_newer_forge_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ratelimit.sqlite3"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {ratelimit.SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(RateLimitStoreError, match="schema version"):
        SqliteBackend.open(path)


async def test_the_limiter_over_sqlite_waits_on_trio_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The backend's wall clock follows the mock clock, so waits are virtual.
    def wall_clock() -> float:
        return 1_700_000_000.0 + autojump_clock.current_time()

    backend = SqliteBackend.open(tmp_path / "log.sqlite3", clock=wall_clock)
    events = Events()
    limiter = RateLimiter(backend, 2, 3600.0, 0.5, clock=trio.current_time, on_event=events)
    await limiter.acquire("a", 2)
    await trio.sleep(600)
    await limiter.acquire("b")
    assert trio.current_time() == 3600.0
    # The window emptied before "b" was served: use crossed 1 (half of 2) again.
    assert events.kinds() == ["warn", "wait"]  # one warning: a dip below it does not re-arm
    assert events.of("wait")[0].head_wait == 3000.0

    restarted = RateLimiter(
        SqliteBackend.open(backend.path, clock=wall_clock),  # the same file, reopened
        2,
        3600.0,
        clock=trio.current_time,
    )
    assert restarted.statistics().used == 0  # nothing read yet
    assert (await restarted.refresh()).used == 1


def test_open_limiter_follows_the_policy(tmp_path: Path) -> None:
    sqlite_limiter = open_limiter(RateLimitPolicy(calls=7, window=Duration(90)), tmp_path)
    assert isinstance(sqlite_limiter.backend, SqliteBackend)
    assert sqlite_limiter.backend.path == tmp_path / ".forge" / "ratelimit.sqlite3"
    assert sqlite_limiter.backend.path.is_file()
    assert sqlite_limiter.rule == SlidingWindow(7, 90.0)

    memory = open_limiter(RateLimitPolicy(backend="memory"), tmp_path)
    assert isinstance(memory.backend, MemoryBackend)
    assert memory.rule == SlidingWindow(100, 3600.0)

    elsewhere = tmp_path / "shared" / "limits.sqlite3"
    absolute = open_limiter(RateLimitPolicy(path=str(elsewhere)), tmp_path / "project")
    assert isinstance(absolute.backend, SqliteBackend)
    assert absolute.backend.path == elsewhere

    redis = cast(RateLimitPolicy, types.SimpleNamespace(backend="redis"))
    with pytest.raises(ConfigError, match="redis"):
        open_limiter(redis, tmp_path)


def test_the_exported_names() -> None:
    public = {name for name in dir(ratelimit) if not name.startswith("_")}
    assert public == {
        "SCHEMA_VERSION",
        "OLDEST_REPORTED",
        "BackendReading",
        "Decision",
        "EventHandler",
        "LimitTooLarge",
        "LimiterStatistics",
        "MemoryBackend",
        "RateLimitBackend",
        "RateLimitStoreError",
        "RateLimiter",
        "SlidingWindow",
        "SqliteBackend",
        "open_limiter",
        "warn_threshold",
    }
