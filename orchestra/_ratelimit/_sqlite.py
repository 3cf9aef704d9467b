"""The sliding log in a sqlite file, shared by every Forge process on the machine.

The file is the truth: every decision is made inside one ``BEGIN IMMEDIATE``
transaction from a count the database keeps itself (triggers on the grants
table), so two processes can never both take the last permit. What a reading
reports beyond that (when the next permit frees, the oldest grant instants)
comes from a copy of the log this process keeps in memory and brings up to
date from the rows added since it last looked; the copy is checked against
the database's count and epoch in every transaction and read again whole when
they disagree. Nothing in a transaction walks the window: expired rows are
deleted by a range of the time index, new rows are read by a range of their
ids.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from .._errors import StateError
from .._state import keep_out_of_git
from ._backends import BackendReading, log_reading
from ._log import StampLog
from ._window import LONGEST_PAUSE, SlidingWindow

SCHEMA_VERSION = 3

# The tables and triggers of a log. `tally.live` is the number of rows in
# `grants`, kept by the database on every insert and delete, whoever makes them;
# `tally.epoch` changes whenever a row's time is rewritten (a clock that went
# back), which tells a process that its copy of the log is stale. Ids only grow
# (AUTOINCREMENT never reuses one), so "the rows after id N" is exactly what was
# added since a process last read row N.
_TABLES = (
    "CREATE TABLE grants ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, who TEXT NOT NULL)",
    "CREATE INDEX grants_by_time ON grants (at)",
    "CREATE TABLE tally ("
    " id INTEGER PRIMARY KEY CHECK (id = 1), live INTEGER NOT NULL, epoch INTEGER NOT NULL)",
    "INSERT INTO tally (id, live, epoch) SELECT 1, 0, 0",
    "CREATE TRIGGER grants_added AFTER INSERT ON grants"
    " BEGIN UPDATE tally SET live = live + 1; END",
    "CREATE TRIGGER grants_removed AFTER DELETE ON grants"
    " BEGIN UPDATE tally SET live = live - 1; END",
    "CREATE TRIGGER grants_rewritten AFTER UPDATE ON grants"
    " BEGIN UPDATE tally SET epoch = epoch + 1; END",
)

# The whole schema; `user_version` marks a file as a Forge rate-limit log so that
# any other sqlite database at the configured path is refused rather than altered.
_SCHEMA = (
    *_TABLES,
    "CREATE TABLE pause ("
    " id INTEGER PRIMARY KEY CHECK (id = 1), until REAL NOT NULL, reason TEXT NOT NULL,"
    " paused_by TEXT NOT NULL DEFAULT '')",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)

# Version 1 (no ids, no tally) to 2, in the transaction that opens the file: the
# permits it holds still count.
_FROM_VERSION_1 = (
    "ALTER TABLE grants RENAME TO grants_v1",
    "DROP INDEX grants_by_time",
    *_TABLES,
    "INSERT INTO grants (at, who) SELECT at, who FROM grants_v1 ORDER BY at, rowid",
    "DROP TABLE grants_v1",
)

# Version 2 to 3: a pause records who paused (its reason names the change).
_FROM_VERSION_2 = (
    "ALTER TABLE pause ADD COLUMN paused_by TEXT NOT NULL DEFAULT ''",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)


# The statements of every transaction that touch the grants, each answered from
# an index (a test holds them to it): never a scan of the window.
PRUNE = "DELETE FROM grants WHERE at <= ? AND at + ? <= ?"
REWRITE_LATER = "UPDATE grants SET at = ? WHERE at > ?"
ADDED_SINCE = "SELECT id, at FROM grants WHERE id > ? ORDER BY id"
_INSERT = "INSERT INTO grants (at, who) VALUES (?, ?)"


def _expiry_bound(now: float, window: float) -> float:
    """A grant time at or above every ``at`` for which ``at + window <= now`` holds.

    The prune selects ``at <= bound`` (a range of the time index) and keeps the
    exact comparison beside it, so that it deletes what
    :meth:`SlidingWindow.settle` drops and reads nothing else. Four ulps of each
    operand cover the rounding of ``at + window`` and of this subtraction.
    """
    return now - window + 4 * (math.ulp(now) + math.ulp(window))


def _last_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row the cursor inserted last."""
    last = cursor.lastrowid
    if last is None:  # executemany leaves it unset
        (last,) = cursor.connection.execute("SELECT last_insert_rowid()").fetchone()
    return int(last)


def paused_by() -> str:
    """Who writes a pause: this process and its host (the reason names the change)."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _overlong(path: Path, seconds: float, reason: str, by: str) -> str:
    who = f", written by {by}" if by else ", written by no Forge (no paused_by)"
    return (
        f"forge: {path}: the pause row (table pause, id 1: {reason!r}{who}) ends "
        f"{seconds:.0f}s from now, longer than the longest provider pause Forge "
        f"accepts ({LONGEST_PAUSE:.0f}s): dropped, not obeyed"
    )


def _to_stderr(line: str) -> None:
    # The limiter has no console of its own: this one line goes where errors go.
    sys.stderr.write(f"{line}\n")


class RateLimitStoreError(StateError):
    """The sqlite rate-limit log cannot be used: corrupt, foreign, busy or unreadable.

    Forge never recreates the file on its own: the calls it records still count
    against the provider's limit, and a fresh log would forget them.

    Attributes:
        path: The database file.
    """

    def __init__(self, message: str, *, path: Path, hint: str | None = None) -> None:
        super().__init__(message, context=(f"file: {path}",), hint=hint)
        self.path = path


_MOVE_ASIDE_HINT = (
    "check the file, then move it aside; Forge creates a fresh log on the next run "
    "(calls made in the current window are then forgotten)"
)


class SqliteBackend:
    """A log in a sqlite file, shared by every process on the machine.

    Grant times are wall-clock epochs, so a restarted supervisor still counts the
    calls made before it. Every call is one short ``BEGIN IMMEDIATE`` transaction
    on a connection of its own (the limiter runs it in a worker thread), which
    also prunes the permits that have left the window. Sqlite's busy timeout
    makes concurrent processes queue for the write lock instead of failing. A
    call costs the same whether the window holds ten permits or ten thousand.

    A wall clock that goes back is harmless (see :meth:`SlidingWindow.settle`).
    One that jumps forward makes every permit look older than it is, and they
    free early by the size of the jump: the price of a log that survives
    restarts and is shared between processes, which only wall time allows.

    Use :meth:`open` to create or check the file (and to bring a log written by
    an earlier Forge to this schema); the constructor touches nothing.

    Args:
        path: The database file.
        clock: Returns wall-clock epoch seconds; read once per transaction, after
            the write lock is held, so that grant times follow commit order.
        busy_timeout: Seconds to wait for another process's transaction.
        report: Receives the line that says a pause was dropped (default: stderr).
    """

    name = "sqlite"
    blocking = True

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 10.0,
        report: Callable[[str], None] = _to_stderr,
    ) -> None:
        self.path = path
        self._clock = clock
        self._busy_timeout = busy_timeout
        # This process's copy of the log: the grant times of the rows up to id
        # `_copy_through`, as of the database's `_copy_epoch` (None: read it whole).
        # Worker threads take turns with it.
        self._copy_lock = threading.Lock()
        self._copy = StampLog()
        self._copy_through = 0
        self._copy_epoch: int | None = None
        self._keeper: sqlite3.Connection | None = None
        self._report = report

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        busy_timeout: float = 10.0,
        report: Callable[[str], None] = _to_stderr,
    ) -> SqliteBackend:
        """Open the log at ``path``, creating it (and its folder) when absent.

        This blocks briefly on the file: call it at startup, or through
        ``trio.to_thread.run_sync``. A log written by an earlier Forge (schema
        version 1) is brought to this one in place, its permits kept.

        Raises:
            RateLimitStoreError: when the file is corrupt, is some other sqlite
                database, or cannot be created or read. It is never recreated.
        """
        backend = cls(path, clock=clock, busy_timeout=busy_timeout, report=report)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            keep_out_of_git(path.parent)
        except OSError as exc:
            raise RateLimitStoreError(
                f"cannot create the folder of the rate-limit log: {exc.strerror or exc}",
                path=path,
            ) from exc
        with backend._transaction(create=True) as connection:
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            if version == 0:
                (objects,) = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
                if objects:
                    raise RateLimitStoreError(
                        "this sqlite database is not a Forge rate-limit log",
                        path=path,
                        hint="point rate_limit.path at a file of its own",
                    )
                for statement in _SCHEMA:
                    connection.execute(statement)
            elif version in (1, 2):
                for statement in (*(_FROM_VERSION_1 if version == 1 else ()), *_FROM_VERSION_2):
                    connection.execute(statement)
            elif version != SCHEMA_VERSION:
                raise RateLimitStoreError(
                    f"the rate-limit log has schema version {version}; "
                    f"this Forge reads version {SCHEMA_VERSION}",
                    path=path,
                    hint="run the Forge that wrote it, or move the file aside",
                )
        # Outside a transaction, and kept by the file: every later connection,
        # in any process, shares the write-ahead log.
        backend._use_wal()
        backend._keep_open()
        return backend

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """See :meth:`RateLimitBackend.try_acquire`.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``rule.calls``.
            RateLimitStoreError: when the file cannot be used.
        """
        rule.check_request(permits)
        with self._copy_lock, self._transaction() as connection:
            now = self._clock()
            paused_until, reason = self._settle(connection, rule, now)
            wait = rule.wait_for(self._copy, now, permits, paused_until=paused_until)
            if wait <= 0:
                cursor = (
                    connection.execute(_INSERT, (now, who))
                    if permits == 1
                    else connection.executemany(_INSERT, [(now, who)] * permits)
                )
                self._copy.append(now, permits)
                self._copy_through = _last_id(cursor)
            return log_reading(wait <= 0, rule, self._copy, now, wait, paused_until, reason)

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """See :meth:`RateLimitBackend.peek`.

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._copy_lock, self._transaction() as connection:
            now = self._clock()
            paused_until, reason = self._settle(connection, rule, now)
            wait = rule.wait_for(self._copy, now, 1, paused_until=paused_until)
            return log_reading(False, rule, self._copy, now, wait, paused_until, reason)

    def pause(self, seconds: float, reason: str) -> None:
        """See :meth:`RateLimitBackend.pause`.

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._transaction() as connection:
            until = self._clock() + min(seconds, LONGEST_PAUSE)
            connection.execute(
                "INSERT INTO pause (id, until, reason, paused_by) VALUES (1, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET until = excluded.until, reason = excluded.reason,"
                " paused_by = excluded.paused_by "
                "WHERE excluded.until > pause.until",
                (until, reason, paused_by()),
            )

    def count_rows(self) -> int:
        """Rows in the log, pruned or not (for tests and diagnostics).

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._transaction() as connection:
            (rows,) = connection.execute("SELECT count(*) FROM grants").fetchone()
        return int(rows)

    def _settle(
        self, connection: sqlite3.Connection, rule: SlidingWindow, now: float
    ) -> tuple[float | None, str]:
        """Drop what has left the window, bring the copy up to date, return the pause."""
        # The same comparison as SlidingWindow.settle (`at + window > now` keeps a
        # permit), evaluated by sqlite in the same IEEE doubles; the bound beside it
        # lets the time index find those rows without reading the live ones.
        connection.execute(PRUNE, (_expiry_bound(now, rule.window), rule.window, now))
        # A grant time after `now` means the wall clock went back. Rewriting it to
        # `now` keeps the permit for one full window from here rather than until
        # the clock catches up, which could be hours.
        connection.execute(REWRITE_LATER, (now, now))
        connection.execute("DELETE FROM pause WHERE until <= ?", (now,))
        live, epoch, until, reason, by = connection.execute(
            "SELECT live, epoch, pause.until, pause.reason, pause.paused_by"
            " FROM tally LEFT JOIN pause"
        ).fetchone()
        self._catch_up(connection, rule.window, now, int(live), int(epoch))
        if until is None:
            return None, ""
        if not float(until) - now <= LONGEST_PAUSE:
            # Forge caps every pause it writes: this one is someone else's (or
            # NaN). Dropped, so that no process obeys it, and said.
            connection.execute("DELETE FROM pause WHERE id = 1")
            self._report(_overlong(self.path, float(until) - now, str(reason), str(by)))
            return None, ""
        return float(until), str(reason)

    def _catch_up(
        self, connection: sqlite3.Connection, window: float, now: float, live: int, epoch: int
    ) -> None:
        """Make the copy hold exactly the rows the database holds now.

        The rows added since the copy was last brought up to date are appended;
        the copy is then settled at ``now`` as the database just was. It can
        only hold more than the database (rows another process pruned on a
        shorter window, or at a later wall clock): the counts then differ, and
        the copy is read again whole, as it is after a rewrite (a new epoch).
        """
        copy = self._copy
        if epoch == self._copy_epoch:
            rows = connection.execute(ADDED_SINCE, (self._copy_through,)).fetchall()
            newest = copy.newest
            for row_id, at in rows:
                if newest is not None and at < newest:
                    break  # not in grant order: read it whole below
                copy.append(at, 1)
                newest, self._copy_through = at, row_id
            else:
                copy.settle(window, now)
                if len(copy) == live:
                    return
        rows = connection.execute("SELECT at, id FROM grants ORDER BY at, id").fetchall()
        self._copy = StampLog(at for at, _ in rows)
        self._copy_through = max((row_id for _, row_id in rows), default=0)
        self._copy_epoch = epoch
        self._copy.settle(window, now)

    def _use_wal(self) -> None:
        uri = f"{self.path.absolute().as_uri()}?mode=rw"
        try:
            connection = sqlite3.connect(
                uri, uri=True, timeout=self._busy_timeout, isolation_level=None
            )
            try:
                connection.execute("PRAGMA journal_mode=WAL")
            finally:
                connection.close()
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc

    def _keep_open(self) -> None:
        """Hold one idle connection to the log for as long as this backend lives.

        Closing the last connection to a write-ahead log checkpoints it into
        the file and deletes it: four flushes to disk, on every call when each
        transaction's connection is the only one. With this one open, closing
        a transaction's connection is never the last: the log is checkpointed
        as it grows (sqlite's own threshold), not per call. It never runs a
        transaction, so every check a fresh connection makes (a deleted,
        replaced or damaged file) is still made.
        """
        uri = f"{self.path.absolute().as_uri()}?mode=rw"
        try:
            keeper = sqlite3.connect(
                uri, uri=True, timeout=self._busy_timeout, check_same_thread=False
            )
            # One read opens the write-ahead log: from then on the connection
            # holds its shared lock, which is what makes it count.
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchone()
            self._keeper = keeper
        except sqlite3.Error:
            self._keeper = None  # only a saving: every transaction works without it

    @contextlib.contextmanager
    def _transaction(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed unless the body raises.

        Should it not commit, the copy of the log is dropped (read whole next
        time): it may already hold what the transaction added.
        """
        # mode=rw: once the log exists, a deleted file is an error, not a fresh log.
        uri = f"{self.path.absolute().as_uri()}?mode={'rwc' if create else 'rw'}"
        try:
            connection = sqlite3.connect(
                uri, uri=True, timeout=self._busy_timeout, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        try:
            # The write-ahead log (set when the file is created) with NORMAL
            # syncing. The exact count does not rest on syncing at all: it rests
            # on BEGIN IMMEDIATE, which lets one transaction at a time read the
            # count and write its grant, and on every process reading the same
            # write-ahead log, which a commit appends to before it returns, so
            # the next transaction, in any process, sees it. What the sync level
            # decides is what survives a power cut: with NORMAL, a commit is not
            # flushed until the next checkpoint, so a power cut may forget the
            # last few grants (never tear the file); a crash of the process
            # loses nothing that committed. FULL would flush the log on every
            # commit for that power-cut case alone.
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("BEGIN IMMEDIATE")
            yield connection
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            self._copy_epoch = None
            raise self._store_error(exc) from exc
        except BaseException:
            self._copy_epoch = None
            raise
        finally:
            # Closing without COMMIT rolls the transaction back.
            connection.close()

    def _store_error(self, exc: sqlite3.Error) -> RateLimitStoreError:
        code = getattr(exc, "sqlite_errorname", "") or ""
        if code.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
            return RateLimitStoreError(
                f"the rate-limit log is corrupt or not a sqlite database ({exc})",
                path=self.path,
                hint=_MOVE_ASIDE_HINT,
            )
        if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return RateLimitStoreError(
                f"the rate-limit log stayed locked for more than {self._busy_timeout:g}s",
                path=self.path,
                hint="another process holds it; check for a stuck forge process",
            )
        return RateLimitStoreError(f"cannot use the rate-limit log: {exc}", path=self.path)
