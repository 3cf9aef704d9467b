"""``forge timeline`` of a fleet's change: its stream on the Redis server, every host's events."""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import Any

from .._errors import EXIT_OK
from .._fleet import Connection, FleetConfig, FleetUnavailable, Keys, timeline_lines
from .._state import decode_event, event_record
from .._workspace import Project
from ._common import policy_from
from ._console import Output
from ._follow import POLL_SECONDS, Show
from ._timeline_view import Selection


def fleet_timeline(
    args: argparse.Namespace, out: Output, project: Project, selection: Selection, show: Show
) -> int | None:
    """Show the change's timeline from the server; None when the fleet has none for it.

    Raises:
        FleetUnavailable: with ``--fleet``, the server cannot be reached (without
            it, the note says so and the files are shown).
    """
    config = FleetConfig.from_policy(policy_from(project, args=args).policy.fleet)
    connection = Connection(config)
    keys = config.keys
    try:
        try:
            lines = connection.once(lambda client: timeline_lines(client, keys, args.change))
            # A change submitted to the fleet is the server's even before its first event.
            submitted = bool(
                lines or connection.once(lambda client: client.hexists(keys.status, args.change))
            )
        except FleetUnavailable as exc:
            if args.fleet:
                raise
            out.note(f"{exc.message}; showing this host's files")
            return None
        if not submitted and not args.fleet:
            return None  # not a fleet change: its files are the timeline
        records = [event_record(decode_event(json.loads(line))) for _id, line in lines]
        selection.check(str(record["event"]) for record in records)
        chosen = selection.select(records)
        if out.json_mode and not args.follow:
            out.document({"change": args.change, "events": chosen, "fleet": config.name})
            return EXIT_OK
        for record in chosen:
            show(record)
        if args.follow:
            from ._trio_run import run_interruptible

            last = lines[-1][0] if lines else "-"
            run_interruptible(_follow, connection, config, args.change, last, out, selection, show)
        elif not records:
            out.line(f'no events yet for change "{args.change}"', style="dim")
        elif not chosen:
            out.line(f'none of the {len(records)} events of "{args.change}" match', style="dim")
        return EXIT_OK
    finally:
        connection.close()


async def _follow(
    connection: Connection,
    config: FleetConfig,
    change: str,
    last: str,
    out: Output,
    selection: Selection,
    show: Show,
) -> None:
    """Print the events any host adds, until interrupted; an outage is waited out."""
    import trio

    keys = config.keys
    down = False
    while True:
        await trio.sleep(POLL_SECONDS)
        read = partial(_lines_after, keys, change, last)
        try:
            lines = await trio.to_thread.run_sync(connection.once, read)
        except FleetUnavailable as exc:
            if not exc.outage:
                raise
            if not down:
                out.note(f"the fleet's Redis server cannot be reached ({exc.reason}); waiting")
            down = True
            continue
        down = False
        for entry_id, line in lines:
            record = event_record(decode_event(json.loads(line)))
            if selection.passes(record):  # -n bounds the past only
                show(record)
            last = entry_id


def _lines_after(keys: Keys, change: str, after: str, client: Any) -> list[tuple[str, str]]:
    return timeline_lines(client, keys, change, after)
