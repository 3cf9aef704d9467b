"""Bounded capture of a command's output: the head and the tail, and the totals.

A command may print gigabytes; Forge keeps the first ``head_limit`` bytes and
the last ``tail_limit`` bytes, counts everything, and lets the rest go, so its
memory stays flat whatever the command prints.
"""

from __future__ import annotations

import re

import attrs

# ANSI escape sequences (CSI, OSC) and the other control characters a terminal
# would act on: shown output is text, never instructions to the reader's terminal.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.|[\x00-\x08\x0b-\x1f\x7f]"
)


def strip_control(text: str) -> str:
    """``text`` without escape sequences or control characters (tabs and newlines stay)."""
    return _CONTROL.sub("", text)


@attrs.frozen
class CapturedOutput:
    """What was kept of a command's output.

    Attributes:
        head: The first bytes printed, up to the head limit.
        tail: The last bytes printed that are not already in ``head``.
        total_bytes: Every byte printed.
        total_lines: Every line printed (a last line without newline counts).
    """

    head: bytes = b""
    tail: bytes = b""
    total_bytes: int = 0
    total_lines: int = 0

    @property
    def omitted_bytes(self) -> int:
        return self.total_bytes - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept output as text, with a marker where bytes were dropped."""
        if self.omitted_bytes <= 0:
            # Nothing was dropped: decode as one, so a character split at the cut survives.
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… {self.omitted_bytes} bytes omitted …]\n{tail}"

    def lines(self) -> list[str]:
        """The kept lines, partial lines at the cut included, without control codes."""
        return strip_control(self.text()).splitlines()

    def last_lines(self, count: int) -> list[str]:
        """Up to ``count`` last non-empty lines, the way a person reads a failure."""
        kept = [line.rstrip() for line in self.lines() if line.strip()]
        return kept[-count:] if count > 0 else []


class OutputCapture:
    """Accumulates output chunks within fixed memory.

    Args:
        head_limit: Bytes kept from the start.
        tail_limit: Bytes kept from the end.
    """

    def __init__(self, head_limit: int = 32 * 1024, tail_limit: int = 64 * 1024) -> None:
        self._head_limit = head_limit
        self._tail_limit = tail_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total_bytes = 0
        self._newlines = 0
        self._ends_with_newline = True

    def feed(self, chunk: bytes | bytearray) -> None:
        """Take the next chunk of output."""
        if not chunk:
            return
        self._total_bytes += len(chunk)
        self._newlines += chunk.count(b"\n")
        self._ends_with_newline = chunk.endswith(b"\n")
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            # Trim in batches so that a stream of small chunks costs amortized O(1).
            if len(self._tail) > 2 * self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    def snapshot(self) -> CapturedOutput:
        """The output so far, as a frozen record."""
        tail = bytes(self._tail[-self._tail_limit :]) if self._tail_limit else b""
        lines = self._newlines + (0 if self._ends_with_newline else 1)
        return CapturedOutput(
            head=bytes(self._head), tail=tail, total_bytes=self._total_bytes, total_lines=lines
        )
