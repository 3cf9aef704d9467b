"""Durations as policy authors write them: ``"90s"``, ``"30m"``, ``"1h30m"`` or seconds."""

from __future__ import annotations

import math
import re

import attrs

_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?[dhms])+")
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
    if isinstance(value, bool):
        raise ValueError(f"expected {EXPECTED}, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"expected {EXPECTED}, got {value!r}")
        return Duration(float(value))
    if isinstance(value, str):
        text = value.strip().lower()
        if _WHOLE.fullmatch(text):
            total = sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(text))
            return Duration(total)
        try:
            seconds = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(seconds) and seconds >= 0:
                return Duration(seconds)
    raise ValueError(f"expected {EXPECTED}, got {value!r}")


def format_duration(seconds: float) -> str:
    """The canonical spelling of a span: ``"1h30m"``, ``"45s"``, ``"0.25s"``, ``"0s"``."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
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
    """A measured duration for reports: ``"0.42s"``, ``"12.3s"``, ``"2m05s"``."""
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s"
