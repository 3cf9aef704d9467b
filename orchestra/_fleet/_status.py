"""What the fleet is doing, read from the server; and a batch's state written out as files."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from .._ratelimit import SlidingWindow
from .._state import ChangePaths, atomic_write, save_states
from ._config import Keys
from ._connection import Connection
from ._limiter import RedisBackend
from ._queue import ENDED, QUEUED, RUNNING, BatchInfo, read_batch, read_status
from ._store import read_state, timeline_lines

WAITING = "waiting"
"""A loop's state while its host is lost and no other host has taken it over yet."""

LOST = "lost"
"""A host's state when its last heartbeat is older than a lease (killed, cut off)."""


@attrs.frozen
class FleetStatus:
    """One reading of the fleet.

    Attributes:
        name: The batch's name.
        server_time: The server's clock when read (epoch seconds).
        batch: What was submitted, or None.
        hosts: Per host: ``state`` (working, finished, interrupted, or lost when
            its last heartbeat is older than a lease), last heartbeat (seconds
            ago), loops running, clock skew.
        loops: Per change: state (queued, running, waiting — its host was lost
            and no other has taken it over yet —, done, escalated), host, ending.
        limiter: The shared limiter's use (calls, window, used, next free).
    """

    name: str
    server_time: float
    batch: BatchInfo | None
    hosts: dict[str, dict[str, Any]]
    loops: dict[str, dict[str, Any]]
    limiter: dict[str, Any] | None

    def counts(self) -> dict[str, int]:
        states = [loop["state"] for loop in self.loops.values()]
        return {state: states.count(state) for state in (QUEUED, RUNNING, WAITING, *ENDED)}

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server_time": self.server_time,
            "batch": None if self.batch is None else attrs.asdict(self.batch),
            "counts": self.counts(),
            "hosts": self.hosts,
            "loops": self.loops,
            "limiter": self.limiter,
        }


def fleet_status(connection: Connection) -> FleetStatus:
    """Read hosts, loops and the limiter (blocking; raises FleetUnavailable)."""
    keys = connection.config.keys

    def read(client: Any) -> tuple[float, BatchInfo | None, dict[str, str], dict[str, Any]]:
        seconds, micros = client.time()
        return (
            float(seconds) + float(micros) / 1e6,
            read_batch(client, keys),
            client.hgetall(keys.hosts),
            read_status(client, keys),
        )

    now, batch, raw_hosts, loops = connection.once(read)
    hosts: dict[str, dict[str, Any]] = {}
    for host, text in raw_hosts.items():
        beat = json.loads(text)
        ago = now - float(beat.get("seen", now))
        hosts[host] = {
            "state": _host_state(beat, ago, connection.config.lease),
            "last_heartbeat_ago": round(ago, 3),
            "running": beat.get("running", []),
            "max_parallel": beat.get("max_parallel"),
            "clock_skew": beat.get("skew"),
            "finished": bool(beat.get("finished")),
        }
    for change, loop in loops.items():
        if loop.get("state") == RUNNING:
            holder = connection.once(partial(_get, keys.lease(change)))
            loop["lease"] = "held" if holder else "lapsed (another host will take it over)"
            if hosts.get(str(loop.get("host")), {}).get("state") in (LOST, "interrupted"):
                # Nothing runs it: its host is gone, and no other host has claimed it yet.
                loop["state"] = WAITING
    limiter = None
    if batch is not None:
        rule = SlidingWindow(batch.calls, batch.window)
        reading = RedisBackend(connection, keys, "status").peek(rule)
        limiter = {
            "calls": batch.calls,
            "window": batch.window,
            "used": reading.used,
            "next_free_in": round(reading.wait, 3),
            "paused_for": round(reading.paused_for, 3),
            "unavailable": reading.unavailable or None,
        }
    return FleetStatus(keys.name, now, batch, hosts, loops, limiter)


def export_state(connection: Connection, root: Path) -> list[str]:
    """Write every change of the batch as ``.forge/changes/<c>/`` files under ``root``.

    The circuit, verify streak and spend become ``breaker.yaml``,
    ``verify-attempts.yaml`` and ``spend.yaml``; the timeline stream becomes
    ``timeline.jsonl``, line for line. Returns the changes written.
    """
    keys: Keys = connection.config.keys
    changes = sorted(connection.once(lambda client: read_status(client, keys)))
    for change in changes:
        state, _ = connection.once(partial(_read_state, keys, change))
        lines = connection.once(partial(_timeline_lines, keys, change))
        paths = ChangePaths(root, change)
        paths.folder.mkdir(parents=True, exist_ok=True)
        save_states(
            [
                (paths.breaker, state.circuit),
                (paths.verify_attempts, state.verify),
                (paths.spend, state.spend),
            ]
        )
        text = "".join(f"{line}\n" for _id, line in lines)
        atomic_write(paths.timeline, text.encode("utf-8"))
    return changes


def _host_state(beat: dict[str, Any], ago: float, lease: float) -> str:
    if beat.get("interrupted"):
        return "interrupted"
    if beat.get("finished"):
        return "finished"
    return LOST if ago > lease else "working"


def _get(key: str, client: Any) -> Any:
    return client.get(key)


def _read_state(keys: Keys, change: str, client: Any) -> Any:
    return read_state(client, keys, change)


def _timeline_lines(keys: Keys, change: str, client: Any) -> list[tuple[str, str]]:
    return timeline_lines(client, keys, change)
