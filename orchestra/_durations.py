"""Durations as policy authors write them: ``"90s"``, ``"30m"``, ``"1h30m"`` or seconds."""

from __future__ import annotations

import math
import re

import attrs

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_NUMBER = r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"
# Units at most once each, largest first: "1h30m" and "90s", never "30m1h".
_SPELLED = re.compile("".join(f"(?:(?P<{unit}>{_NUMBER}){unit})?" for unit in "dhms"))
_BARE = re.compile(_NUMBER)
EXPECTED = 'a duration like "90s", "30m", "1h30m" or a number of seconds'


@attrs.frozen(order=True)
class Duration:
    """A non-negative span of time, kept in seconds.

    ``str()`` gives the canonical spelling (``Duration(5400)`` is ``"1h30m"``),
    which :func:`parse_duration` reads back to the same value.
    """

    seconds: float = attrs.field()

    @seconds.validator
    def _check(self, _attribute: object, value: float) -> None:
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"a duration must be finite and not negative, got {value!r}")

    def __str__(self) -> str:
        return format_duration(self.seconds)


def parse_duration(value: object) -> Duration:
    """Read a duration from a policy value.

    Args:
        value: A string such as ``"15m"`` or ``"1h30m"``, or a number of seconds.

    Raises:
        ValueError: with a message saying what a duration looks like.
    """
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = None
    elif isinstance(value, str):
        text = value.strip().lower()
        spelled = _SPELLED.fullmatch(text)
        if text and spelled:
            seconds = sum(
                float(amount) * _UNIT_SECONDS[unit]
                for unit, amount in spelled.groupdict().items()
                if amount is not None
            )
        elif _BARE.fullmatch(text):
            seconds = float(text)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"expected {EXPECTED}, got {value!r}")
    return Duration(seconds)


def format_duration(seconds: float) -> str:
    """The canonical spelling of a span: ``"1h30m"``, ``"45s"``, ``"0.25s"``, ``"0s"``.

    Whole seconds are spelled in units; a fractional span is spelled as the
    shortest decimal that reads back to exactly the same float.
    """
    if seconds != int(seconds):
        return f"{seconds!r}s"
    remaining = int(seconds)
    if remaining == 0:
        return "0s"
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, remaining = divmod(remaining, _UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def human_seconds(seconds: float) -> str:
    """A measured duration, precise under a minute: ``"0.42s"``, ``"12.3s"``, ``"1m"``, ``"2m05s"``.

    Past a minute it is spelled as :func:`brief_seconds` spells it.
    """
    if round(seconds, 2) < 10:
        return f"{max(0.0, seconds):.2f}s"
    if round(seconds, 1) < 60:
        return f"{seconds:.1f}s"
    return _past_a_minute(seconds)


def brief_seconds(seconds: float) -> str:
    """A span at a glance, as people write one: ``4.2s``, ``45s``, ``1m``, ``1m30s``, ``2h05m``.

    A zero part is left out (``1m``, never ``1m00s``; ``2h``, never ``2h00m``);
    past an hour the seconds are.
    """
    seconds = max(0.0, seconds)
    if round(seconds, 1) < 10:
        tenths = f"{seconds:.1f}"
        return f"{tenths.removesuffix('.0')}s"
    if round(seconds) < 60:
        return f"{round(seconds)}s"
    return _past_a_minute(seconds)


def _past_a_minute(seconds: float) -> str:
    """The one spelling of a span of a minute or more: ``1m``, ``1m05s``, ``2h``, ``2h05m``."""
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
