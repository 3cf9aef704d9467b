"""The sliding log as an array: what a backend keeps, and views of it that cost nothing.

A log holds the grant times of the permits still in use, oldest first. Permits
leave at the front (they expire in the order they were granted) and join at the
back, so a :class:`StampLog` is an array with a moving head: settling it at a
new instant and appending to it cost the same whether the window holds ten
permits or ten thousand. Readings hand out :class:`Ages`, a view of the array
rather than a copy, and the limiter reads its statistics back through
:func:`seen_live`, a view again; nothing on the path of an acquisition walks
the whole window.

The comparisons are those of :class:`~._window.SlidingWindow` (a permit at
``t`` is in use while ``t + window > now``; a stamp after ``now`` counts as
``now``), evaluated on the same floats, so a log settled here and one settled
by :meth:`SlidingWindow.settle` hold the same numbers.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

# Drop the expired front of the array only once it is this long and at least
# half of the array: copying the live rest then costs at most as much as the
# appends that filled it (amortized O(1) per permit).
_COMPACT_AFTER = 1024


class Ages(Sequence[float]):
    """How long before one instant each permit of a log was granted, oldest first.

    A read-only view of a :class:`StampLog`'s array, taken in O(1). It stays as
    it was when taken: the log only appends past its end, and starts a new array
    whenever it drops or rewrites stamps. It compares equal to any sequence of
    the same ages (a tuple, say).
    """

    __slots__ = ("_now", "_stamps", "_start", "_stop")

    def __init__(self, stamps: list[float], start: int, stop: int, now: float) -> None:
        self._stamps = stamps
        self._start = start
        self._stop = stop
        self._now = now

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[float, ...]: ...
    def __getitem__(self, index: int | slice) -> float | tuple[float, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = self._stop - self._start
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("age index out of range")
        return self._now - self._stamps[self._start + index]

    def __iter__(self) -> Iterator[float]:
        now = self._now
        for position in range(self._start, self._stop):
            yield now - self._stamps[position]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Ages({tuple(self)!r})"


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

    def append(self, now: float, permits: int) -> None:
        """Add ``permits`` granted at ``now`` (no earlier than the newest stamp)."""
        newest = self.newest
        if newest is not None and now < newest:
            raise ValueError(f"a stamp at {now!r} would come before the newest, {newest!r}")
        self._stamps.extend([now] * permits)

    def ages(self, now: float) -> Ages:
        """The log as ages at ``now``, oldest first: a view, O(1)."""
        return Ages(self._stamps, self._head, len(self._stamps), now)


class _SeenLive(Sequence[float]):
    """Stamps on a reader's clock, rebuilt on demand from ages read at ``seen_at``."""

    __slots__ = ("_ages", "_now", "_seen_at", "_start")

    def __init__(self, ages: Sequence[float], start: int, seen_at: float, now: float) -> None:
        self._ages = ages
        self._start = start
        self._seen_at = seen_at
        self._now = now

    def __len__(self) -> int:
        return len(self._ages) - self._start

    @overload
    def __getitem__(self, index: int) -> float: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[float, ...]: ...
    def __getitem__(self, index: int | slice) -> float | tuple[float, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("stamp index out of range")
        return min(self._seen_at - self._ages[self._start + index], self._now)


def seen_live(ages: Sequence[float], seen_at: float, window: float, now: float) -> Sequence[float]:
    """The permits still in use at ``now`` of a log read as ``ages`` at ``seen_at``.

    The same numbers as ``SlidingWindow(…, window).settle(seen_at - age for age
    in ages, now)``, as a view built in O(log n): ``ages`` must be oldest first,
    as every backend reports them.
    """
    start = bisect.bisect_left(
        range(len(ages)), True, key=lambda index: seen_at - ages[index] + window > now
    )
    return _SeenLive(ages, start, seen_at, now)
