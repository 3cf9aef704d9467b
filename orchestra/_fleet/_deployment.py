"""What kind of Redis deployment a fleet URL names, and the redis-py client for it.

- ``redis://[user:password@]host:port/db`` (``rediss://`` for TLS, ``unix://``
  for a socket): one server, read by redis-py's own URL parser (its query
  parameters, ``ssl_ca_certs`` and the rest, included).
- ``redis+cluster://[user:password@]host:port[,host:port…]/``
  (``rediss+cluster://`` for TLS): a Redis Cluster, found from any of the nodes.
- ``redis+sentinel://[user:password@]host:port[,host:port…]/service[/db]``
  (``rediss+sentinel://`` for TLS to the servers): the master the sentinels
  name for ``service``; after a failover the client asks them again.

The credentials and TLS parameters of a cluster or sentinel URL are the
servers'; the sentinels themselves are asked without them.
"""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import attrs
import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import parse_url as parse_server_url
from redis.retry import Retry
from redis.sentinel import Sentinel

from .._errors import ConfigError

Kind = Literal["server", "cluster", "sentinel"]
SCHEMES: dict[str, tuple[Kind, bool]] = {
    "redis": ("server", False),
    "rediss": ("server", True),
    "unix": ("server", False),
    "redis+cluster": ("cluster", False),
    "rediss+cluster": ("cluster", True),
    "redis+sentinel": ("sentinel", False),
    "rediss+sentinel": ("sentinel", True),
}
# The query parameters a cluster or sentinel URL passes on to each connection.
_TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_ca_path")
_DEFAULT_PORT = {"cluster": 6379, "sentinel": 26379}
_CERT_REQS = ("none", "optional", "required")


@attrs.frozen
class Deployment:
    """A fleet URL taken apart.

    Attributes:
        url: The URL as given (for one server, redis-py reads it whole).
        kind: ``server``, ``cluster`` or ``sentinel``.
        tls: The servers are reached over TLS.
        nodes: Cluster nodes or sentinels to start from (host, port).
        service: The sentinels' name for the master.
        db: The database number (a sentinel's master; a cluster has only 0).
        username: The ACL user (None: the default user).
        password: The password (None: no ``AUTH``).
        options: TLS query parameters for each connection.
    """

    url: str
    kind: Kind
    tls: bool = False
    nodes: tuple[tuple[str, int], ...] = ()
    service: str = ""
    db: int = 0
    username: str | None = None
    password: str | None = None
    options: tuple[tuple[str, str], ...] = ()

    @property
    def where(self) -> str:
        """Host and port to name in a message (the first node for a cluster or sentinel)."""
        if self.nodes:
            host, port = self.nodes[0]
            return f"{host}:{port}"
        parts = urlsplit(self.url)
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"


def parse_url(url: str, *, source: str) -> Deployment:
    """The deployment ``url`` names (``source`` names where it came from, for errors).

    Raises:
        ConfigError: the scheme is unknown, or a cluster/sentinel URL is malformed.
    """
    scheme, sep, _rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        known = ", ".join(f"{name}://" for name in SCHEMES)
        raise ConfigError(
            f"{source}: expected a URL like redis://host:6379/0, got {redact(url)!r}",
            problems=(f"{source}: the scheme must be one of {known}",),
        )
    kind, tls = SCHEMES[scheme.lower()]
    parts = urlsplit(url)
    _check_cert_reqs(dict(parse_qsl(parts.query)), url, source)
    if kind == "server":
        return _server(url, tls, source)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    username, password = _credentials(userinfo)
    nodes = tuple(_node(entry, kind, url, source) for entry in hosts.split(",") if entry)
    if not nodes:
        raise ConfigError(
            f"{source}: no {'node' if kind == 'cluster' else 'sentinel'} in {redact(url)!r}",
            problems=(f"{source}: name at least one host:port after {scheme}://",),
        )
    path = [segment for segment in parts.path.split("/") if segment]
    service, db = "", 0
    if kind == "sentinel":
        if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise ConfigError(
                f"{source}: a sentinel URL names the master's service, got {redact(url)!r}",
                problems=(f"{source}: expected {scheme}://host:26379/<service>[/<db>]",),
            )
        service = unquote(path[0])
        db = int(path[1]) if len(path) == 2 else 0
    elif path and path != ["0"]:
        raise ConfigError(
            f"{source}: a Redis Cluster has only database 0, got {redact(url)!r}",
            problems=(f"{source}: expected {scheme}://host:port[,host:port]/",),
        )
    options = tuple(parse_qsl(parts.query))
    unknown = [name for name, _ in options if name not in _TLS_OPTIONS]
    if unknown:
        raise ConfigError(
            f"{source}: unknown URL parameter(s) {', '.join(unknown)}",
            problems=(f"{source}: a {kind} URL takes {', '.join(_TLS_OPTIONS)}",),
        )
    return Deployment(
        url=url,
        kind=kind,
        tls=tls,
        nodes=nodes,
        service=service,
        db=db,
        username=username,
        password=password,
        options=options,
    )


def _server(url: str, tls: bool, source: str) -> Deployment:
    """One server's URL, checked by redis-py's own parser (port, db, query parameters)."""
    parts = urlsplit(url)
    problem = ""
    if parts.scheme != "unix" and parts.path.strip("/") and not parts.path.strip("/").isdigit():
        problem = f"the database must be a number, got {parts.path.strip('/')!r}"
    else:
        try:
            parse_server_url(url)  # type: ignore[no-untyped-call]
        except ValueError as exc:
            problem = str(exc)
    if problem:
        raise ConfigError(
            f"{source}: {redact(url)!r}: {problem.rstrip('.')}",
            problems=(f"{source}: expected redis://[user:password@]host:port/db[?parameters]",),
        )
    return Deployment(url=url, kind="server", tls=tls)


def _check_cert_reqs(query: dict[str, str], url: str, source: str) -> None:
    value = query.get("ssl_cert_reqs")
    if value is not None and value.lower() not in _CERT_REQS:
        raise ConfigError(
            f"{source}: ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}, got {value!r}",
            problems=(f"{source}: {redact(url)!r}",),
        )


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    if not userinfo:
        return None, None
    user, colon, password = userinfo.partition(":")
    if not colon:
        # redis://secret@host, as redis-py reads it: a password alone.
        return None, unquote(user)
    return (unquote(user) or None), unquote(password)


def _node(entry: str, kind: Kind, url: str, source: str) -> tuple[str, int]:
    host, colon, port = entry.rpartition(":")
    if not colon:
        return entry, _DEFAULT_PORT[kind]
    if not host or not port.isdigit():
        raise ConfigError(
            f"{source}: {entry!r} is not host:port in {redact(url)!r}",
            problems=(f"{source}: {entry!r}",),
        )
    return host.strip("[]"), int(port)


def redact(url: str) -> str:
    """The URL without its password (what messages show)."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return f"{scheme}{sep}{netloc}{slash}{tail}"


def open_client(deployment: Deployment, *, connect_timeout: float, command_timeout: float) -> Any:
    """A redis-py client for the deployment (``Redis`` or ``RedisCluster``), not yet connected.

    No retries inside the client (its default backs off for seconds): a lost
    server is reported at once, and the fleet decides what to do (the limiter
    fails closed, writes wait, leases are judged).
    """
    common: dict[str, Any] = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": command_timeout,
        "decode_responses": True,
        "retry": Retry(NoBackoff(), 0),
    }
    if deployment.kind == "server":
        return redis.Redis.from_url(deployment.url, **common)
    servers: dict[str, Any] = {
        "username": deployment.username,
        "password": deployment.password,
        **dict(deployment.options),
    }
    if deployment.tls:
        servers["ssl"] = True
    if deployment.kind == "cluster":
        return RedisCluster(
            startup_nodes=[
                ClusterNode(host, port)  # type: ignore[no-untyped-call]
                for host, port in deployment.nodes
            ],
            **common,
            **servers,
        )
    sentinel = Sentinel(
        list(deployment.nodes),
        sentinel_kwargs={
            "socket_connect_timeout": connect_timeout,
            "socket_timeout": command_timeout,
            "retry": Retry(NoBackoff(), 0),
        },
    )
    return sentinel.master_for(deployment.service, db=deployment.db, **common, **servers)
