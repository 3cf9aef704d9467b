"""``forge fleet status --watch``: the fleet live, across hosts, until Ctrl-C.

Every heartbeat the fleet is read again from the server: its hosts (state,
last heartbeat, clock skew), its loops (how many queued, running, waiting for
takeover, done, escalated, and which host runs each), the limiter's permits in
use against its limit, and a pause the provider asked for. A host seen lost
for the first time is said in a line of its own, which stays on the screen.

On a terminal the frame is a rich ``Live`` redrawn in place; elsewhere (a
pipe, a log) each frame that differs from the last is printed whole, under
its time, and ``--json`` prints each as one line of JSON. ``--count N`` stops
after N frames (0: until interrupted, exit 130 as every follow does).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import trio

from .._fleet import LOST, WAITING, Connection, FleetStatus, FleetUnavailable, fleet_status
from ._console import Output
from ._devnull import to_devnull

Line = tuple[str, str | None]

_STATE_STYLES = {"working": "cyan", "finished": "green", "interrupted": "yellow", LOST: "bold red"}
_LOOP_STYLES = {"running": "cyan", WAITING: "yellow", "done": "green", "escalated": "red"}


def frame_lines(status: FleetStatus, notices: Sequence[str]) -> list[Line]:
    """One frame of the watch, as styled lines (pure: the same on a terminal and in a log)."""
    counts = status.counts()
    lines: list[Line] = [
        (
            f'fleet "{status.name}": {len(status.loops)} loop(s) — '
            + ", ".join(f"{counts[state]} {state}" for state in counts),
            "bold",
        )
    ]
    if status.batch is None:
        return [(f'fleet "{status.name}": nothing submitted', "bold"), *_notice_lines(notices)]
    limiter = status.limiter or {}
    if limiter.get("unavailable"):
        lines.append((f"permits: UNAVAILABLE — {limiter['unavailable']}", "red"))
    elif limiter:
        permits = (
            f"permits: {limiter['used']}/{limiter['calls']} in use "
            f"(per {limiter['window']:g}s, the whole fleet)"
        )
        if limiter.get("next_free_in"):
            permits += f" · next in {limiter['next_free_in']:.1f}s"
        lines.append((permits, "red" if limiter["used"] >= limiter["calls"] else None))
        paused = limiter.get("paused_for") or 0
        lines.append(
            (f"pause: the provider asked to wait, {paused:.0f}s left", "yellow")
            if paused > 0
            else ("pause: none", "dim")
        )
    lines.append(("hosts:", "bold"))
    if not status.hosts:
        lines.append(("  (none has reported yet)", "dim"))
    for host, info in sorted(status.hosts.items()):
        skew = info.get("clock_skew")
        clock = f" · skew {skew:+.1f}s" if isinstance(skew, int | float) else ""
        running = ", ".join(info.get("running") or []) or "-"
        state = str(info["state"])
        shown = state.upper() if state == LOST else state
        lines.append(
            (
                f"  {host:<16} {shown:<12} beat {info['last_heartbeat_ago']:.1f}s ago{clock}"
                f" · running {running}",
                _STATE_STYLES.get(str(info["state"])),
            )
        )
    lines.append(("loops:", "bold"))
    for change, loop in sorted(status.loops.items()):
        loop_state = str(loop.get("state"))
        holder = loop.get("host")
        where = ""
        if loop_state == WAITING:
            where = f"its host {holder} was lost; waiting for takeover"
        elif holder:
            where = f"on {holder}"
        ending = loop.get("reason")
        held = "paused by a person" if loop.get("paused") else loop.get("held")
        parts = (where, ending if ending != loop_state else "", held)
        said = " · ".join(str(p) for p in parts if p)
        lines.append((f"  {change:<16} {loop_state:<10} {said}", _LOOP_STYLES.get(loop_state)))
    return [*lines, *_notice_lines(notices)]


def _notice_lines(notices: Sequence[str]) -> list[Line]:
    return [(f"! {notice}", "bold red") for notice in notices]


def newly_lost(status: FleetStatus, told: set[str]) -> list[str]:
    """The notices for hosts lost since the last frame (``told`` remembers who was said)."""
    said = []
    for host, info in sorted(status.hosts.items()):
        if info["state"] == LOST and host not in told:
            told.add(host)
            running = ", ".join(info.get("running") or []) or "no loop"
            said.append(
                f"host {host} is LOST: no heartbeat for {info['last_heartbeat_ago']:.1f}s "
                f"(longer than a lease); it was running {running}"
            )
    return said


async def watch(connection: Connection, out: Output, *, count: int) -> None:
    """Show the fleet every heartbeat (``count`` frames, 0: until cancelled)."""
    told: set[str] = set()
    notices: list[str] = []
    shown = 0
    last: list[Line] | None = None
    lines: list[Line]
    live = None
    if out.live and not out.json_mode:
        from rich.live import Live

        live = Live(console=out.console, auto_refresh=False, transient=False)
        live.start()
    try:
        while True:
            status: FleetStatus | None = None
            try:
                status = await trio.to_thread.run_sync(fleet_status, connection)
            except FleetUnavailable as exc:
                if not exc.outage:
                    raise
                lines = [(f"the Redis server cannot be reached ({exc.reason}); waiting", "red")]
            else:
                notices.extend(newly_lost(status, told))
                lines = frame_lines(status, notices)
            if live is not None:
                live.update(_renderable(lines), refresh=True)
            elif out.json_mode:
                if status is not None:
                    _json_line({**status.as_json(), "notices": list(notices)})
            elif lines != last:
                out.line(time.strftime("-- %H:%M:%S", time.localtime()), style="dim")
                for text, style in lines:
                    out.line(text, style=style)
            last = lines
            shown += 1
            if count and shown >= count:
                return
            await trio.sleep(connection.config.heartbeat)
    finally:
        if live is not None:
            live.stop()


def _json_line(document: dict[str, Any]) -> None:
    """One frame as one line of JSON on stdout (``--json``: a stream of documents)."""
    try:
        sys.stdout.write(json.dumps(document, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        to_devnull(sys.stdout)
        raise


def _renderable(lines: Sequence[Line]) -> Any:
    from rich.console import Group
    from rich.text import Text

    return Group(*(Text(text, style=style or "") for text, style in lines))
