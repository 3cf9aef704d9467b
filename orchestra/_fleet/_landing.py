"""What ``forge land`` reads of a fleet batch, and the land events it writes back.

A land run on a fleet batch needs, per loop and in submission order: where its
code came from (``repo``, ``push``), how it ended, its effective verify (in
the loop as submitted) and its timeline (whether it landed already). The land
events the run records locally are then appended to the change's timeline on
the server, so the fleet's report shows what landed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import attrs

from .._state import OtherEvent, event_record
from ._config import Keys
from ._connection import Connection
from ._control import WRITE, _control, operator
from ._queue import LoopSpec
from ._status import _loop_specs, batch_run_id, fleet_status
from ._store import read_state

RECORDED = "recorded"
"""The field of a land event on the server holding its local timestamp (matched on sync)."""


@attrs.frozen
class LandLoop:
    """One loop of the batch as a land run sees it.

    Attributes:
        spec: The loop as submitted (None when the server kept no spec for it).
        state: Its fleet state (queued, running, done, escalated).
        reason: How it ended (``done``, ``iterations``, …), or None while it runs.
        events: Its timeline on the server, as records (every host's events).
    """

    change: str
    spec: LoopSpec | None
    state: str
    reason: str | None
    events: tuple[dict[str, Any], ...] = ()


@attrs.frozen
class LandBatch:
    """The fleet batch a land run takes: its id and its loops in submission order."""

    name: str
    run_id: str
    loops: tuple[LandLoop, ...]


def land_batch(connection: Connection) -> LandBatch | None:
    """The submitted batch's loops, in submission order (blocking; None when none is).

    Raises:
        FleetUnavailable: the server cannot be reached.
    """
    keys = connection.config.keys
    status = fleet_status(connection)
    run_id = batch_run_id(status)
    if run_id is None:
        return None
    specs = {spec.change: spec for spec in connection.once(partial(_loop_specs, keys))}
    order: list[str] = [str(c) for c in connection.once(lambda c: c.lrange(keys.order, 0, -1))]
    # A batch submitted before the order was kept: by name, as its report lists it.
    known = [c for c in dict.fromkeys(order) if c in status.loops or c in specs]
    changes = known + sorted((set(status.loops) | set(specs)) - set(known))
    loops = []
    for change in changes:
        loop = status.loops.get(change, {})
        _state, events = connection.once(partial(_read_state, keys, change))
        reason = loop.get("reason")
        loops.append(
            LandLoop(
                change=change,
                spec=specs.get(change),
                state=str(loop.get("state", "")),
                reason=reason if isinstance(reason, str) else None,
                events=tuple(event_record(event) for event in events),
            )
        )
    return LandBatch(name=keys.name, run_id=run_id, loops=tuple(loops))


def append_land_events(
    connection: Connection,
    change: str,
    local: Sequence[Mapping[str, Any]],
    remote: Sequence[Mapping[str, Any]],
) -> int:
    """Append to the change's server timeline the ``local`` land events it lacks.

    ``local`` are the land events of the change's local timeline, ``remote``
    its timeline on the server. An event already sent carries its local
    timestamp (``recorded``), so a run sends each once, and a run killed
    before it sent them sends them the next time. Returns how many were sent.

    Raises:
        UsageError: the batch has no loop for the change, or a host runs it now.
        FleetUnavailable: the server cannot be reached.
    """
    sent = {
        (str(event.get("event")), str(event.get(RECORDED)))
        for event in remote
        if event.get(RECORDED) is not None
    }
    by = operator()
    header = ("ts", "seq", "event", "change")
    events = [
        OtherEvent(
            name=str(event.get("event")),
            fields={
                **{k: v for k, v in event.items() if k not in header},
                RECORDED: str(event.get("ts")),
                "by": by,
            },
        )
        for event in local
        if (str(event.get("event")), str(event.get("ts"))) not in sent
    ]
    if events:
        _control(connection, change, WRITE, {}, events, by=by, reason="")
    return len(events)


def _read_state(keys: Keys, change: str, client: Any) -> Any:
    return read_state(client, keys, change)
