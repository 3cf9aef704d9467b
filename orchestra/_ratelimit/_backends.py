"""Where the sliding log lives: one small interface and the memory backend.

A backend keeps the log in its own time base and answers in durations measured
from its own "now" (ages, waits), never in absolute times. It answers with a
bounded summary of the log (how many permits are in use, when the next one
frees, the ages of the oldest few), never the log itself, so that a reading
costs the same whether the window holds ten permits or ten thousand. The limiter can
therefore sleep on trio's clock whatever clock the backend keeps: the memory
backend reads an injected monotonic clock, the sqlite backend (:mod:`._sqlite`)
wall-clock epochs (so that a restart still counts the calls made before it). A
Redis backend, for several machines (``orchestra/_fleet``), implements the same
:class:`RateLimitBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from ._log import StampLog
from ._window import LONGEST_PAUSE, SlidingWindow

OLDEST_REPORTED = 16
"""How many of the oldest grant instants a reading reports (with their permits).

Enough for the limiter's statistics to see use fall as those permits leave the
window between two readings (exactly, while the window holds no more instants
than this); a bound, so that no reading grows with the window.
"""


@attrs.frozen
class BackendReading:
    """What a backend saw in one transaction, as durations from its own now.

    Attributes:
        granted: Whether the permits asked for were taken.
        wait: Seconds before the request could be granted (0 when granted); for a
            plain look, before one permit could be.
        used: Permits in use after the call (granted less than a window ago,
            including those granted by this very call).
        next_free: Seconds until one more permit fits in the window, a pause
            aside (0 when one fits now).
        oldest: The oldest instants at which permits in use were granted, oldest
            first, as (seconds since, permits granted then): at most
            :data:`OLDEST_REPORTED` of them, all of them when the window holds
            no more.
        paused_for: Seconds left of a provider's pause (0: not paused).
        pause_reason: Why the provider paused us ("" when not paused).
        unavailable: Why the shared log could not be reached ("" when it was);
            nothing is granted then (the limiter fails closed and asks again
            after ``wait``), and the other fields say nothing.
    """

    granted: bool
    wait: float
    used: int = 0
    next_free: float = 0.0
    oldest: tuple[tuple[float, int], ...] = ()
    paused_for: float = 0.0
    pause_reason: str = ""
    unavailable: str = ""


class RateLimitBackend(Protocol):
    """The interface every backend implements.

    Each call is one atomic step against the shared log: a decision is made and
    recorded in the same transaction, so two users of the log can never both
    take its last permit.
    """

    @property
    def name(self) -> str:
        """The policy's name for the backend: ``"memory"``, ``"sqlite"`` …"""
        ...

    @property
    def blocking(self) -> bool:
        """Whether calls may block on I/O; the limiter then runs them in a worker thread."""
        ...

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """Take ``permits`` now if ``rule`` allows it, else report how long to wait.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``rule.calls``.
        """
        ...

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """Look at the log without taking anything (``wait`` is for one permit)."""
        ...

    def pause(self, seconds: float, reason: str) -> None:
        """Refuse every request for the next ``seconds``; a pause is never shortened.

        ``seconds`` is capped to ``LONGEST_PAUSE`` (a weekly limit's reset).
        """
        ...


def log_reading(
    granted: bool,
    rule: SlidingWindow,
    log: StampLog,
    now: float,
    wait: float,
    paused_until: float | None,
    reason: str,
) -> BackendReading:
    """The summary of a settled local log at ``now``: O(1) in its length."""
    paused_for = paused_until - now if paused_until is not None and paused_until > now else 0.0
    return BackendReading(
        granted=granted,
        wait=wait,
        used=len(log),
        next_free=rule.wait_for(log, now, 1),
        oldest=log.runs(now, OLDEST_REPORTED),
        paused_for=paused_for,
        pause_reason=reason if paused_for > 0 else "",
    )


class MemoryBackend:
    """A log in this process's memory, on an injected monotonic clock.

    An acquisition costs the same however many permits the window holds: the
    log is an array settled from its front (:class:`~._log.StampLog`).

    Args:
        clock: Returns the current time in seconds; ``trio.current_time`` in a
            supervisor, so that tests drive it with ``trio.testing.MockClock``.
            The backend must then be called from the trio thread (it is not
            ``blocking``, so the limiter does).
    """

    name = "memory"
    blocking = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._log = StampLog()
        self._paused_until: float | None = None
        self._pause_reason = ""

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """See :meth:`RateLimitBackend.try_acquire`."""
        rule.check_request(permits)
        now = self._clock()
        self._log.settle(rule.window, now)
        wait = rule.wait_for(self._log, now, permits, paused_until=self._paused_until)
        if wait <= 0:
            self._log.append(now, permits)
        return log_reading(
            wait <= 0, rule, self._log, now, wait, self._paused_until, self._pause_reason
        )

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """See :meth:`RateLimitBackend.peek`."""
        now = self._clock()
        self._log.settle(rule.window, now)
        wait = rule.wait_for(self._log, now, 1, paused_until=self._paused_until)
        return log_reading(
            False, rule, self._log, now, wait, self._paused_until, self._pause_reason
        )

    def pause(self, seconds: float, reason: str) -> None:
        """See :meth:`RateLimitBackend.pause`."""
        until = self._clock() + min(seconds, LONGEST_PAUSE)
        if self._paused_until is None or until > self._paused_until:
            self._paused_until = until
            self._pause_reason = reason
