"""The async limiter every loop calls before it starts an executor.

One :class:`RateLimiter` per supervisor serves its trio tasks first come, first
served; the backend under it is what processes (and, with Redis, machines)
share. Waiting is done on trio's clock, so a one-hour window is tested in
milliseconds with ``trio.testing.MockClock``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, TypeVarTuple

import attrs
import trio

from .._durations import Duration
from .._errors import ConfigError
from ._backends import BackendReading, MemoryBackend, RateLimitBackend
from ._log import seen_use
from ._sqlite import SqliteBackend
from ._window import SlidingWindow, warn_threshold

if TYPE_CHECKING:
    from .._policy import RateLimitPolicy

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


@attrs.frozen
class LimiterStatistics:
    """A snapshot of a limiter, as last seen from its backend.

    Between two readings the last one is aged on the limiter's clock: the
    permits it reported among the oldest leave ``used`` as they leave the
    window. Exact while the window holds no more grant instants than a reading
    reports (:data:`~._backends.OLDEST_REPORTED`); past them, ``used`` stays as
    read until the next reading, which every acquire and :meth:`RateLimiter.refresh` make.

    Attributes:
        calls: Permits allowed in any window.
        window: The window in seconds.
        used: Permits in use now (granted less than ``window`` ago).
        remaining: Permits that could be granted now, pause aside.
        next_free_in: Seconds until one permit can be granted (0: now); this
            includes a provider's pause.
        tasks_waiting: Tasks inside :meth:`RateLimiter.acquire` not yet served.
        head_wait: Seconds the task at the head of the line still expects to
            wait (0 when nobody is held back).
        warned: Whether the ``warn_at`` warning has fired and use has not been
            seen below the threshold since.
        paused_until: Wall-clock epoch at which a provider's pause ends, or None.
        pause_reason: Why the provider paused us, or None.
        unavailable: Why the shared log cannot be reached (no permit is
            granted until it can), or None.
    """

    calls: int
    window: float
    used: int
    remaining: int
    next_free_in: float
    tasks_waiting: int
    head_wait: float
    warned: bool
    paused_until: float | None
    pause_reason: str | None
    unavailable: str | None = None


EventHandler = Callable[[str, LimiterStatistics], None]


def _wake_time(now: float, wait: float) -> float:
    """The deadline ``wait`` seconds after ``now``, at least one tick later.

    A wait shorter than the clock's resolution would otherwise round to ``now``;
    under a mock clock that never advances on its own the limiter would spin.
    """
    deadline = now + wait
    return deadline if deadline > now else math.nextafter(now, math.inf)


class RateLimiter:
    """A rolling-window limiter: at most ``calls`` permits in any ``window`` seconds.

    Tasks are served first come, first served. A task that is cancelled while
    it waits leaves the line without taking a permit, and the task behind it
    moves up. Since other processes may share the backend, a waiting task asks
    the backend again after every sleep instead of trusting its own arithmetic.

    Events go to ``on_event(kind, statistics)``, called synchronously (an
    exception it raises propagates out of the call that emitted the event):

    - ``"warn"``: use reached ``warn_at`` of ``calls``; once, re-armed after use
      is seen below that again.
    - ``"wait"``: the task at the head of the line must wait; once per
      :meth:`acquire`, the expected wait in ``statistics.head_wait``.
    - ``"pause"``: :meth:`pause_until` paused every acquirer.
    - ``"unavailable"``: the backend's shared log cannot be reached (no permit
      until it can); once per outage, ``statistics.unavailable`` says why.

    Args:
        backend: Where the log lives (:class:`MemoryBackend`, :class:`SqliteBackend` …).
        calls: Permits allowed in any window; at least 1.
        window: The window, in seconds or as a :class:`Duration`.
        warn_at: Share of ``calls`` in use at which one ``"warn"`` event fires.
        clock: The monotonic clock statistics are computed on (``trio.current_time``).
            Sleeps always use trio's own clock.
        on_event: Receives the events above.
        wall_clock: Wall-clock epoch seconds, to read :meth:`pause_until`'s argument.

    Raises:
        ValueError: naming the argument, for a value out of range.
    """

    def __init__(
        self,
        backend: RateLimitBackend,
        calls: int,
        window: float | Duration,
        warn_at: float = 0.8,
        *,
        clock: Callable[[], float],
        on_event: EventHandler | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        seconds = window.seconds if isinstance(window, Duration) else window
        self._rule = SlidingWindow(calls, seconds)
        if not 0.0 <= warn_at <= 1.0:
            raise ValueError(f"warn_at: expected a number from 0 to 1, got {warn_at!r}")
        self.backend = backend
        self._threshold = warn_threshold(calls, warn_at)
        self._clock = clock
        self._wall_clock = wall_clock
        self._on_event = on_event
        # trio.Lock is fair: ownership passes to waiters in the order they arrived,
        # and a cancelled waiter leaves the queue. That is exactly FIFO service.
        self._turn = trio.Lock()
        self._waiting = 0
        self._head_ready_at: float | None = None
        self._warned = False
        # The log as last read from the backend (a bounded summary, at `clock`'s
        # `_seen_at`), kept as read: what statistics() reports, aged to its own now.
        self._seen = BackendReading(granted=False, wait=0.0)
        self._seen_at = 0.0
        self._seen_paused_until: float | None = None
        self._seen_pause_wall: float | None = None
        self._seen_pause_reason: str | None = None
        self._unavailable: str | None = None

    @property
    def rule(self) -> SlidingWindow:
        """The limit this limiter enforces."""
        return self._rule

    async def acquire(self, who: str, permits: int = 1) -> None:
        """Wait for ``permits`` permits, then take them.

        Args:
            who: Who asks (a change name); recorded by backends for diagnostics.
            permits: Executor starts this acquisition accounts for.

        Raises:
            LimitTooLarge: at once, without waiting or taking anything, when
                ``permits`` exceeds ``calls``.
            ValueError: when ``permits`` is not an integer >= 1.
            RateLimitStoreError: when a sqlite log cannot be used.
        """
        self._rule.check_request(permits)
        self._waiting += 1
        try:
            async with self._turn:
                granted = await self._serve_head_of_line(who, permits)
        finally:
            self._waiting -= 1
        # Nothing from the grant to here is a checkpoint (releasing the lock is not),
        # so a permit taken always reaches the caller, never lost to a cancellation.
        self._observe(granted)

    async def _serve_head_of_line(self, who: str, permits: int) -> BackendReading:
        """Ask the backend until it grants, sleeping on trio's clock in between."""
        announced = False
        try:
            while True:
                reading = await self._call(self.backend.try_acquire, self._rule, permits, who)
                if reading.granted:
                    return reading
                self._observe(reading)
                self._head_ready_at = self._clock() + reading.wait
                if not announced:
                    announced = True
                    self._emit("wait")
                # Capped at one window: the backend's wait is in its own time (the
                # wall clock for sqlite), and however that clock jumps, asking again
                # at least once a window neither grants early (the backend decides)
                # nor sleeps forever.
                sleep = min(reading.wait, self._rule.window)
                await trio.sleep_until(_wake_time(trio.current_time(), sleep))
        finally:
            self._head_ready_at = None

    async def pause_until(self, wall_epoch: float, reason: str) -> None:
        """Pause every acquirer until ``wall_epoch``, e.g. when a provider says to.

        The pause is kept by the backend, so every process sharing it pauses too.
        A pause never shortens one already in force; a time already past is ignored.

        Args:
            wall_epoch: Wall-clock epoch seconds (``time.time()`` style) it ends at.
            reason: Why, for statistics and events (the provider's message).

        Raises:
            ValueError: when ``wall_epoch`` is not a finite number.
            RateLimitStoreError: when a sqlite log cannot be used.
        """
        if not math.isfinite(wall_epoch):
            raise ValueError(f"wall_epoch: expected a finite epoch, got {wall_epoch!r}")
        seconds = wall_epoch - self._wall_clock()
        if seconds <= 0:
            await trio.lowlevel.checkpoint()
            return
        await self._call(self.backend.pause, seconds, reason)
        await self.refresh()
        self._emit("pause")

    async def refresh(self) -> LimiterStatistics:
        """Read the backend again (other processes may have taken permits) and report."""
        self._observe(await self._call(self.backend.peek, self._rule))
        return self.statistics()

    def statistics(self) -> LimiterStatistics:
        """The limiter's state now, from what it last read of the backend.

        Permits taken by other processes since then are not included; call
        :meth:`refresh` for a fresh reading.
        """
        now = self._clock()
        seen = self._seen
        used, next_free = seen_use(
            seen.used, seen.oldest, seen.next_free, self._seen_at, now, self._rule.window
        )
        pause_end = self._seen_paused_until
        pause_left = max(pause_end - now, 0.0) if pause_end is not None else 0.0
        paused = pause_left > 0
        head_wait = 0.0 if self._head_ready_at is None else max(0.0, self._head_ready_at - now)
        return LimiterStatistics(
            calls=self._rule.calls,
            window=self._rule.window,
            used=used,
            remaining=max(0, self._rule.calls - used),
            next_free_in=max(next_free, pause_left),
            tasks_waiting=self._waiting,
            head_wait=head_wait,
            warned=self._warned,
            paused_until=self._seen_pause_wall if paused else None,
            pause_reason=self._seen_pause_reason if paused else None,
            unavailable=self._unavailable,
        )

    async def _call(self, function: Callable[[*_Ts], _T], *args: *_Ts) -> _T:
        if self.backend.blocking:
            # Not abandoned on cancel: the transaction finishes, so a permit it
            # granted is returned to the caller rather than consumed unseen.
            return await trio.to_thread.run_sync(function, *args)
        await trio.lowlevel.checkpoint()
        return function(*args)

    def _observe(self, reading: BackendReading) -> None:
        if reading.unavailable:
            # Nothing was read: what was last seen of the log stands.
            first = self._unavailable is None
            self._unavailable = reading.unavailable
            if first:
                self._emit("unavailable")
            return
        self._unavailable = None
        now = self._clock()
        self._seen, self._seen_at = reading, now
        if reading.paused_for > 0:
            self._seen_paused_until = now + reading.paused_for
            self._seen_pause_wall = self._wall_clock() + reading.paused_for
            self._seen_pause_reason = reading.pause_reason
        else:
            self._seen_paused_until = self._seen_pause_wall = self._seen_pause_reason = None
        used_after = reading.used
        # Re-arm only once use has fallen well below the threshold: a full window
        # dips under it each time a permit expires, and one warning is enough.
        if used_after <= self._threshold // 2:
            self._warned = False
        if not self._warned and used_after >= self._threshold:
            self._warned = True
            self._emit("warn")

    def _emit(self, kind: str) -> None:
        if self._on_event is not None:
            self._on_event(kind, self.statistics())


def open_limiter(
    policy: RateLimitPolicy,
    root: Path,
    *,
    clock: Callable[[], float] = trio.current_time,
    on_event: EventHandler | None = None,
    wall_clock: Callable[[], float] = time.time,
) -> RateLimiter:
    """The limiter a policy asks for, its sqlite log (if any) relative to ``root``.

    With the sqlite backend this opens (and if needed creates) the file, which
    blocks briefly: call it at startup or through ``trio.to_thread.run_sync``.

    Args:
        policy: The ``[rate_limit]`` table.
        root: The project root; ``policy.path`` is relative to it.
        clock: The monotonic clock (the memory backend keeps its log on it too).
        on_event: Receives the limiter's events (see :class:`RateLimiter`).
        wall_clock: Wall-clock epoch seconds.

    Raises:
        RateLimitStoreError: when the sqlite log is corrupt or cannot be opened.
        ConfigError: for a backend this Forge does not have.
    """
    backend: RateLimitBackend
    if policy.backend == "memory":
        backend = MemoryBackend(clock)
    elif policy.backend == "sqlite":
        backend = SqliteBackend.open(root / policy.path)
    else:
        raise ConfigError(
            f"unknown rate-limit backend {policy.backend!r}",
            problems=(f"rate_limit.backend: {policy.backend!r}",),
            hint='use "memory" or "sqlite"',
        )
    return RateLimiter(
        backend,
        policy.calls,
        policy.window,
        policy.warn_at,
        clock=clock,
        on_event=on_event,
        wall_clock=wall_clock,
    )
