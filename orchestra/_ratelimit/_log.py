"""The sliding log as an array: what a local backend keeps, and what a reading says of it.

A log holds the grant times of the permits still in use, oldest first. Permits
leave at the front (they expire in the order they were granted) and join at the
back, so a :class:`StampLog` is an array with a moving head: settling it at a
new instant and appending to it cost the same whether the window holds ten
permits or ten thousand. A reading summarises it (a count, the next free
permit, the ages of the oldest few) and the limiter ages that summary with its
own clock (:func:`seen_use`); nothing on the path of an acquisition walks the
whole window.

The comparisons are those of :class:`~._window.SlidingWindow` (a permit at
``t`` is in use while ``t + window > now``; a stamp after ``now`` counts as
``now``), evaluated on the same floats, so a log settled here and one settled
by :meth:`SlidingWindow.settle` hold the same numbers.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import overload

# Drop the expired front of the array only once it is this long and at least
# half of the array: copying the live rest then costs at most as much as the
# appends that filled it (amortized O(1) per permit).
_COMPACT_AFTER = 1024


class StampLog(Sequence[float]):
    """The grant times of the permits in use, oldest first, in one time base.

    Indexing gives the stamps (``log[0]`` is the oldest), so a settled log can be
    handed to :meth:`SlidingWindow.wait_for` as it is.

    Args:
        stamps: A log to start from; sorted here.
    """

    def __init__(self, stamps: Iterable[float] = ()) -> None:
        self._stamps: list[float] = sorted(stamps)
        self._head = 0

    def __len__(self) -> int:
        return len(self._stamps) - self._head

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> list[float]: ...
    def __getitem__(self, index: int | slice) -> float | list[float]:
        if isinstance(index, slice):
            return self._stamps[self._head :][index]
        size = len(self._stamps) - self._head
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("stamp index out of range")
        return self._stamps[self._head + index]

    @property
    def newest(self) -> float | None:
        """The latest stamp, or None for an empty log."""
        return self._stamps[-1] if len(self) else None

    def settle(self, window: float, now: float) -> None:
        """Drop the permits that have left the window at ``now``; clamp later stamps to it.

        Costs O(log n) plus, rarely, a copy: when the clock went back, or when
        the dropped front is long enough to be worth releasing.
        """
        stamps, end = self._stamps, len(self._stamps)
        # The first permit still in use: `stamp + window > now` is false, then
        # true, along a sorted log.
        head = bisect.bisect_left(
            stamps, True, lo=self._head, hi=end, key=lambda stamp: stamp + window > now
        )
        if head < end and stamps[-1] > now:
            # The clock went back: what was granted "after" now counts as now.
            # A new array, so that views already handed out keep their numbers.
            later = bisect.bisect_right(stamps, now, lo=head, hi=end)
            self._stamps = stamps[head:later] + [now] * (end - later)
            self._head = 0
        elif head >= _COMPACT_AFTER and 2 * head >= end:
            self._stamps = stamps[head:]
            self._head = 0
        else:
            self._head = head

    def runs(self, now: float, limit: int) -> tuple[tuple[float, int], ...]:
        """The oldest ``limit`` distinct grant times as (age at ``now``, permits then).

        O(``limit`` log n): each run's end is found by bisection.
        """
        stamps, end = self._stamps, len(self._stamps)
        runs: list[tuple[float, int]] = []
        start = self._head
        while start < end and len(runs) < limit:
            stop = bisect.bisect_right(stamps, stamps[start], lo=start, hi=end)
            runs.append((now - stamps[start], stop - start))
            start = stop
        return tuple(runs)

    def append(self, now: float, permits: int) -> None:
        """Add ``permits`` granted at ``now`` (no earlier than the newest stamp)."""
        newest = self.newest
        if newest is not None and now < newest:
            raise ValueError(f"a stamp at {now!r} would come before the newest, {newest!r}")
        self._stamps.extend([now] * permits)


def seen_use(
    used: int,
    oldest: Sequence[tuple[float, int]],
    next_free: float,
    seen_at: float,
    now: float,
    window: float,
) -> tuple[int, float]:
    """Permits in use at ``now``, and seconds until one more fits, of a reading at ``seen_at``.

    ``used``, ``oldest`` and ``next_free`` are a reading's (see
    :class:`~._backends.BackendReading`); what other users of a shared log did
    since is not known. Use falls as the reported oldest permits leave the
    window (the comparison of :meth:`SlidingWindow.settle`, on the same floats);
    past them it stays as read: exact while the reading reported every instant,
    an overestimate at worst. The next permit
    frees when the reading said it would.
    """
    left = sum(count for age, count in oldest if not seen_at - age + window > now)
    return used - left, max(seen_at + next_free - now, 0.0)
