"""``forge status`` of a fleet batch: every loop's standing, read from the Redis server.

The same view as a local batch's status — a headline, then per loop where it
stands, what stopped it and the decisions it waits on, its circuit,
iterations, verify streak and spend — with the fleet's own state of each loop
(queued, running, waiting for takeover, done, escalated) and the host it ran on.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import attrs

from .._errors import EXIT_OK, ForgeError
from .._fleet import (
    Connection,
    FleetConfig,
    FleetStatus,
    FleetUnavailable,
    Keys,
    fleet_status,
    read_state,
)
from .._state import event_name, event_record
from .._workspace import Project
from ._common import policy_from
from ._console import Output
from ._standing import DONE, NEEDS_YOU, ORDER, RUNNING, Held, headline, standing

_STYLES = {NEEDS_YOU: "bold red", RUNNING: "cyan", DONE: "green"}


def fleet_status_view(args: argparse.Namespace, out: Output, project: Project) -> int | None:
    """Show the fleet batch's status; None to show this host's files instead.

    Without ``--fleet`` (``FORGE_REDIS_URL`` alone), a server with nothing
    submitted, or one that cannot be reached (said on stderr), leaves the
    status to this host's files, as ``forge timeline`` does.
    """
    fleet = bool(getattr(args, "fleet", False))
    try:
        config = FleetConfig.from_policy(policy_from(project, args=args).policy.fleet)
    except ForgeError as exc:
        if fleet:
            raise
        # FORGE_REDIS_URL alone: a policy that cannot name the fleet leaves the files.
        out.note(f"note: no fleet to read ({exc.message}); showing this host's files")
        return None
    connection = Connection(config)
    try:
        try:
            status = fleet_status(connection)
        except FleetUnavailable as exc:
            if fleet:
                raise
            out.note(f"{exc.message}; showing this host's files")
            return None
        if status.batch is None and not fleet:
            return None  # a fleet named, but no batch on it: this host's files
        rows = [
            fleet_row(change, loop, *connection.once(partial(_read, config.keys, change)))
            for change, loop in sorted(status.loops.items())
        ]
    finally:
        connection.close()
    return _show(status, rows, out)


def fleet_row(change: str, loop: dict[str, Any], state: Any, events: list[Any]) -> dict[str, Any]:
    """One loop's row: its fleet state and host, and its standing from its state and timeline."""
    records = [event_record(event) for event in events]
    circuit, verify, spend = state.circuit, state.verify, state.spend
    held = Held.of(circuit, verify)
    stands = standing(change, records, held, where="", root="")
    fleet_state = str(loop.get("state"))
    # The fleet's word wins over the timeline's: an escalated loop needs a person
    # even when its last run's record is another host's.
    state_word = NEEDS_YOU if fleet_state == "escalated" else stands.state
    last = events[-1] if events else None
    return {
        "change": change,
        "fleet_state": fleet_state,
        "host": loop.get("host"),
        "ending": loop.get("reason"),
        "detail": loop.get("detail"),
        "standing": state_word,
        "circuit": circuit.state,
        "circuit_reason": circuit.reason,
        "escalated": circuit.escalated,
        "iterations_used": circuit.iterations_used,
        "verify": attrs.asdict(verify),
        "spend": attrs.asdict(spend),
        "blocker": None if stands.blocker is None else attrs.asdict(stands.blocker),
        "decisions": [attrs.asdict(decision) for decision in stands.decisions],
        "last_event": f"{event_name(last)} at {last.ts}" if last else None,
    }


def _show(status: FleetStatus, rows: list[dict[str, Any]], out: Output) -> int:
    states = [row["standing"] for row in rows]
    said = headline(states)
    if out.json_mode:
        counts = {state: states.count(state) for state in ORDER}
        out.document(
            {
                "fleet": status.name,
                "submitted": status.batch is not None,
                "changes": rows,
                "headline": said,
                "counts": counts,
                "fleet_counts": status.counts(),
            }
        )
        return EXIT_OK
    if status.batch is None:
        out.line(f'fleet "{status.name}": nothing submitted')
        return EXIT_OK
    out.line(f'fleet "{status.name}": {said}', style="bold")
    for row in rows:
        out.line()
        where = f"{row['fleet_state']}"
        if row["host"]:
            where += f" on {row['host']}"
        out.styled((row["change"], "bold"), (f"  {where}", "dim"))
        out.styled(("  standing: ", None), (row["standing"], _STYLES.get(row["standing"])))
        blocker = row["blocker"]
        if blocker is not None:
            out.line(f"  blocker:  {blocker['gate']} — {blocker['reason']}", style="red")
        elif row["standing"] == NEEDS_YOU and row["ending"]:
            out.line(f"  blocker:  {row['ending']} — {row['detail'] or row['ending']}", style="red")
        for decision in row["decisions"]:
            out.line(f"  decide:   {decision['what']} — {decision['command']}", style="yellow")
        circuit = row["circuit"] + (f" ({row['circuit_reason']})" if row["circuit_reason"] else "")
        if row["escalated"]:
            circuit += " — escalated: a human must review"
        out.line(f"  circuit:  {circuit}, {row['iterations_used']} iteration(s) used")
        spend = row["spend"]
        out.line(
            f"  spend:    {spend['tokens']} tokens, {spend['tool_calls']} tool calls, "
            f"${spend['cost_usd']:.4f}"
        )
        out.line(f"  last:     {row['last_event'] or '-'}")
    return EXIT_OK


def _read(keys: Keys, change: str, client: Any) -> tuple[Any, list[Any]]:
    return read_state(client, keys, change)
