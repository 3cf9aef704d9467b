"""What every output parser shares: line splitting, bounded buffers, untrusted JSON values.

Nothing here knows a vendor: the plain-text parser (also every structured
parser's fallback view), JSON lines with a size cap, the stderr tail, and the
coercions that turn untrusted JSON into counts and amounts without raising.
"""

from __future__ import annotations

import abc
import json
import math
import time
from collections.abc import Callable
from typing import Any

from .._observation import Observation

MAX_JSON_LINE = 2 * 1024 * 1024  # a longer line is not parsed (memory stays bounded)
MAX_DOCUMENT = 4 * 1024 * 1024
_SUMMARY_CHARS = 2000
_PARTIAL_LINE_CAP = 4096
_STDERR_TAIL = 64 * 1024  # what is kept of stderr to read a provider's error from


def has_marker_line(text: str, marker: str) -> bool:
    """Whether some line of ``text`` is exactly ``marker`` once trimmed."""
    return any(line.strip() == marker for line in text.splitlines())


class TextParser:
    """Plain output: done when a whole line, trimmed, is the done marker.

    Only chunks that contain the marker are split into lines, so gigabytes of
    output cost a substring search, not a Python loop per line.
    """

    def __init__(self, done_marker: str, output_format: str = "text") -> None:
        self._marker = done_marker.strip()
        self._marker_bytes = self._marker.encode()
        self._format = output_format
        self._partial = b""  # the current unfinished line, while it could still be the marker
        self._partial_too_long = False
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        if self.seen or not chunk:
            return
        first = chunk.find(b"\n")
        if first == -1:
            self._grow_partial(chunk)
            return
        if not self._partial_too_long:
            self._check(self._partial + chunk[:first])  # the pending line ends here
        last = chunk.rfind(b"\n")
        middle = chunk[first + 1 : last]
        if self._marker_bytes and self._marker_bytes in middle:
            for line in middle.split(b"\n"):
                self._check(line)
        self._partial, self._partial_too_long = b"", False
        self._grow_partial(chunk[last + 1 :])

    def feed_stderr(self, chunk: bytes) -> None:
        """Plain output: what an agent writes to stderr is not read."""

    def finish(self) -> Observation:
        if not self._partial_too_long:
            self._check(self._partial)
        return Observation(format=self._format, done=self.seen)

    def _grow_partial(self, data: bytes) -> None:
        if self._partial_too_long:
            return
        self._partial += data
        if len(self._partial) > _PARTIAL_LINE_CAP:
            # Too long to be the marker, however much whitespace surrounds it.
            self._partial, self._partial_too_long = b"", True

    def _check(self, line: bytes) -> None:
        if self._marker_bytes and line.strip() == self._marker_bytes:
            self.seen = True


class JsonLines:
    """Splits output into lines, each at most MAX_JSON_LINE bytes, and parses JSON objects."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skipping = False  # inside a line that grew past the cap
        self.skipped_lines = 0

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        objects = []
        self._buffer += chunk
        while (newline := self._buffer.find(b"\n")) != -1:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if self._skipping:
                self._skipping = False
                continue
            if (parsed := parse_object(line)) is not None:
                objects.append(parsed)
        if len(self._buffer) > MAX_JSON_LINE:
            self._buffer.clear()
            self._skipping = True
            self.skipped_lines += 1
        return objects

    def finish(self) -> list[dict[str, Any]]:
        rest = bytes(self._buffer)
        self._buffer.clear()
        if self._skipping:
            return []
        parsed = parse_object(rest)
        return [parsed] if parsed is not None else []


def parse_object(raw: bytes) -> dict[str, Any] | None:
    """A JSON object from one line, or None for anything else (never raises)."""
    stripped = raw.strip()
    if not stripped.startswith(b"{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class EventParser(abc.ABC):
    """A line-oriented JSON format: each object to :meth:`_take`, every chunk to a text view.

    The text view is the fallback when no event parses: the output is then read
    as plain text, the done marker included.
    """

    def __init__(
        self, output_format: str, done_marker: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self._format = output_format
        self._clock = clock  # wall-clock epoch seconds: what a relative reset counts from
        self._marker = done_marker.strip()
        self._lines = JsonLines()
        self._text = TextParser(done_marker, output_format)
        self._stderr = Tail()

    def feed(self, chunk: bytes) -> None:
        self._text.feed(chunk)
        for event in self._lines.feed(chunk):
            self._take(event)

    def feed_stderr(self, chunk: bytes) -> None:
        self._stderr.feed(chunk)

    def _drain(self) -> Observation:
        """Take the last, unterminated line; the output as plain text."""
        for event in self._lines.finish():
            self._take(event)
        return self._text.finish()

    @abc.abstractmethod
    def _take(self, event: dict[str, Any]) -> None: ...


class Tail:
    """The last bytes of a stream, bounded."""

    def __init__(self, limit: int = _STDERR_TAIL) -> None:
        self._data = bytearray()
        self._limit = limit

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._limit:
            del self._data[: len(self._data) - self._limit]

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")


def document_events(data: bytes) -> list[dict[str, Any]]:
    """The objects of a whole JSON document: an array of messages, or one object."""
    stripped = data.strip()
    if not stripped.startswith((b"[", b"{")):
        return []
    try:
        value = json.loads(stripped)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


def first_object(data: bytes) -> dict[str, Any] | None:
    """The first JSON object in ``data``, whatever text comes before or after it."""
    start = data.find(b"{")
    if start == -1:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(data[start:].decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def last_json_object(
    text: str, wanted: Callable[[dict[str, Any]], bool], attempts: int = 256
) -> dict[str, Any] | None:
    """The last JSON object in ``text`` that is ``wanted``, looking back from the end.

    What a CLI exits with comes last, after any number of dumps and retried
    errors: the search starts at the last ``{`` and goes back, trying at most
    ``attempts`` braces, so a long stderr never hides its final error.
    """
    decoder = json.JSONDecoder()
    start = text.rfind("{")
    while start != -1 and attempts > 0:
        attempts -= 1
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict) and wanted(value):
            return value
        start = text.rfind("{", 0, start)
    return None


def as_int(value: object) -> int:
    """A non-negative count from untrusted JSON (anything else, huge ones too, counts as 0)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53:
        return 0
    return value


def as_float(value: object) -> float:
    """A finite, non-negative amount from untrusted JSON (anything else counts as 0)."""
    return finite_amount(value) or 0.0


def finite_amount(value: object) -> float | None:
    """``value`` as a finite float >= 0, or None (huge integers and Infinity included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        amount = float(value)
    except OverflowError:
        return None
    return amount if math.isfinite(amount) and amount >= 0 else None


def as_dict(value: object) -> dict[str, Any]:
    """A JSON object from untrusted JSON, or an empty one."""
    return value if isinstance(value, dict) else {}


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def clip(text: str) -> str:
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"
