"""What the fleet is doing, read from the server; and a batch's state written out as files.

Also the batch's record for its report: the status, each loop's folder and
each change's whole timeline (:func:`batch_record`); an export writes the
same as files, its summary included, for ``forge report`` to read anywhere.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from .._ratelimit import SlidingWindow
from .._report import fleet_run_id, fleet_summary
from .._state import STATE_DIR, ChangePaths, atomic_write, save_states
from ._config import Keys
from ._connection import Connection
from ._limiter import RedisBackend
from ._queue import ENDED, QUEUED, RUNNING, BatchInfo, LoopSpec, read_batch, read_status
from ._store import read_controls, read_state, timeline_lines

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
            and no other has taken it over yet —, done, escalated), host, ending;
            ``paused`` (by, at, reason) while a person's pause holds it
            (``forge pause C --fleet``), ``held`` what holds it in words.
        limiter: The shared limiter's use (calls, window, used, next free).
        expires_in: Seconds until the ended batch's keys expire (``[fleet]
            keep``), or None while it runs (or never expires).
    """

    name: str
    server_time: float
    batch: BatchInfo | None
    hosts: dict[str, dict[str, Any]]
    loops: dict[str, dict[str, Any]]
    limiter: dict[str, Any] | None
    expires_in: float | None = None

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
            "expires_in": self.expires_in,
        }


def fleet_status(connection: Connection) -> FleetStatus:
    """Read hosts, loops and the limiter (blocking; raises FleetUnavailable)."""
    keys = connection.config.keys

    def read(
        client: Any,
    ) -> tuple[float, BatchInfo | None, dict[str, str], dict[str, Any], float | None]:
        return (
            connection.read_time(client),
            read_batch(client, keys),
            client.hgetall(keys.hosts),
            read_status(client, keys),
            expires_in(client, keys),
        )

    now, batch, raw_hosts, loops, expiry = connection.once(read)
    hosts = host_states(raw_hosts, now, connection.config.lease)
    controls = connection.once(
        lambda client: {change: read_controls(client, keys, change) for change in loops}
    )
    for change, held in controls.items():
        if held.holds:
            loops[change]["held"] = held.why_held()
        if held.paused is not None:
            loops[change]["paused"] = attrs.asdict(held.paused)
    for change, loop in loops.items():
        if loop.get("state") == RUNNING:
            holder = connection.once(partial(_get, keys.lease(change)))
            loop["lease"] = "held" if holder else "lapsed (another host will take it over)"
            host = hosts.get(str(loop.get("host")))
            # A host missing from the list was pruned (lost past forget_hosts): as lost.
            # (Its lease lapsed too: a host just started may claim before its first beat.)
            gone = host is None and not holder
            if gone or (host or {}).get("state") in (LOST, "interrupted"):
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
    return FleetStatus(keys.name, now, batch, hosts, loops, limiter, expiry)


def expires_in(client: Any, keys: Keys) -> float | None:
    """Seconds until the batch expires, or None when it does not (read from its ``batch`` key)."""
    ttl = int(client.pttl(keys.batch))
    return None if ttl < 0 else ttl / 1000


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


@attrs.frozen
class BatchRecord:
    """What a fleet batch's report is made of, as read from the server.

    Attributes:
        status: The fleet's status when read.
        run_id: The batch's run id (the same on every host).
        dirs: Per change whose loop the server still lists: its shared folder
            ("" for a repository loop).
        timelines: Per change, its whole timeline as JSON lines (every host's events).
    """

    status: FleetStatus
    run_id: str
    dirs: dict[str, str]
    timelines: dict[str, bytes]

    def summary(self, *, exported_at: float | None = None) -> dict[str, Any]:
        """The batch's summary as the report reads it."""
        return fleet_summary(self.status.as_json(), run_id=self.run_id, exported_at=exported_at)


def batch_run_id(status: FleetStatus) -> str | None:
    """The submitted batch's run id (None when nothing is submitted)."""
    if status.batch is None:
        return None
    return fleet_run_id(status.name, status.batch.submitted_at)


def batch_record(connection: Connection) -> BatchRecord | None:
    """The batch's status, loops and timelines (blocking; None when nothing is submitted)."""
    keys = connection.config.keys
    status = fleet_status(connection)
    run_id = batch_run_id(status)
    if run_id is None:
        return None
    specs = connection.once(partial(_loop_specs, keys))
    dirs = {spec.change: spec.dir for spec in specs}
    timelines = {}
    for change in sorted(set(status.loops) | set(dirs)):
        lines = connection.once(partial(_timeline_lines, keys, change))
        timelines[change] = "".join(f"{line}\n" for _id, line in lines).encode("utf-8")
    return BatchRecord(status, run_id, dirs, timelines)


def export_summary(record: BatchRecord, root: Path) -> Path:
    """Write the batch's summary as ``.forge/runs/<id>/summary.json`` under ``root``.

    ``forge report`` run there (or ``--from`` there) then finds the batch, and
    reads its loops' timelines from the exported ``.forge/changes/``.
    """
    path = root / STATE_DIR / "runs" / record.run_id / "summary.json"
    summary = record.summary(exported_at=record.status.server_time)
    atomic_write(path, (json.dumps(summary, indent=2) + "\n").encode("utf-8"))
    return path


def host_states(raw: dict[str, str], now: float, lease: float) -> dict[str, dict[str, Any]]:
    """Each host's state from its last heartbeat (``now`` on the server's clock)."""
    hosts: dict[str, dict[str, Any]] = {}
    for host, text in raw.items():
        beat = json.loads(text)
        ago = now - float(beat.get("seen", now))
        hosts[host] = {
            "state": _host_state(beat, ago, lease),
            "last_heartbeat_ago": round(ago, 3),
            "running": beat.get("running", []),
            "max_parallel": beat.get("max_parallel"),
            "clock_skew": beat.get("skew"),
            "finished": bool(beat.get("finished")),
        }
    return hosts


def read_hosts(connection: Connection) -> dict[str, dict[str, Any]]:
    """Every host's state, as :func:`fleet_status` shows it (blocking)."""
    keys = connection.config.keys

    def read(client: Any) -> tuple[float, dict[str, str]]:
        return connection.read_time(client), client.hgetall(keys.hosts)

    now, raw = connection.once(read)
    return host_states(raw, now, connection.config.lease)


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


def _loop_specs(keys: Keys, client: Any) -> list[LoopSpec]:
    # Every loop as submitted is kept in the specs hash (an ended loop's stream
    # entry is deleted); a batch submitted before that hash existed has its
    # specs in the stream entries only. A loop without either is reported
    # without its folder.
    kept = client.hgetall(keys.specs)
    if kept:
        return [LoopSpec.from_json(text) for text in kept.values()]
    entries = client.xrange(keys.loops, "-", "+")
    return [LoopSpec.from_json(fields["loop"]) for _id, fields in entries]
