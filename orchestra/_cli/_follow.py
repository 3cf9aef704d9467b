"""Following files as they grow, for ``forge timeline --follow`` and ``forge attach``.

Both poll: a timeline or a log is appended to by another process, and a
poll every :data:`POLL_SECONDS` costs a stat when nothing changed. Only
whole lines are handed on: a line still being written is held until its
newline arrives.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from .._errors import StateError
from .._oneline import terminal_width
from .._state import Event, decode_event, parse_timeline
from ._console import Output
from ._timeline_view import readable_parts

POLL_SECONDS = 0.2
# At most this much is read at a time: a log of gigabytes is printed in parts.
_READ_MAX = 1024 * 1024
# A line held longer than this is handed on as it is: an endless line (a
# progress bar redrawn with carriage returns) must not fill the memory.
_HELD_MAX = 1024 * 1024

Show = Callable[[dict[str, Any]], None]


@attrs.define
class Tail:
    """A file read from ``offset`` on as it grows, a whole line at a time.

    Attributes:
        path: The file (it may not exist yet).
        offset: Where the next read starts.
        held: The last line read, while its newline has not come.
    """

    path: Path
    offset: int = 0
    held: bytes = b""

    def lines(self) -> Iterator[bytes]:
        """The whole lines appended since the last call, a part at a time (none: nothing new)."""
        while chunk := self._read():
            complete, newline, self.held = (self.held + chunk).rpartition(b"\n")
            if len(self.held) > _HELD_MAX:
                complete, newline, self.held = complete + newline + self.held, b"", b""
            if complete or newline:
                yield complete + newline

    def rest(self) -> bytes:
        """The line still held, ended with a newline: for when nothing will follow it."""
        held, self.held = self.held, b""
        return held + b"\n" if held else b""

    def _read(self) -> bytes:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return b""
        if size < self.offset:  # replaced or truncated by a human: start over
            self.offset, self.held = 0, b""
        if size == self.offset:
            return b""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(min(size - self.offset, _READ_MAX))
        except FileNotFoundError:
            return b""
        self.offset += len(chunk)
        return chunk


def read_whole(path: Path) -> bytes:
    """A file's bytes as they are now; none when it does not exist yet.

    Raises:
        StateError: it cannot be read.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def new_events(tail: Tail) -> list[Event]:
    """The events appended to the timeline ``tail`` follows since the last call."""
    return [decode_event(raw) for part in tail.lines() for raw in parse_timeline(part).events]


def in_words(out: Output) -> Show:
    """How a followed event is printed in words: one line, as wide as the terminal is now."""
    return lambda record: out.styled(*readable_parts(record, _width(out)))


def _width(out: Output) -> int:
    """The terminal's width, asked at each line: a terminal may be resized while followed."""
    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):  # closed, or replaced by something without a tty
        terminal = False
    if terminal:
        return out.console.width
    return terminal_width()
