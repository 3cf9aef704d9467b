"""Where the sliding log lives: one small interface, a memory backend and a sqlite one.

A backend keeps the log in its own time base and answers in durations measured
from its own "now" (ages, waits), never in absolute times. The limiter can
therefore sleep on trio's clock whatever clock the backend keeps: the memory
backend reads an injected monotonic clock, the sqlite backend wall-clock epochs
(so that a restart still counts the calls made before it). A Redis backend,
for several machines (``orchestra/_fleet``), implements the same
:class:`RateLimitBackend`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

import attrs

from .._errors import StateError
from .._state import keep_out_of_git
from ._window import Decision, SlidingWindow

SCHEMA_VERSION = 1

# The whole schema; `user_version` marks a file as a Forge rate-limit log so that
# any other sqlite database at the configured path is refused rather than altered.
_SCHEMA = (
    "CREATE TABLE grants (at REAL NOT NULL, who TEXT NOT NULL)",
    "CREATE INDEX grants_by_time ON grants (at)",
    "CREATE TABLE pause ("
    " id INTEGER PRIMARY KEY CHECK (id = 1), until REAL NOT NULL, reason TEXT NOT NULL)",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)


@attrs.frozen
class BackendReading:
    """What a backend saw in one transaction, as durations from its own now.

    Attributes:
        granted: Whether the permits asked for were taken.
        ages: Seconds since each permit still in use was granted, oldest first
            (a permit granted by this very call has age 0).
        wait: Seconds before the request could be granted (0 when granted); for a
            plain look, before one permit could be.
        paused_for: Seconds left of a provider's pause (0: not paused).
        pause_reason: Why the provider paused us ("" when not paused).
        unavailable: Why the shared log could not be reached ("" when it was);
            nothing is granted then (the limiter fails closed and asks again
            after ``wait``).
    """

    granted: bool
    ages: tuple[float, ...]
    wait: float
    paused_for: float = 0.0
    pause_reason: str = ""
    unavailable: str = ""


class RateLimitBackend(Protocol):
    """The interface every backend implements.

    Each call is one atomic step against the shared log: a decision is made and
    recorded in the same transaction, so two users of the log can never both
    take its last permit.
    """

    @property
    def name(self) -> str:
        """The policy's name for the backend: ``"memory"``, ``"sqlite"`` …"""
        ...

    @property
    def blocking(self) -> bool:
        """Whether calls may block on I/O; the limiter then runs them in a worker thread."""
        ...

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """Take ``permits`` now if ``rule`` allows it, else report how long to wait.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``rule.calls``.
        """
        ...

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """Look at the log without taking anything (``wait`` is for one permit)."""
        ...

    def pause(self, seconds: float, reason: str) -> None:
        """Refuse every request for the next ``seconds``; a pause is never shortened."""
        ...


def _reading(
    decision: Decision, now: float, paused_until: float | None, reason: str
) -> BackendReading:
    paused_for = paused_until - now if paused_until is not None and paused_until > now else 0.0
    return BackendReading(
        granted=decision.granted,
        ages=tuple(now - stamp for stamp in decision.live),
        wait=decision.wait,
        paused_for=paused_for,
        pause_reason=reason if paused_for > 0 else "",
    )


class MemoryBackend:
    """A log in this process's memory, on an injected monotonic clock.

    Args:
        clock: Returns the current time in seconds; ``trio.current_time`` in a
            supervisor, so that tests drive it with ``trio.testing.MockClock``.
            The backend must then be called from the trio thread (it is not
            ``blocking``, so the limiter does).
    """

    name = "memory"
    blocking = False

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._log: tuple[float, ...] = ()
        self._paused_until: float | None = None
        self._pause_reason = ""

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """See :meth:`RateLimitBackend.try_acquire`."""
        now = self._clock()
        decision = rule.take(self._log, now, permits, paused_until=self._paused_until)
        self._log = decision.live
        return _reading(decision, now, self._paused_until, self._pause_reason)

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """See :meth:`RateLimitBackend.peek`."""
        now = self._clock()
        live = rule.settle(self._log, now)
        wait = rule.wait_for(live, now, 1, paused_until=self._paused_until)
        decision = Decision(granted=False, live=live, wait=wait)
        return _reading(decision, now, self._paused_until, self._pause_reason)

    def pause(self, seconds: float, reason: str) -> None:
        """See :meth:`RateLimitBackend.pause`."""
        until = self._clock() + seconds
        if self._paused_until is None or until > self._paused_until:
            self._paused_until = until
            self._pause_reason = reason


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
    makes concurrent processes queue for the write lock instead of failing.

    A wall clock that goes back is harmless (see :meth:`SlidingWindow.settle`).
    One that jumps forward makes every permit look older than it is, and they
    free early by the size of the jump: the price of a log that survives
    restarts and is shared between processes, which only wall time allows.

    Use :meth:`open` to create or check the file; the constructor touches nothing.

    Args:
        path: The database file.
        clock: Returns wall-clock epoch seconds; read once per transaction, after
            the write lock is held, so that grant times follow commit order.
        busy_timeout: Seconds to wait for another process's transaction.
    """

    name = "sqlite"
    blocking = True

    def __init__(
        self, path: Path, *, clock: Callable[[], float] = time.time, busy_timeout: float = 10.0
    ) -> None:
        self.path = path
        self._clock = clock
        self._busy_timeout = busy_timeout

    @classmethod
    def open(
        cls, path: Path, *, clock: Callable[[], float] = time.time, busy_timeout: float = 10.0
    ) -> SqliteBackend:
        """Open the log at ``path``, creating it (and its folder) when absent.

        This blocks briefly on the file: call it at startup, or through
        ``trio.to_thread.run_sync``.

        Raises:
            RateLimitStoreError: when the file is corrupt, is some other sqlite
                database, or cannot be created or read. It is never recreated.
        """
        backend = cls(path, clock=clock, busy_timeout=busy_timeout)
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
        return backend

    def try_acquire(self, rule: SlidingWindow, permits: int, who: str) -> BackendReading:
        """See :meth:`RateLimitBackend.try_acquire`.

        Raises:
            LimitTooLarge: when ``permits`` exceeds ``rule.calls``.
            RateLimitStoreError: when the file cannot be used.
        """
        rule.check_request(permits)
        with self._transaction() as connection:
            now = self._clock()
            paused_until, reason = self._prune(connection, rule, now)
            stamps = [at for (at,) in connection.execute("SELECT at FROM grants ORDER BY at")]
            decision = rule.take(stamps, now, permits, paused_until=paused_until)
            if decision.granted:
                connection.executemany(
                    "INSERT INTO grants (at, who) VALUES (?, ?)", [(now, who)] * permits
                )
        return _reading(decision, now, paused_until, reason)

    def peek(self, rule: SlidingWindow) -> BackendReading:
        """See :meth:`RateLimitBackend.peek`.

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._transaction() as connection:
            now = self._clock()
            paused_until, reason = self._prune(connection, rule, now)
            stamps = [at for (at,) in connection.execute("SELECT at FROM grants ORDER BY at")]
        live = rule.settle(stamps, now)
        wait = rule.wait_for(live, now, 1, paused_until=paused_until)
        return _reading(Decision(granted=False, live=live, wait=wait), now, paused_until, reason)

    def pause(self, seconds: float, reason: str) -> None:
        """See :meth:`RateLimitBackend.pause`.

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._transaction() as connection:
            until = self._clock() + seconds
            connection.execute(
                "INSERT INTO pause (id, until, reason) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET until = excluded.until, reason = excluded.reason "
                "WHERE excluded.until > pause.until",
                (until, reason),
            )

    def count_rows(self) -> int:
        """Rows in the log, pruned or not (for tests and diagnostics).

        Raises:
            RateLimitStoreError: when the file cannot be used.
        """
        with self._transaction() as connection:
            (rows,) = connection.execute("SELECT count(*) FROM grants").fetchone()
        return int(rows)

    @staticmethod
    def _prune(
        connection: sqlite3.Connection, rule: SlidingWindow, now: float
    ) -> tuple[float | None, str]:
        """Drop what has left the window, and return the pause in force (if any)."""
        # The same comparison as SlidingWindow.settle (`at + window > now` keeps a
        # permit), evaluated by sqlite in the same IEEE doubles.
        connection.execute("DELETE FROM grants WHERE at + ? <= ?", (rule.window, now))
        # A grant time after `now` means the wall clock went back. Rewriting it to
        # `now` keeps the permit for one full window from here rather than until
        # the clock catches up, which could be hours.
        connection.execute("UPDATE grants SET at = ? WHERE at > ?", (now, now))
        connection.execute("DELETE FROM pause WHERE until <= ?", (now,))
        row = connection.execute("SELECT until, reason FROM pause WHERE id = 1").fetchone()
        if row is None:
            return None, ""
        return float(row[0]), str(row[1])

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

    @contextlib.contextmanager
    def _transaction(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction, committed unless the body raises."""
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
            # syncing: a commit costs no fsync, and a crash loses no committed
            # grant; a power cut may forget the last few, never tear the file.
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("BEGIN IMMEDIATE")
            yield connection
            connection.execute("COMMIT")
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
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
