"""One host's connection to the fleet's Redis server, and the server's clock.

redis-py's blocking client, with connect and command timeouts; its calls
block, so the fleet runs them in worker threads (``trio.to_thread``). Every
time the fleet keeps (lease expiry, the limiter's log, cooldowns) is the
server's: hosts' own clocks differ, and the server's is the one all share.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .._errors import StateError
from ._config import FleetConfig

_T = TypeVar("_T")

CLOCK_SKEW_ENV = "FORGE_CLOCK_SKEW"
# Retrying an unreachable server: quickly at first, then once a second.
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 1.0

# What a lost server looks like from redis-py (a refused or dropped connection,
# a timeout, a server still loading its data after a restart).
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
)


class FleetUnavailable(StateError):
    """The fleet's Redis server cannot be reached (refused, timed out, loading) or used.

    Attributes:
        outage: The server could not be reached (worth waiting for); False when
            it answered with an error (an old server, a refused command).
    """

    def __init__(self, url: str, reason: str, *, outage: bool = True) -> None:
        what = "cannot be reached" if outage else "refused a command"
        super().__init__(
            f"the fleet's Redis server {what}: {reason}",
            context=(f"server: {_without_password(url)}",),
            hint="start it, or check [fleet] redis / FORGE_REDIS_URL"
            if outage
            else "the fleet needs Redis 6.2 or newer",
        )
        self.url = url
        self.reason = reason
        self.outage = outage


class LeaseLost(StateError):
    """Another host holds the loop now: this host's writes are refused by the fence."""

    def __init__(self, change: str) -> None:
        super().__init__(
            f'change "{change}" is no longer this host\'s: its lease was lost',
            context=(f"change: {change}",),
            hint="another host took the loop over after the lease lapsed; nothing to do here",
        )
        self.change = change


def _without_password(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if "@" in rest:
        rest = "***@" + rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def host_clock() -> float:
    """This host's wall clock, as epoch seconds.

    ``FORGE_CLOCK_SKEW`` (seconds, may be negative) is added: a way to see what
    a host whose clock is off does. The fleet decides nothing by it (the
    server's clock decides); it is reported (``forge fleet status`` shows each
    host's skew) and stamps what is this host's own (its summary file).
    """
    try:
        skew = float(os.environ.get(CLOCK_SKEW_ENV, "0") or 0)
    except ValueError:
        skew = 0.0
    return time.time() + skew


class Connection:
    """A client of the fleet's server, shared by one host's threads.

    Args:
        config: The fleet's configuration (server, timeouts).
        on_outage: Called (from the calling thread) with a reason when a call
            finds the server unreachable, and with ``None`` when it is back.
    """

    def __init__(
        self, config: FleetConfig, *, on_outage: Callable[[str | None], None] | None = None
    ) -> None:
        self.config = config
        self.client: redis.Redis = redis.Redis.from_url(
            config.url,
            socket_connect_timeout=config.connect_timeout,
            socket_timeout=config.command_timeout,
            decode_responses=True,
            # No retries inside the client (its default backs off for seconds):
            # a lost server is reported at once, and the fleet decides what to
            # do (the limiter fails closed, writes wait, leases are judged).
            retry=Retry(NoBackoff(), 0),
        )
        self._on_outage = on_outage
        self._down = False
        self._lock = threading.Lock()
        self.closing = threading.Event()

    def once(self, call: Callable[[redis.Redis], _T]) -> _T:
        """Run ``call(client)`` once.

        Raises:
            FleetUnavailable: the server cannot be reached.
        """
        try:
            result = call(self.client)
        except OUTAGE_ERRORS as exc:
            self._note_down(str(exc) or type(exc).__name__)
            raise FleetUnavailable(self.config.url, str(exc) or type(exc).__name__) from exc
        except redis.exceptions.RedisError as exc:
            raise FleetUnavailable(self.config.url, str(exc), outage=False) from exc
        self._note_up()
        return result

    def retrying(
        self, call: Callable[[redis.Redis], _T], *, give_up: Callable[[], bool] | None = None
    ) -> _T:
        """Run ``call(client)``, waiting out an outage until the server answers.

        Blocks the calling thread (run it in a worker thread). Gives up when the
        connection is closing or ``give_up()`` says so.

        Raises:
            FleetUnavailable: only when giving up.
        """
        delay = _BACKOFF_FIRST
        while True:
            try:
                return self.once(call)
            except FleetUnavailable as exc:
                if not exc.outage or self.closing.is_set() or (give_up is not None and give_up()):
                    raise
            # Woken early when the host shuts down.
            self.closing.wait(delay)
            delay = min(delay * 2, _BACKOFF_MAX)

    def server_time(self) -> float:
        """The server's clock, epoch seconds (one ``TIME``).

        Raises:
            FleetUnavailable: the server cannot be reached.
        """
        seconds, micros = self.once(lambda client: client.time())
        return float(seconds) + float(micros) / 1e6

    def script(self, source: str) -> Any:
        """A Lua script run by its SHA, loaded again when the server has lost it."""
        # redis-py's Script sends EVALSHA and, on NOSCRIPT (a restarted or
        # flushed server), loads the source and runs it again.
        return self.client.register_script(source)

    def close(self) -> None:
        self.closing.set()
        self.client.close()

    @property
    def down(self) -> bool:
        return self._down

    def _note_down(self, reason: str) -> None:
        with self._lock:
            first = not self._down
            self._down = True
        if first and self._on_outage is not None:
            self._on_outage(reason)

    def _note_up(self) -> None:
        if not self._down:
            return
        with self._lock:
            was = self._down
            self._down = False
        if was and self._on_outage is not None:
            self._on_outage(None)


class ServerClock:
    """The server's wall clock, read through this host's monotonic clock.

    Synced with one ``TIME`` at start and at every heartbeat; in between it
    advances with ``time.monotonic``, so neither this host's wall clock nor a
    jump of it moves the time the fleet keeps.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        # (server epoch, this host's monotonic time) read together; replaced
        # whole, so a reader in another thread never mixes two syncs. Until the
        # first sync, the host's own clock is all there is.
        self._anchor = (host_clock(), time.monotonic())

    def sync(self) -> float:
        """Read the server's clock (blocking; raises :class:`FleetUnavailable`)."""
        before = time.monotonic()
        server = self._connection.server_time()
        after = time.monotonic()
        # The server read its clock somewhere in the round trip: take the middle.
        self._anchor = (server, (before + after) / 2)
        return server

    def __call__(self) -> float:
        server, mono = self._anchor
        return server + (time.monotonic() - mono)

    def iso(self) -> str:
        """Now, as the ISO-8601 UTC timestamps of the timeline."""
        stamp = self()
        whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp))
        return f"{whole}.{int((stamp % 1) * 1000):03d}Z"
