"""The session timeline: one JSON object a line, the log of record of a change.

Each event carries ``ts`` (wall-clock ISO-8601 UTC), ``seq`` (1, 2, 3 ... per
change), ``event``, ``change``, then its own fields. Appends use ``O_APPEND``
and ``fsync``, and must be made with the change's lock held so that ``seq`` is
unique. A crash can tear at most the last line; readers report it and go on,
and the next append starts on a fresh line so the tear never spreads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import StateError
from ._files import note_forge_lines, utc_now_iso
from ._ignore import keep_out_of_git

if TYPE_CHECKING:
    from ._events import Event

_TAIL_BYTES = 64 * 1024


@attrs.frozen
class TimelineRead:
    """What a read of a timeline found.

    Attributes:
        events: The events that parsed, in file order.
        torn_last_line: The raw text of an incomplete last line, if any.
        bad_lines: 1-based numbers of lines before the last that did not parse.
    """

    events: tuple[dict[str, Any], ...]
    torn_last_line: str | None = None
    bad_lines: tuple[int, ...] = ()

    def typed(self) -> list[Event]:
        """The events decoded into their classes (see ``_events``)."""
        from ._events import decode_event  # here: reading state files never builds events

        return [decode_event(raw) for raw in self.events]

    def problems(self, path: Path) -> list[str]:
        """Human-readable notes about what could not be read."""
        notes = []
        if self.torn_last_line is not None:
            notes.append(f"{path}: the last line is torn (an interrupted write); ignored")
        if self.bad_lines:
            numbers = ", ".join(str(n) for n in self.bad_lines[:10])
            notes.append(f"{path}: line(s) {numbers} are not valid JSON; skipped")
        return notes


def append_event(path: Path, change: str, event: Event) -> Event:
    """Append one event; the caller holds the change's lock.

    Returns:
        The event as written, with its ``ts``, ``seq`` and ``change``.

    Raises:
        StateError: when the timeline cannot be written.
    """
    return append_events(path, change, [event])[0]


def append_events(path: Path, change: str, events: Sequence[Event]) -> list[Event]:
    """Append several events with one write and one fsync; the caller holds the lock.

    Raises:
        StateError: when the timeline cannot be written.
    """
    written, data = stamp_events(path, change, events)
    append_lines(path, data)
    return written


def stamp_events(path: Path, change: str, events: Sequence[Event]) -> tuple[list[Event], bytes]:
    """The events with their ``ts``, ``seq`` and ``change``, and the lines that record them.

    The numbering follows the timeline's last ``seq``: append the lines (with
    :func:`append_lines`) before the lock is released. The caller holds it.

    Raises:
        StateError: when the timeline cannot be read.
    """
    from ._events import event_record

    ts = utc_now_iso()
    seq = _last_seq(path)
    written: list[Event] = []
    lines: list[str] = []
    for event in events:
        seq += 1
        stamped = attrs.evolve(event, ts=ts, seq=seq, change=change)
        record = event_record(stamped)
        lines.append(json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str))
        written.append(stamped)
    if not lines:
        return written, b""
    return written, ("\n".join(lines) + "\n").encode("utf-8")


def append_lines(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Append whole lines to a timeline in one write (and fsync); the caller holds the lock.

    After a torn last line the lines start on a fresh one, so the tear never
    spreads. ``sync=False`` leaves the flushing to the kernel: for a caller
    whose own fsynced record holds the lines (the store's commit journal).

    Raises:
        StateError: when the timeline cannot be written.
    """
    if not data:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        keep_out_of_git(path.parent)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StateError(f"cannot append to {path}: {exc.strerror or exc}") from exc
    try:
        before = os.fstat(fd)
        prefix = b"\n" if _ends_torn(fd, before.st_size) else b""
        data = prefix + data
        # Before the write: a check reading the timeline meanwhile already knows the lines.
        note_forge_lines(path, data)
        count = os.write(fd, data)
        if count != len(data):
            # A short write (the disk filled up mid-line): the event is torn, not
            # recorded; the next append starts on a fresh line.
            raise OSError(f"only {count} of {len(data)} bytes written (disk full?)")
        if sync:
            os.fsync(fd)
        _carry_last_seq(path, before, os.fstat(fd), data)
    except OSError as exc:
        raise StateError(f"cannot append to {path}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)


def last_seq(path: Path) -> int:
    """The highest ``seq`` in the timeline (0 for none); the caller holds the lock.

    Raises:
        StateError: when the timeline cannot be read.
    """
    return _last_seq(path)


def read_tail(path: Path, size: int) -> bytes:
    """The timeline's last ``size`` bytes or so, from the start of a line (b"" when absent).

    Raises:
        StateError: when the timeline cannot be read.
    """
    try:
        with path.open("rb") as handle:
            end = handle.seek(0, os.SEEK_END)
            start = max(0, end - size)
            handle.seek(start)
            tail = handle.read()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return tail.split(b"\n", 1)[-1] if start > 0 else tail


def read_timeline(path: Path) -> TimelineRead:
    """Read every event of a timeline (an absent file is an empty timeline)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return TimelineRead(events=())
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return parse_timeline(data)


def parse_timeline(data: bytes) -> TimelineRead:
    """Parse timeline bytes, tolerating a torn last line and reporting bad ones."""
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    events: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        parsed = _parse_line(raw)
        if parsed is None:
            bad.append(number)
        else:
            events.append(parsed)
    torn = None
    if tail.strip():
        parsed = _parse_line(tail)
        # A last line without its newline may still be whole JSON (a writer
        # that died between the line and its newline); keep it if it parses.
        if parsed is None:
            torn = tail.decode("utf-8", errors="replace")
        else:
            events.append(parsed)
    return TimelineRead(events=tuple(events), torn_last_line=torn, bad_lines=tuple(bad))


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # nesting past the stack: not ours
        return None
    return value if isinstance(value, dict) else None


def _ends_torn(fd: int, size: int) -> bool:
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


# The highest ``seq`` of each timeline this process read or appended to, with
# the file's identity, size and mtime then: every event appended asks for it,
# and the tail need not be parsed again while the file is as this process
# left it. Any other writer changes its size or mtime, and it is read again.
_LAST_SEQ: dict[Path, tuple[tuple[int, int, int], int]] = {}


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _carry_last_seq(path: Path, before: os.stat_result, after: os.stat_result, data: bytes) -> None:
    """After an append: the highest ``seq``, from the one known before and the lines added."""
    known = _LAST_SEQ.get(path)
    if known is None or known[0] != _identity(before):
        _LAST_SEQ.pop(path, None)
        return
    added = [e.get("seq") for e in parse_timeline(data).events]
    seqs = [s for s in added if isinstance(s, int) and not isinstance(s, bool)]
    _LAST_SEQ[path] = (_identity(after), max([known[1], *seqs]))


def _last_seq(path: Path) -> int:
    """The highest ``seq`` in the timeline, read from its tail when possible."""
    try:
        identity = _identity(os.stat(path))
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    known = _LAST_SEQ.get(path)
    if known is not None and known[0] == identity:
        return known[1]
    seq = _read_last_seq(path)
    _LAST_SEQ[path] = (identity, seq)
    return seq


def _read_last_seq(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL_BYTES)
            handle.seek(start)
            tail = handle.read()
            if start > 0:
                tail = tail.split(b"\n", 1)[-1]
            seqs = [e.get("seq") for e in parse_timeline(tail).events]
            found = [s for s in seqs if isinstance(s, int) and not isinstance(s, bool)]
            if found or start == 0:
                return max(found, default=0)
            handle.seek(0)
            whole = handle.read()
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc
    seqs = [e.get("seq") for e in parse_timeline(whole).events]
    return max((s for s in seqs if isinstance(s, int) and not isinstance(s, bool)), default=0)
