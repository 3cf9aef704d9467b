"""Redacting a stream of output line by line, before anyone keeps it.

An executor's output goes to its log, the capture shown on the terminal and
recorded in the timeline, and its parser: a secret it prints must reach none
of them. Chunks arrive cut anywhere, so whole lines are redacted and a partial
line waits for its end; a line that grows past a limit is let out up to its
last whitespace before a tail long enough to hold any token, and a private key
block is held until its END line, up to a limit. A redactor that can tell
which line may go on in the next (``may_continue``) has such a line held
until the next arrives, so a token cut by a line end is redacted whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol, runtime_checkable

Redact = Callable[[str], str]


@runtime_checkable
class LineJoiningRedact(Protocol):
    """A redaction that also tells whether a line's last word may begin a secret."""

    def __call__(self, text: str, /) -> str: ...

    def may_continue(self, line: str, /) -> bool: ...


_LONG_LINE = 64 * 1024
# Longer than any token a rule matches: what an endless line keeps back.
_TAIL = 1024
# A PEM private key header on a line of its own, and the most a hold keeps
# back (a 4096-bit RSA key is about 3.3 KB).
_KEY_HEADER = re.compile(rb"(?m)^[ \t]*-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[ \t\r]*$")
_KEY_HOLD = 16 * 1024
# At most this many lines in a row are held for the next (each line's end may
# cut a secret that goes on in the next).
_CONTINUED_LINES = 8


class StreamRedactor:
    """Feeds bytes in, gets redacted bytes out (a line at a time)."""

    def __init__(self, redact: Redact, long_line: int = _LONG_LINE) -> None:
        self._redact = redact
        self._long_line = long_line
        self._pending = bytearray()
        self._may_continue = redact.may_continue if isinstance(redact, LineJoiningRedact) else None

    def feed(self, chunk: bytes | bytearray) -> bytes:
        self._pending += chunk
        pending = self._pending
        cut = pending.rfind(b"\n") + 1
        if cut:
            cut = _before_open_key(pending, cut)
        if cut and self._may_continue is not None:
            cut = _before_continued_lines(pending, cut, self._may_continue)
        if cut == 0 and len(pending) > self._long_line:
            # An endless line: let out all but a tail that may hold a token's start.
            keep = len(pending) - _TAIL
            cut = _last_space(pending, keep) + 1 or keep
        if cut == 0:
            return b""
        ready = bytes(pending[:cut])
        del pending[:cut]
        return self._apply(ready)

    def flush(self) -> bytes:
        """What is left at the end of the stream, redacted."""
        rest = bytes(self._pending)
        self._pending.clear()
        return self._apply(rest) if rest else b""

    def _apply(self, data: bytes) -> bytes:
        text = data.decode("utf-8", "surrogateescape")
        return self._redact(text).encode("utf-8", "surrogateescape")


def _last_space(data: bytearray, end: int) -> int:
    """The index of the last whitespace byte before ``end``, or -1."""
    for index in range(end - 1, -1, -1):
        if data[index] in b" \t\r":
            return index
    return -1


def _before_continued_lines(data: bytearray, cut: int, may_continue: Callable[[str], bool]) -> int:
    """Hold back the last lines before ``cut`` whose last word may go on in the next."""
    held = cut
    for _ in range(_CONTINUED_LINES):
        start = data.rfind(b"\n", 0, held - 1) + 1
        line = bytes(data[start:held]).decode("utf-8", "surrogateescape")
        if not may_continue(line):
            break
        held = start
        if held == 0:
            break
    return held


def _before_open_key(data: bytearray, cut: int) -> int:
    """Hold back a private key block that has begun but not ended: its lines are
    redacted together once the END line arrives (a key printed line by line
    would otherwise pass one harmless-looking line at a time). Only a whole PEM
    header line starts a hold, and a hold ends after ``_KEY_HOLD`` bytes: code
    that merely mentions a key must not stall the output."""
    headers = list(_KEY_HEADER.finditer(bytes(data[:cut])))
    found = headers[-1] if headers else None
    if found is None or b"-----END" in data[found.start() : cut]:
        return cut
    if cut - found.start() > _KEY_HOLD:
        return cut
    return found.start()
