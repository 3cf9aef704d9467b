"""Where the fleet's Redis server is, what its keys are called, and its durations."""

from __future__ import annotations

import os

import attrs

from .._errors import ConfigError
from .._policy import FleetPolicy
from ._deployment import Deployment, parse_url
from ._env import REDIS_URL_ENV


@attrs.frozen
class FleetConfig:
    """The ``[fleet]`` table made concrete: a server to reach and a key prefix.

    Attributes:
        url: The Redis server (``redis://host:6379/0``), cluster
            (``redis+cluster://…``) or sentinels (``redis+sentinel://…``).
        name: The batch's name; every key starts with ``forge:{<name>}:``.
        lease: Seconds a loop's lease lasts without renewal.
        heartbeat: Seconds between renewals (and host heartbeats).
        connect_timeout: Seconds allowed to connect.
        command_timeout: Seconds allowed for one command's answer.
        keep: Seconds an ended batch's keys stay before they expire.
        timeline_max: Events each change's timeline keeps on the server.
        forget_hosts: Seconds after its last heartbeat a lost host is dropped.
        export: A folder the ended batch is written into before it expires ("": none).
    """

    url: str
    name: str
    lease: float
    heartbeat: float
    connect_timeout: float
    command_timeout: float
    keep: float = 7 * 86400.0
    timeline_max: int = 2000
    forget_hosts: float = 3600.0
    export: str = ""

    @classmethod
    def from_policy(
        cls, policy: FleetPolicy, *, environ: dict[str, str] | None = None
    ) -> FleetConfig:
        """The fleet a policy names; ``FORGE_REDIS_URL`` wins over ``[fleet] redis``.

        Raises:
            ConfigError: when no server is named, the URL is not one of a Redis
                server, cluster or sentinel (see :mod:`._deployment`), or
                ``forget_hosts`` is not longer than ``lease``.
        """
        if policy.forget_hosts.seconds <= policy.lease.seconds:
            # A lost host counts as lost a lease after its last heartbeat: dropped
            # sooner, its loops would show running on no host at all.
            raise ConfigError(
                "fleet.forget_hosts must be longer than fleet.lease",
                problems=(
                    f"fleet.forget_hosts: {policy.forget_hosts.seconds:g}s is not longer than "
                    f"fleet.lease ({policy.lease.seconds:g}s): a lost host would be dropped "
                    "before it counts as lost",
                ),
                hint='set [fleet] forget_hosts longer than lease (the default: "1h")',
            )
        env = os.environ if environ is None else environ
        url = env.get(REDIS_URL_ENV, "").strip() or policy.redis
        if not url:
            raise ConfigError(
                "no Redis server for the fleet",
                problems=("fleet.redis: not set (and FORGE_REDIS_URL is not set)",),
                hint='set [fleet] redis = "redis://host:6379/0" in forge.toml, or FORGE_REDIS_URL',
            )
        source = REDIS_URL_ENV if env.get(REDIS_URL_ENV, "").strip() else "fleet.redis"
        parse_url(url, source=source)
        return cls(
            url=url,
            name=policy.name,
            lease=policy.lease.seconds,
            heartbeat=policy.heartbeat.seconds,
            connect_timeout=policy.connect_timeout.seconds,
            command_timeout=policy.command_timeout.seconds,
            keep=policy.keep.seconds,
            timeline_max=policy.timeline_max,
            forget_hosts=policy.forget_hosts.seconds,
            export=policy.export,
        )

    @property
    def deployment(self) -> Deployment:
        """The server, cluster or sentinel the URL names."""
        return parse_url(self.url, source="fleet.redis")

    @property
    def keys(self) -> Keys:
        return Keys(self.name)


@attrs.frozen
class Keys:
    """Every key of one batch, under ``forge:{<name>}:``.

    The braces are a Redis Cluster hash tag: only the name between them is
    hashed, so every key of a batch lives in one slot (one node), and a script
    or a pipeline may touch several of them. Every key is built here.

    Per change: ``change:<c>`` (a hash: circuit, verify, spend, seq), ``timeline:<c>``
    (a stream of its events), ``fence:<c>`` (the fencing token), ``lease:<c>``.
    For the batch: ``batch`` (what was submitted), ``loops`` (the stream loops
    are handed out from, group ``workers``), ``specs`` (each loop as submitted, to
    requeue it), ``order`` (the changes in submission order), ``status`` (each
    loop's state), ``hosts`` (heartbeats), and the limiter's ``limiter:*``.
    """

    name: str

    @property
    def prefix(self) -> str:
        return f"forge:{{{self.name}}}:"

    def change(self, change: str) -> str:
        return f"{self.prefix}change:{change}"

    def timeline(self, change: str) -> str:
        return f"{self.prefix}timeline:{change}"

    def fence(self, change: str) -> str:
        return f"{self.prefix}fence:{change}"

    def lease(self, change: str) -> str:
        return f"{self.prefix}lease:{change}"

    @property
    def batch(self) -> str:
        return f"{self.prefix}batch"

    @property
    def loops(self) -> str:
        return f"{self.prefix}loops"

    @property
    def status(self) -> str:
        return f"{self.prefix}status"

    @property
    def specs(self) -> str:
        return f"{self.prefix}specs"

    @property
    def order(self) -> str:
        return f"{self.prefix}order"

    @property
    def hosts(self) -> str:
        return f"{self.prefix}hosts"

    @property
    def limiter_log(self) -> str:
        return f"{self.prefix}limiter:log"

    @property
    def limiter_queue(self) -> str:
        return f"{self.prefix}limiter:queue"

    @property
    def limiter_deadlines(self) -> str:
        return f"{self.prefix}limiter:deadlines"

    @property
    def limiter_seq(self) -> str:
        return f"{self.prefix}limiter:seq"

    @property
    def limiter_pause(self) -> str:
        return f"{self.prefix}limiter:pause"

    def notified(self, what: str) -> str:
        """Set (NX) by the one host that sends a notice: ``batch``, ``lost:<host>``."""
        return f"{self.prefix}notified:{what}"


GROUP = "workers"
