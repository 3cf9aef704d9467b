"""The commit journal: one fsync makes a whole write of a loop's state durable.

A running loop writes its change's state files and timeline events together
(an iteration starts, an iteration is committed). Flushing each of them to
disk costs an fsync per file, one for the folder and one for the timeline.
Instead the whole write is first appended as one record to
``commits.journal`` in the change's folder and flushed once; the state files
are then replaced (temporary file and rename, as always, so each is old or
new and whole at any instant) and the events appended, without an fsync of
their own. A killed process loses nothing by that: the kernel keeps what it
was given. After a power loss, some of those writes may not have reached the
disk; the journal, which did, writes them again (:func:`recover`, which the
store runs when it loads the change).

A record holds each file's new bytes and a digest of the bytes it replaces:
replayed in order, a record rewrites a file only when it still holds what
the record replaced (or nothing, or an empty file), so a later write by
someone else (a person's reset, fsynced by its own path) is never undone,
and replaying a record twice changes nothing. Its events are appended again
only when the timeline does not hold them yet.

The journal is emptied at a checkpoint, once every file it covers has been
flushed: when it outgrows :data:`CHECKPOINT_BYTES`, when a loop stops, and
after a recovery. Every function here is called with the change's lock held.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import StateError
from ._change import ChangePaths
from ._files import atomic_write_many, corrupt_name, fsync_dir, fsync_path, read_state_bytes
from ._ignore import keep_out_of_git
from ._timeline import append_lines, last_seq, parse_timeline, read_tail, stamp_events

if TYPE_CHECKING:
    from ._events import Event

JOURNAL = "commits.journal"
# Past this size the next write flushes the files the journal covers and
# empties it: a few dozen iterations' records, so a recovery reads little.
CHECKPOINT_BYTES = 128 * 1024
_TAIL_SLACK = 64 * 1024


def journal_path(paths: ChangePaths) -> Path:
    """Where a change's commit journal lives."""
    return paths.folder / JOURNAL


def write_journaled(
    paths: ChangePaths,
    files: Sequence[tuple[Path, bytes]],
    events: Sequence[Event],
    *,
    sync: bool = True,
) -> list[Event]:
    """Write state files (of the change's folder) and append events, with one fsync.

    The record goes to the journal and is flushed first; then the files are
    renamed into place before the events are appended, so a crash in between
    leaves a file a step ahead of the timeline, never behind it.

    ``sync=False`` appends the record without flushing it: the next flushed
    record flushes it too (one file, appended in order), so a power cut can
    take it only together with everything after it. For a write that a later
    one always follows (an iteration's start, before its commit); a killed
    process loses nothing either way.

    Returns:
        The events as written, with their ``ts``, ``seq`` and ``change``.

    Raises:
        StateError: when the journal, a file or the timeline cannot be written.
    """
    written, lines = stamp_events(paths.timeline, paths.name, events)
    record = {
        "files": [
            {"name": path.name, "before": _digest(read_state_bytes(path)), "after": data.decode()}
            for path, data in files
        ],
        "timeline": lines.decode("utf-8"),
    }
    size = _append_record(journal_path(paths), record, sync=sync)
    _apply(paths, list(files), lines)
    if size > CHECKPOINT_BYTES:
        checkpoint(paths)
    return written


def checkpoint(paths: ChangePaths) -> None:
    """Flush every file the journal covers, then empty it.

    Raises:
        StateError: when a file cannot be flushed or the journal emptied.
    """
    journal = journal_path(paths)
    try:
        if os.stat(journal).st_size == 0:
            return
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StateError(f"cannot read {journal}: {exc.strerror or exc}") from exc
    for path in (paths.spend, paths.verify_attempts, paths.breaker, paths.timeline):
        fsync_path(path)
    fsync_dir(paths.folder)
    try:
        fd = os.open(journal, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StateError(f"cannot empty {journal}: {exc.strerror or exc}") from exc


def recover(paths: ChangePaths) -> int:
    """Write again what the journal holds and the disk may have lost; then empty it.

    Returns:
        How many records rewrote a file or appended events.

    Raises:
        StateError: when the journal cannot be read, or a file written.
    """
    journal = journal_path(paths)
    try:
        data = journal.read_bytes()
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise StateError(f"cannot read {journal}: {exc.strerror or exc}") from exc
    if not data.strip():
        return 0
    # A torn last record was never flushed whole, so nothing of it was applied.
    read = parse_timeline(data)
    records = [r for r in read.events if isinstance(r.get("files"), list)]
    repaired = 0
    for record in records:
        if _replay(paths, record, len(data)):
            repaired += 1
    if read.bad_lines or len(records) < len(read.events):
        # Lines that are no record (a torn last one is a crash's, not these):
        # someone else wrote here. Emptying the journal must not take the
        # evidence with it.
        _keep_aside(journal, data)
    checkpoint(paths)
    return repaired


def _keep_aside(journal: Path, data: bytes) -> Path:
    """A copy of the journal's bytes as ``commits.journal.corrupt-<UTC timestamp>``."""
    aside = corrupt_name(journal)
    atomic_write_many([(aside, data)])
    return aside


def _replay(paths: ChangePaths, record: dict[str, Any], journal_size: int) -> bool:
    files: list[tuple[Path, bytes]] = []
    for entry in record["files"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        path = paths.folder / Path(entry["name"]).name
        after = str(entry.get("after", "")).encode()
        now = read_state_bytes(path)
        if now == after:
            continue
        if not now or _digest(now) == entry.get("before"):
            files.append((path, after))
    lines = str(record.get("timeline", "")).encode("utf-8")
    missing = _missing_lines(paths.timeline, lines, journal_size)
    if files or missing:
        _apply(paths, files, missing)
    return bool(files or missing)


def _missing_lines(timeline: Path, lines: bytes, journal_size: int) -> bytes:
    """The record's event lines the timeline lacks, numbered after its last ``seq``."""
    events = parse_timeline(lines).events
    if not events:
        return b""
    held = parse_timeline(read_tail(timeline, journal_size + _TAIL_SLACK)).events
    seen = {_identity(event) for event in held}
    lacking = [event for event in events if _identity(event) not in seen]
    if not lacking:
        return b""
    seq = last_seq(timeline)
    out = []
    for event in lacking:
        seq += 1
        # Someone may have appended since: the events keep their order, after theirs.
        out.append(json.dumps({**event, "seq": seq}, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(out) + "\n").encode("utf-8")


def _identity(event: dict[str, Any]) -> str:
    """An event without its ``seq``: the same event, renumbered by a replay, is the same."""
    return json.dumps({k: v for k, v in event.items() if k != "seq"}, sort_keys=True)


def _apply(paths: ChangePaths, files: list[tuple[Path, bytes]], lines: bytes) -> None:
    atomic_write_many(files, journal=True, sync=False)
    append_lines(paths.timeline, lines, sync=False)


def _append_record(journal: Path, record: dict[str, Any], *, sync: bool) -> int:
    """Append one record (and flush it); the journal's size after it."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    try:
        journal.parent.mkdir(parents=True, exist_ok=True)
        keep_out_of_git(journal.parent)
        created = not journal.exists()
        fd = os.open(journal, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise StateError(f"cannot write {journal}: {exc.strerror or exc}") from exc
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # after a torn record: a fresh line
        count = os.write(fd, line)
        if count != len(line):
            raise OSError(f"only {count} of {len(line)} bytes written (disk full?)")
        if sync:
            os.fsync(fd)
    except OSError as exc:
        raise StateError(f"cannot write {journal}: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if created:
        fsync_dir(journal.parent)  # once, for the journal's own name
    return size + count


def _digest(data: bytes | None) -> str | None:
    if data is None:
        return None
    import hashlib

    return hashlib.blake2b(data, digest_size=16).hexdigest()
