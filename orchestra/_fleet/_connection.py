"""One host's connection to the fleet's Redis server, and the server's clock.

redis-py's blocking client (one server, a cluster or a sentinel's master:
see :mod:`._deployment`), with connect and command timeouts; its calls
block, so the fleet runs them in worker threads (``trio.to_thread``). Every
time the fleet keeps (lease expiry, the limiter's log, cooldowns) is the
server's: hosts' own clocks differ, and the server's is the one all share.

What goes wrong is told apart: a server that cannot be reached is an outage
(waited out); refused credentials, a TLS setup that cannot work, a batch that
is gone from the server and a server too old are not, and stop the command
with what to do about them.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import redis

from .._errors import EXIT_USAGE, StateError
from ._config import FleetConfig
from ._deployment import Deployment, open_client, redact

_T = TypeVar("_T")

CLOCK_SKEW_ENV = "FORGE_CLOCK_SKEW"
# Retrying an unreachable server: quickly at first, then once a second.
_BACKOFF_FIRST = 0.05
_BACKOFF_MAX = 1.0
OLDEST_SERVER = (6, 2)
# How often a sentinel deployment's client asks which server is the master.
_MASTER_CHECK = 0.2

# What a lost server looks like from redis-py (a refused or dropped connection,
# a timeout, a server still loading its data after a restart, a cluster
# reshaping itself or a sentinel with no master to name yet).
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.BusyLoadingError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.TryAgainError,
    redis.exceptions.RedisClusterUnreachableError,
    redis.exceptions.SlotNotCoveredError,
)
# What a cluster's client raises when no startup node would do, building it or
# reading the layout again (not a RedisError: judged apart, by what the nodes said).
_CLUSTER_LAYOUT: tuple[type[Exception], ...] = (redis.exceptions.RedisClusterException,)
# Credentials refused: at connect (AUTH) or by a command (ACL permissions).
_AUTH_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.AuthenticationError,
    redis.exceptions.AuthorizationError,
    redis.exceptions.NoPermissionError,
    redis.exceptions.AuthenticationWrongNumberOfArgsError,
)
_AUTH_REPLIES = re.compile(
    r"^(NOAUTH|WRONGPASS|NOPERM)\b|invalid username-password|HELLO must be called with the client"
    r" already authenticated",
    re.I,
)
# What a server that needs a password says to a client that sent none.
_NO_CREDENTIALS = re.compile(
    r"^NOAUTH\b|HELLO must be called with the client already authenticated"
)
# A TLS failure that waiting does not mend: an untrusted certificate, a
# handshake with something that does not speak TLS, a missing certificate file.
_TLS_REASONS = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|WRONG_VERSION_NUMBER|wrong version"
    r"|UNKNOWN_PROTOCOL|PEM lib|No such file|hostname mismatch|doesn't match",
    re.I,
)


class FleetUnavailable(StateError):
    """The fleet's Redis server cannot be reached (refused, timed out, loading) or used.

    Attributes:
        outage: The server could not be reached (worth waiting for); False when
            it answered with an error (an old server, a refused command).
    """

    def __init__(
        self,
        url: str,
        reason: str,
        *,
        outage: bool = True,
        message: str | None = None,
        hint: str | None = None,
    ) -> None:
        what = "cannot be reached" if outage else "refused a command"
        super().__init__(
            message or f"the fleet's Redis server {what}: {reason}",
            context=(f"server: {redact(url)}",),
            hint=hint
            or (
                "start it, or check [fleet] redis / FORGE_REDIS_URL"
                if outage
                else "check what the server says above"
            ),
        )
        self.url = url
        self.reason = reason
        self.outage = outage


class FleetRefused(FleetUnavailable):
    """The server cannot be used as configured: its credentials or TLS (exit 2).

    Not an outage: waiting does not mend it, so it is never waited out.
    """

    exit_code = EXIT_USAGE


class BatchVanished(FleetUnavailable):
    """The batch's keys are gone from the server (one restarted without persistence)."""

    def __init__(self, url: str, name: str, reason: str) -> None:
        super().__init__(
            url,
            reason,
            outage=False,
            message=f"the batch {name} is no longer on the server "
            f"(restarted without persistence?) — submit it again",
            hint="forge fleet submit --batch FILE (add --replace if part of it is left); "
            "keep the server's data across restarts with appendonly yes",
        )
        self.name = name


class LeaseLost(StateError):
    """Another host holds the loop now: this host's writes are refused by the fence."""

    def __init__(self, change: str) -> None:
        super().__init__(
            f'change "{change}" is no longer this host\'s: its lease was lost',
            context=(f"change: {change}",),
            hint="another host took the loop over after the lease lapsed; nothing to do here",
        )
        self.change = change


def refused_credentials(url: str, reason: str) -> FleetRefused:
    return FleetRefused(
        url,
        reason,
        outage=False,
        message=f"the Redis server refused the credentials: {reason}",
        hint="check the user and password in [fleet] redis / FORGE_REDIS_URL "
        "(redis://user:password@host:6379/0), and that the ACL user may run the "
        "fleet's commands (streams, hashes, scripts: +@all ~forge:* is enough)",
    )


def tls_failure(url: str, reason: str) -> FleetRefused:
    return FleetRefused(
        url,
        reason,
        outage=False,
        message=f"the TLS connection to the Redis server failed: {reason}",
        hint="a rediss:// URL names the CA that signed the server's certificate "
        "(?ssl_ca_certs=/path/ca.crt); a client certificate with ssl_certfile and "
        "ssl_keyfile; a server that speaks TLS needs rediss://, one that does not redis://",
    )


def plain_to_tls(url: str, reason: str) -> FleetRefused:
    return FleetRefused(
        url,
        reason,
        outage=False,
        message="the Redis server speaks TLS, and the URL asks for a plain connection",
        hint="use rediss:// (with ?ssl_ca_certs=/path/ca.crt when a private CA signed "
        "its certificate)",
    )


def too_old(url: str, reason: str, version: str) -> FleetUnavailable:
    return FleetUnavailable(
        url,
        reason,
        outage=False,
        message=f"the fleet's Redis server is version {version}: {reason}",
        hint="the fleet needs Redis 6.2 or newer",
    )


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
        self.deployment: Deployment = config.deployment
        # Built on first use, inside once(): a cluster's client connects as it is
        # built, and an unreachable cluster or refused credentials must be judged
        # (waited out, or named) like any other failed call, not raised from here.
        self._client: Any = None
        self._building = threading.Lock()
        self._on_outage = on_outage
        self._master_checked = -_MASTER_CHECK
        self._down = False
        self._lock = threading.Lock()
        self.closing = threading.Event()

    @property
    def client(self) -> Any:
        """The redis-py client (``Redis`` or ``RedisCluster``), built on first use.

        Raises whatever redis-py raises while building it (a cluster connects
        to find its nodes): call it inside :meth:`once`, which judges that.
        """
        client = self._client
        if client is None:
            with self._building:
                if self._client is None:
                    self._client = open_client(
                        self.deployment,
                        connect_timeout=self.config.connect_timeout,
                        command_timeout=self.config.command_timeout,
                    )
                client = self._client
        return client

    def once(self, call: Callable[[Any], _T]) -> _T:
        """Run ``call(client)`` once.

        Raises:
            FleetUnavailable: the server cannot be reached (``outage``), or
                answered with an error.
            FleetRefused: it refused the credentials, or TLS cannot work.
            BatchVanished: the batch's stream is gone from the server.
        """
        try:
            if self.deployment.kind == "sentinel":
                self._follow_master()
            result = call(self.client)
        except Exception as exc:
            problem = self._judge(exc)
            if problem is None:
                raise
            if problem.outage:
                self._note_down(problem.reason)
            raise problem from exc
        self._note_up()
        return result

    def _follow_master(self) -> None:
        """Ask the sentinels which server is the master, at most every ``_MASTER_CHECK`` s.

        A server that died is left on the outage path (the next connection asks
        the sentinels). One that was failed over while alive (``SENTINEL
        FAILOVER``, a maintenance) stays a master until the sentinels demote it,
        and would take writes it then drops: asking the sentinels bounds that to
        one check, as idle connections to the old master are dropped at once.
        """
        now = time.monotonic()
        if now < self._master_checked + _MASTER_CHECK:
            return
        self._master_checked = now
        # Not reachable, or no master named yet: the call itself will say so.
        with contextlib.suppress(redis.exceptions.RedisError):
            self.client.connection_pool.get_master_address()

    def _judge(self, exc: Exception) -> FleetUnavailable | None:
        """What a failed call means for the fleet (None: not a Redis error)."""
        url = self.config.url
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, _AUTH_ERRORS) or (
            isinstance(exc, redis.exceptions.ResponseError) and _AUTH_REPLIES.search(reason)
        ):
            if _NO_CREDENTIALS.search(reason):
                reason = f"it needs a password, and the URL gives none ({reason})"
            return refused_credentials(url, reason)
        if isinstance(exc, _CLUSTER_LAYOUT) and not isinstance(exc, OUTAGE_ERRORS):
            return self._judge_cluster_layout(exc, reason)
        if isinstance(exc, OUTAGE_ERRORS):
            if self.deployment.tls and _is_tls_failure(exc, reason):
                return tls_failure(url, reason)
            if not self.deployment.tls and _closed_at_once(reason) and self._speaks_tls():
                return plain_to_tls(url, reason)
            return FleetUnavailable(url, reason)
        if isinstance(exc, redis.exceptions.ResponseError) and reason.startswith("NOGROUP"):
            return BatchVanished(url, self.config.name, reason)
        if isinstance(exc, redis.exceptions.RedisError):
            version = self._server_version()
            if version is not None and older_than_needed(version):
                return too_old(url, reason, version)
            return FleetUnavailable(url, reason, outage=False)
        return None

    def _judge_cluster_layout(self, exc: Exception, reason: str) -> FleetUnavailable | None:
        """A cluster whose layout could not be read (building the client, or after a change).

        redis-py asks every startup node, then raises one
        ``RedisClusterException`` naming the last node's error and chained to
        it: that error is judged as a server's would be (refused credentials,
        TLS, an outage). None: another misuse of the client, not the server's.
        """
        url = self.config.url
        cause = exc.__cause__
        if isinstance(cause, redis.exceptions.RedisError):
            judged = self._judge(cause)
            if judged is not None:
                return judged
        if "slots are not covered" in reason:
            # A cluster reshaping itself (a node failed, no replica promoted yet).
            return FleetUnavailable(url, reason)
        if "cannot be connected" in reason or "not enabled" in reason:
            if _AUTH_REPLIES.search(reason.rpartition("node: ")[2]):
                return refused_credentials(url, reason)
            # No node would do for another reason (cluster mode not enabled on it).
            return FleetUnavailable(url, reason, outage=False)
        return None

    def _server_version(self) -> str | None:
        """``redis_version`` from ``INFO server`` (None when it cannot be read)."""
        try:
            info = self.client.info("server")
        except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException):
            return None
        # A cluster answers per node: any node's version will do (the oldest matters).
        if isinstance(info, dict) and "redis_version" not in info:
            versions = [str(v.get("redis_version")) for v in info.values() if isinstance(v, dict)]
            return min(versions, key=_version_tuple) if versions else None
        return str(info.get("redis_version")) if isinstance(info, dict) else None

    def _speaks_tls(self) -> bool:
        """Whether the server completes a TLS handshake (checked when a plain one fails)."""
        if self.deployment.kind != "server" or self.config.url.startswith("unix://"):
            return False
        host, _, port = self.deployment.where.rpartition(":")
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        try:
            with socket.create_connection((host, int(port)), self.config.connect_timeout) as raw:
                raw.settimeout(self.config.connect_timeout)
                with context.wrap_socket(raw, server_hostname=host):
                    return True
        except (OSError, ValueError):
            return False

    def retrying(
        self, call: Callable[[Any], _T], *, give_up: Callable[[], bool] | None = None
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
        return self.once(self.read_time)

    def read_time(self, client: Any) -> float:
        """The server's clock read with ``client`` (inside a call to :meth:`once`).

        On a cluster, the clock of the node holding the batch's slot: the one
        its scripts, lease expiries and heartbeats go by (another node's may
        differ).
        """
        if self.deployment.kind == "cluster":
            node = client.get_node_from_key(self.config.keys.batch)
            seconds, micros = client.time(target_nodes=node)
        else:
            seconds, micros = client.time()
        return float(seconds) + float(micros) / 1e6

    def script(self, source: str) -> Any:
        """A Lua script run by its SHA, loaded again when the server has lost it."""
        return _Script(self, source)

    def close(self) -> None:
        self.closing.set()
        if self._client is not None:
            self._client.close()

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


class _Script:
    """A Lua script, registered with the client when first run (inside ``once``).

    redis-py's Script sends EVALSHA and, on NOSCRIPT (a restarted or flushed
    server), loads the source and runs it again. Registering needs the client,
    which a cluster builds by connecting: so not before the first call.
    """

    def __init__(self, connection: Connection, source: str) -> None:
        self._connection = connection
        self._source = source
        self._script: Any = None

    def __call__(self, keys: Any = (), args: Any = (), client: Any = None) -> Any:
        if self._script is None:
            # Two threads may both register it: the same script, harmless.
            self._script = self._connection.client.register_script(self._source)
        return self._script(keys=keys, args=args, client=client)


def _is_tls_failure(exc: BaseException, reason: str) -> bool:
    causes = [exc, exc.__cause__, exc.__context__]
    if any(isinstance(cause, ssl.SSLCertVerificationError) for cause in causes):
        return True
    return bool(_TLS_REASONS.search(reason))


def _closed_at_once(reason: str) -> bool:
    # A TLS server drops a plain client's first command without a word.
    return "closed by server" in reason.lower() or "reset by peer" in reason.lower()


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def older_than_needed(version: str) -> bool:
    """Whether a server's ``redis_version`` is older than the fleet needs (6.2)."""
    return _version_tuple(version)[:2] < OLDEST_SERVER


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
