"""The incremental scan cache: one sqlite row per file, keyed by content and ruleset.

A row remembers a file's stat (device, inode, size, mtime, ctime), the hash of
the content that was scanned, the ruleset's digest, when that scan started,
and the (secret-free) result. The scan trusts a row without reading the file
only when the stat is unchanged, the ruleset is the same, and the file's mtime
is safely older than the start of the scan that recorded it: a file changed
in the same clock tick as that scan read it keeps its mtime, so a recent
mtime means "read it again" (git's "racy clean" rule). The ctime is part of
the stat because nothing short of the clock can set it back: an edit whose
mtime was restored with ``touch`` is still seen.

The cache can only ever save work: when it is corrupt it is moved aside and
the scan reads every file; when it is locked or unwritable the scan goes on
without it. Concurrent scanners share it safely (WAL journal, immediate write
transactions, a busy timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import attrs

from .._state import keep_out_of_git, move_aside

SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 10.0
# How much older than the recording scan's start an mtime must be before the
# stat check is trusted: covers the kernel's coarse timestamp clock and
# filesystems that keep mtimes to the second (or two).
RACY_MARGIN_NS = 2_000_000_000
# sqlite's primary result codes for a file that is damaged or not a database.
_CORRUPT_CODES = (11, 26)

StatKey = tuple[int, int, int, int, int]


@attrs.frozen
class CacheEntry:
    """One file's cached scan."""

    stat: StatKey
    content_hash: str
    ruleset: str
    verified_ns: int
    result: str

    def trusted(self, stat: StatKey, ruleset: str) -> bool:
        """Whether the file may be taken as unchanged without reading it."""
        mtime_ns = stat[3]
        return (
            self.ruleset == ruleset
            and self.stat == stat
            and mtime_ns + RACY_MARGIN_NS < self.verified_ns
        )


@attrs.frozen
class CacheRow:
    """A file's scan, to be written to the cache."""

    path: str
    stat: StatKey
    content_hash: str
    ruleset: str
    verified_ns: int
    result: str


class ScanCache:
    """An open cache database. Use :func:`open_cache`."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection

    def entries(self) -> dict[str, CacheEntry]:
        """Every cached file's entry, by path."""
        rows = self._connection.execute(
            "SELECT path, device, inode, size, mtime_ns, ctime_ns, content_hash, ruleset,"
            " verified_ns, result FROM files"
        )
        return {
            row[0]: CacheEntry(
                stat=(row[1], row[2], row[3], row[4], row[5]),
                content_hash=row[6],
                ruleset=row[7],
                verified_ns=row[8],
                result=row[9],
            )
            for row in rows
        }

    def update(self, rows: Iterable[CacheRow], gone: Iterable[str]) -> None:
        """Record fresh scans and forget files no longer listed, in one transaction."""
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.executemany(
                "INSERT OR REPLACE INTO files (path, device, inode, size, mtime_ns, ctime_ns,"
                " content_hash, ruleset, verified_ns, result) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    (
                        row.path,
                        *row.stat,
                        row.content_hash,
                        row.ruleset,
                        row.verified_ns,
                        row.result,
                    )
                    for row in rows
                ),
            )
            connection.executemany("DELETE FROM files WHERE path = ?", ((p,) for p in gone))
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def close(self) -> None:
        self._connection.close()


def is_corruption(exc: sqlite3.Error) -> bool:
    """Whether an sqlite error says the file is damaged (rather than busy or unwritable)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _CORRUPT_CODES


def open_cache(path: Path) -> tuple[ScanCache | None, dict[str, CacheEntry], str | None]:
    """Open (or create) the cache and read its entries.

    Returns the cache (None when it cannot be used), its entries, and a note
    saying why it was rebuilt or left unused. A corrupt cache is moved aside to
    ``<name>.corrupt-<timestamp>`` and a fresh one is created.
    """
    try:
        cache, entries = _open_and_read(path)
        return cache, entries, None
    except sqlite3.Error as exc:
        if not is_corruption(exc):
            return None, {}, f"scan cache {path} not used ({exc})"
        moved = discard_corrupt(path)
        note = f"scan cache {path} was corrupt ({exc}); moved aside to {moved}"
    try:
        cache, entries = _open_and_read(path)
        return cache, entries, note
    except sqlite3.Error as exc:
        return None, {}, f"{note}; a fresh cache could not be created ({exc})"


def _open_and_read(path: Path) -> tuple[ScanCache, dict[str, CacheEntry]]:
    cache = _connect(path)
    try:
        return cache, cache.entries()
    except BaseException:
        cache.close()
        raise


def discard_corrupt(path: Path) -> Path | None:
    """Move a corrupt database aside, with its journal files, so a fresh one starts clean."""
    moved: Path | None = None
    with contextlib.suppress(OSError):
        moved = move_aside(path)
    for suffix in ("-wal", "-journal"):
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            with contextlib.suppress(OSError):
                move_aside(companion)
    # The shared-memory index is rebuilt from the WAL; a stale one must not survive.
    with contextlib.suppress(OSError):
        path.with_name(path.name + "-shm").unlink()
    return moved


def _connect(path: Path) -> ScanCache:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        keep_out_of_git(path.parent)
    except OSError as exc:
        raise sqlite3.OperationalError(f"cannot create {path.parent}: {exc}") from exc
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        connection.execute("PRAGMA journal_mode = WAL")
        # A lost cache update costs a re-read, never a missed finding.
        connection.execute("PRAGMA synchronous = NORMAL")
        _ensure_schema(connection)
    except BaseException:
        connection.close()
        raise
    return ScanCache(path, connection)


def _ensure_schema(connection: sqlite3.Connection) -> None:
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        # Re-read under the write lock: another scanner may have just created it.
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            connection.execute("DROP TABLE IF EXISTS files")
            connection.execute(
                "CREATE TABLE files (path TEXT PRIMARY KEY, device INTEGER NOT NULL,"
                " inode INTEGER NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,"
                " ctime_ns INTEGER NOT NULL, content_hash TEXT NOT NULL, ruleset TEXT NOT NULL,"
                " verified_ns INTEGER NOT NULL, result TEXT NOT NULL) WITHOUT ROWID"
            )
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")
