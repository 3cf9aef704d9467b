"""What ``forge timeline`` shows of a timeline, and how: its filters and its lines (pure).

The default view is one line per event, in words, led by the event's local
time and its iteration, never wider than the terminal. ``--raw`` keeps the
fields as they were written (``key=value``), ``--json`` the records whole.
``-n``, ``--since`` and ``--kind`` narrow every one of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, time
from typing import Any

import attrs

from .._durations import parse_duration
from .._errors import UsageError
from .._oneline import fit, one_line
from .._report import KNOWN_KINDS, event_iteration, event_words
from .._state import decode_event, iso_epoch
from ._usage import suggestion

Record = dict[str, Any]

# Names a person may give --kind for a family whose events are named otherwise.
FAMILIES: dict[str, tuple[str, ...]] = {
    "circuit": ("breaker.opened", "breaker.half_open", "breaker.closed"),
    "integrity": ("protect.violation",),
    "alert": ("alert.raised", "alert.cleared"),
    "contract": tuple(kind for kind in KNOWN_KINDS if kind.startswith("forge.")),
}
_NO_TIME = "--:--:--"
# "#12" and the space after it: iterations up to 9999 keep the words aligned.
_ITERATION_CELLS = 6


@attrs.frozen
class Selection:
    """Which events are shown: the last ``count``, since a moment, of some kinds.

    Attributes:
        count: Show only the last this many (None: all).
        since: Epoch seconds; events before it, or with no readable time, are left out.
        kinds: What ``--kind`` named (empty: every kind).
    """

    count: int | None = None
    since: float | None = None
    kinds: tuple[str, ...] = ()

    def check(self, seen: Iterable[str]) -> None:
        """Refuse a ``--kind`` that names no kind this release writes nor the timeline holds.

        Raises:
            UsageError: (exit 2) naming the kind, with the nearest known one.
        """
        names = {*KNOWN_KINDS, *seen}
        words = {*names, *FAMILIES, *(_prefixes(names))}
        for kind in self.kinds:
            if kind not in words:
                raise UsageError(
                    f"forge timeline: unknown event kind {kind!r}{suggestion(kind, words)}",
                    hint="a kind is an event's name (verify, iteration.finished), the part "
                    "before a dot (iteration, breaker), or circuit, integrity, alert, contract",
                )

    def passes(self, record: Record) -> bool:
        """Whether ``--since`` and ``--kind`` keep this record."""
        if self.since is not None:
            moment = iso_epoch(record.get("ts"))
            if moment is None or moment < self.since:
                return False
        name = str(record.get("event"))
        return not self.kinds or any(_matches(kind, name) for kind in self.kinds)

    def select(self, records: Sequence[Record]) -> list[Record]:
        """The records shown, oldest first: those that pass, the last ``count`` of them."""
        kept = [record for record in records if self.passes(record)]
        if self.count is not None:
            kept = kept[len(kept) - self.count :] if self.count else []
        return kept


def since_moment(text: str, now: float) -> float:
    """``--since``'s moment as epoch seconds: a span back from ``now``, or a time.

    ``10m`` and ``2h`` are spans; ``2026-12-03T14:00``, ``2026-12-03`` and
    ``14:00`` are times (local unless they say their zone; a bare time is today's).

    Raises:
        UsageError: (exit 2) for anything else.
    """
    try:
        return now - parse_duration(text).seconds
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        pass
    try:
        of_day = time.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"forge timeline: --since {text!r} is neither a span nor a time",
            hint='give a span like "10m" or "2h", or a time like "14:30" or "2026-12-03T14:30"',
        ) from None
    today = datetime.fromtimestamp(now).date()
    return datetime.combine(today, of_day).timestamp()


def readable_parts(record: Record, width: int) -> list[tuple[str, str | None]]:
    """One event as a styled line of at most ``width`` cells: time, iteration, words."""
    event = decode_event(record)
    moment = iso_epoch(record.get("ts"))
    clock = datetime.fromtimestamp(moment).strftime("%H:%M:%S") if moment is not None else _NO_TIME
    number = event_iteration(event)
    iteration = f"#{number}" if number is not None else ""
    lead = f"{clock}  {iteration:<{_ITERATION_CELLS - 1}} "
    words = fit(one_line(event_words(event)), max(0, width - len(lead)))
    if len(lead) > width:  # a terminal narrower than the time: the time alone, cut
        return [(lead[:width], "dim")]
    return [(f"{clock}  ", "dim"), (f"{iteration:<{_ITERATION_CELLS - 1}} ", "cyan"), (words, None)]


def _matches(kind: str, name: str) -> bool:
    return name == kind or name.startswith(f"{kind}.") or name in FAMILIES.get(kind, ())


def _prefixes(names: Iterable[str]) -> set[str]:
    """Each name's leading parts: ``forge.loop.started`` gives ``forge`` and ``forge.loop``."""
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        found.update(".".join(parts[:end]) for end in range(1, len(parts)))
    return found
