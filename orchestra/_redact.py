"""Redacting a stream of output line by line, before anyone keeps it.

An executor's output goes to its log, the capture shown on the terminal and
recorded in the timeline, and its parser: a secret it prints must reach none
of them. Chunks arrive cut anywhere, so whole lines are redacted and a partial
line waits for its end; a line that grows past a limit is redacted up to its
last whitespace, which no token crosses.
"""

from __future__ import annotations

from collections.abc import Callable

Redact = Callable[[str], str]

_LONG_LINE = 64 * 1024


class StreamRedactor:
    """Feeds bytes in, gets redacted bytes out (a line at a time)."""

    def __init__(self, redact: Redact, long_line: int = _LONG_LINE) -> None:
        self._redact = redact
        self._long_line = long_line
        self._pending = bytearray()

    def feed(self, chunk: bytes | bytearray) -> bytes:
        self._pending += chunk
        cut = self._pending.rfind(b"\n") + 1
        if cut == 0 and len(self._pending) > self._long_line:
            cut = _last_space(self._pending) + 1
        if cut == 0:
            return b""
        ready = bytes(self._pending[:cut])
        del self._pending[:cut]
        return self._apply(ready)

    def flush(self) -> bytes:
        """What is left at the end of the stream, redacted."""
        rest = bytes(self._pending)
        self._pending.clear()
        return self._apply(rest) if rest else b""

    def _apply(self, data: bytes) -> bytes:
        text = data.decode("utf-8", "surrogateescape")
        return self._redact(text).encode("utf-8", "surrogateescape")


def _last_space(data: bytearray) -> int:
    """The index of the last whitespace byte, or the end when there is none."""
    for index in range(len(data) - 1, -1, -1):
        if data[index] in b" \t\r":
            return index
    return len(data) - 1
