"""The sliding-log arithmetic of a rolling window: pure, no I/O, the clock passed in.

A log is the sorted grant times of the permits still in use. Every function
here takes the current time as an argument and works in whatever time base the
caller keeps (trio's clock for the memory backend, wall-clock epochs for
sqlite), so one recorded timeline can be replayed under another policy.

**Boundary convention.** A permit granted at time ``t`` is in use during the
half-open span ``[t, t + window)``: it frees at exactly ``t + window``. An
acquisition at ``t + window`` is allowed; one at any earlier instant is not.
Every comparison is written as ``t + window > now`` (never ``t > now - window``)
so that the time a wait ends at and the time the log frees a permit are the
same floating-point number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import attrs

from .._errors import ConfigError

LONGEST_PAUSE = 7 * 86400.0
"""The longest provider pause Forge accepts, in seconds: a weekly limit's reset.

A pause asked for longer is capped to it when it is written; one read back
from a shared log that ends later than this from now was not written by Forge
(or by a clock that has since gone back): it is reported and dropped, never
obeyed. Grant times get the same distrust of the future: one later than now
is rewritten to now.
"""


class LimitTooLarge(ConfigError, ValueError):
    """A request for more permits than the window allows: it could never be granted.

    Raised at once, before the request waits or consumes anything.
    """

    def __init__(self, permits: int, calls: int) -> None:
        super().__init__(
            f"a request for {permits} permits can never be granted: "
            f"the rate limit allows {calls} in any window",
            problems=(f"rate_limit.calls: {calls}",),
            hint="raise rate_limit.calls, or ask for fewer permits at a time",
        )
        self.permits = permits
        self.calls = calls


def _positive_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name}: expected an integer >= 1, got {value!r}")


def _window_seconds(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"window: expected a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"window: expected a finite number of seconds > 0, got {value!r}")
    return float(value)


@attrs.frozen
class Decision:
    """The outcome of asking a log for permits at one instant.

    Attributes:
        granted: Whether the permits were taken.
        live: The log after the decision, oldest first (with the new grants when granted).
        wait: Seconds before the request could be granted; ``0.0`` when granted. It is
            a lower bound: other users of a shared log may take the permit first.
    """

    granted: bool
    live: tuple[float, ...]
    wait: float


@attrs.frozen
class SlidingWindow:
    """The rule "at most ``calls`` permits in any span of ``window`` seconds".

    Args:
        calls: Permits allowed in any window; at least 1.
        window: The span in seconds; finite and positive.

    Raises:
        ValueError: naming the field, for a value out of range.
    """

    calls: int = attrs.field(validator=_positive_int)
    window: float = attrs.field(converter=_window_seconds)

    def check_request(self, permits: int) -> None:
        """Refuse a request that is malformed or that no amount of waiting could grant.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``calls``.
            ValueError: when ``permits`` is not an integer >= 1.
        """
        if isinstance(permits, bool) or not isinstance(permits, int) or permits < 1:
            raise ValueError(f"permits: expected an integer >= 1, got {permits!r}")
        if permits > self.calls:
            raise LimitTooLarge(permits, self.calls)

    def settle(self, stamps: Iterable[float], now: float) -> tuple[float, ...]:
        """The permits still in use at ``now``, oldest first.

        A stamp later than ``now`` can only come from a clock that went backwards
        (wall-clock epochs in a persisted log). It is counted as taken at ``now``:
        still in use for a full window, but never for longer, so a clock jump can
        make the log wait at most one extra window rather than forever.
        """
        window = self.window
        return tuple(sorted(min(stamp, now) for stamp in stamps if stamp + window > now))

    def wait_for(
        self,
        live: Sequence[float],
        now: float,
        permits: int = 1,
        *,
        paused_until: float | None = None,
    ) -> float:
        """Seconds from ``now`` until ``permits`` more fit, given a settled log.

        Args:
            live: The log as returned by :meth:`settle` for the same ``now``.
            now: The current time, in the log's time base.
            permits: The size of the request (at most ``calls``).
            paused_until: The end of a provider's pause, in the same time base.
        """
        excess = len(live) + permits - self.calls
        # The oldest `excess` permits must free first; the last of them frees at its
        # stamp + window, which is when enough room exists (`live` is sorted).
        window_wait = live[excess - 1] + self.window - now if excess > 0 else 0.0
        pause_wait = paused_until - now if paused_until is not None else 0.0
        return max(window_wait, pause_wait, 0.0)

    def take(
        self,
        stamps: Iterable[float],
        now: float,
        permits: int = 1,
        *,
        paused_until: float | None = None,
    ) -> Decision:
        """Take ``permits`` at ``now`` if the log has room, else say how long to wait.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``calls``.
        """
        self.check_request(permits)
        live = self.settle(stamps, now)
        wait = self.wait_for(live, now, permits, paused_until=paused_until)
        if wait > 0:
            return Decision(granted=False, live=live, wait=wait)
        return Decision(granted=True, live=live + (now,) * permits, wait=0.0)


def warn_threshold(calls: int, warn_at: float) -> int:
    """The number of permits in use at which the warning fires (at least 1).

    ``warn_at * calls`` is rounded to nine places first, so that a share such as
    0.07 of 100 gives 7 and not 8 (``0.07 * 100 == 7.000000000000001``).
    """
    return max(1, math.ceil(round(warn_at * calls, 9)))
