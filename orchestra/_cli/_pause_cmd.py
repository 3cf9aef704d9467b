"""``forge pause``, ``forge resume CHANGE`` and ``forge stop``: a person's hold on one loop.

A pause holds the loop before its next iteration (the current one finishes)
until ``forge resume``; the other loops of the batch go on. A stop ends the
running loop after its current iteration, or at once while it waits (paused,
cooling down, for a permit or an answer), with the ending ``stopped``. The
request reaches the loop through the change's folder (``controls.yaml``): no
server to start. With ``--fleet`` (or ``FORGE_REDIS_URL`` set and the batch
has the change) it goes to the fleet's server, where whichever host runs the
loop reads it. Each is recorded on the change's timeline with who asked and why.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .._errors import EXIT_OK
from .._fleet import fleet_meant
from .._operator import operator
from .._state import (
    CONTROL_PAUSED,
    CONTROL_RESUMED,
    CONTROL_STOP,
    ChangePaths,
    LoopControls,
    OtherEvent,
    Request,
    ask_stop,
    loop_running,
    pause_loop,
    require_change,
    resume_loop,
    utc_now_iso,
)
from ._common import project_from
from ._console import Output

if TYPE_CHECKING:
    from .._fleet import Connection, ControlSet


def pause(args: argparse.Namespace, out: Output) -> int:
    if fleet_meant(args.fleet):
        done = _fleet_pause(args, out)
        if done is not None:
            return done
    paths = _change(args, "forge pause")
    request = _request(args)
    event = OtherEvent(name=CONTROL_PAUSED, fields={"by": request.by, "reason": request.reason})
    before = pause_loop(paths, request, lambda _before: event)
    name = paths.name
    if before.paused is not None:
        out.line(f'pause: "{name}" is already {_since(before.paused, "paused")}')
        _document(out, name, "paused", before.paused, changed=False)
        return EXIT_OK
    if loop_running(paths):
        out.line(f'pause: "{name}" holds after its current iteration; forge resume {name} goes on')
    else:
        out.line(
            f'pause: no loop runs "{name}" now: its next run holds before its first '
            f"iteration; forge resume {name} lifts it"
        )
    _document(out, name, "paused", request, changed=True)
    return EXIT_OK


def resume(args: argparse.Namespace, out: Output) -> int:
    if fleet_meant(args.fleet):
        done = _fleet_resume(args, out)
        if done is not None:
            return done
    paths = _change(args, "forge resume")
    request = _request(args)
    before = resume_loop(
        paths, lambda held: OtherEvent(name=CONTROL_RESUMED, fields=resumed_fields(request, held))
    )
    name = paths.name
    if not before.holds:
        out.line(f'resume: "{name}" is not paused: nothing to resume')
        _document(out, name, "resumed", None, changed=False)
        return EXIT_OK
    out.line(f'resume: "{name}" goes on ({before.why_held()})')
    _document(out, name, "resumed", request, changed=True)
    return EXIT_OK


def stop(args: argparse.Namespace, out: Output) -> int:
    if fleet_meant(args.fleet):
        done = _fleet_stop(args, out)
        if done is not None:
            return done
    paths = _change(args, "forge stop")
    name = paths.name
    if not loop_running(paths):
        out.line(f'stop: no loop runs "{name}" now: nothing to stop')
        _document(out, name, "stopped", None, changed=False)
        return EXIT_OK
    request = _request(args)
    event = OtherEvent(name=CONTROL_STOP, fields={"by": request.by, "reason": request.reason})
    ask_stop(paths, request, lambda _before: event)
    out.line(f'stop: "{name}" {STOPS_WHEN}')
    _document(out, name, "stopped", request, changed=True)
    return EXIT_OK


STOPS_WHEN = "stops after its current iteration (at once if it waits); the others go on"


def resumed_fields(request: Request, before: LoopControls) -> dict[str, Any]:
    """The ``control.resumed`` event's fields: who resumed, why, and what held the loop."""
    return {"by": request.by, "reason": request.reason, "held": before.why_held()}


def _change(args: argparse.Namespace, command: str) -> ChangePaths:
    project = project_from(args)
    return require_change(ChangePaths(project.root, args.change), command)


def _request(args: argparse.Namespace, at: str | None = None) -> Request:
    reason = " ".join((args.reason or "").split())
    return Request(by=operator(), at=at or utc_now_iso(), reason=reason)


def _since(request: Request, verb: str) -> str:
    return f"{request.describe(verb)} (since {request.at})"


def _document(
    out: Output, change: str, control: str, request: Request | None, *, changed: bool
) -> None:
    if out.json_mode:
        out.document(_as_document(change, control, request, changed))


def _as_document(
    change: str, control: str, request: Request | None, changed: bool
) -> dict[str, Any]:
    """``--json``'s one document: the change, the control, whether it changed, the request."""
    given = None
    if request is not None:
        given = {"by": request.by, "at": request.at, "reason": request.reason}
    return {"change": change, "control": control, "changed": changed, "request": given}


# -- a fleet loop, on its server ---------------------------------------------


def _fleet_pause(args: argparse.Namespace, out: Output) -> int | None:
    from .._fleet import ANY

    done = _fleet_set(args, out, "paused", where=ANY, keep=True, event=CONTROL_PAUSED)
    if done is None:
        return None
    applied, request, fleet = done
    if not applied.written and applied.before.paused is not None:
        held = applied.before.paused.describe("paused")
        out.line(f'pause: "{args.change}" is already {held} (fleet "{fleet}")')
    else:
        out.line(
            f'pause: "{args.change}" (fleet "{fleet}") holds before its next iteration, '
            f"on whichever host runs it; forge resume {args.change} goes on"
        )
    given = request if applied.written else applied.before.paused
    _fleet_document(out, args.change, fleet, "paused", given, applied.written)
    return EXIT_OK


def _fleet_resume(args: argparse.Namespace, out: Output) -> int | None:
    from .._fleet import ANY, set_control
    from ._fleet_control_cmd import connected, fleet_loop

    with connected(project_from(args), args) as connection:
        if fleet_loop(connection, args, out, steers=True) is None:
            return None
        request, when = _server_request(connection, args)
        from .._fleet import read_controls

        keys = connection.config.keys
        before = connection.once(lambda client: read_controls(client, keys, args.change))
        fleet = connection.config.name
        if not before.holds:
            out.line(f'resume: "{args.change}" (fleet "{fleet}") is not paused: nothing to resume')
            _fleet_document(out, args.change, fleet, "resumed", None, False)
            return EXIT_OK
        event = OtherEvent(name=CONTROL_RESUMED, fields=resumed_fields(request, before))
        applied = set_control(
            connection,
            args.change,
            "paused",
            None,
            where=ANY,
            keep=False,
            events=[event],
            when=when,
        )
        if applied.written:
            out.line(f'resume: "{args.change}" (fleet "{fleet}") goes on ({before.why_held()})')
        else:
            out.line(f'resume: "{args.change}" (fleet "{fleet}") is not paused: nothing to resume')
        _fleet_document(out, args.change, fleet, "resumed", request, applied.written)
    return EXIT_OK


def _fleet_stop(args: argparse.Namespace, out: Output) -> int | None:
    from .._fleet import RUNNING

    done = _fleet_set(args, out, "stop", where=RUNNING, keep=False, event=CONTROL_STOP)
    if done is None:
        return None
    applied, request, fleet = done
    if applied.state is not None:
        out.line(
            f'stop: "{args.change}" (fleet "{fleet}") is {applied.state}, not running: '
            "nothing to stop"
        )
        if applied.state == "queued":
            out.line(f"forge fleet cancel {args.change} takes it out of the queue", style="dim")
    else:
        out.line(f'stop: "{args.change}" (fleet "{fleet}") {STOPS_WHEN}')
    given = request if applied.written else None
    _fleet_document(out, args.change, fleet, "stopped", given, applied.written)
    return EXIT_OK


def _fleet_set(
    args: argparse.Namespace, out: Output, member: str, *, where: str, keep: bool, event: str
) -> tuple[ControlSet, Request, str] | None:
    """Give the fleet loop a pause or a stop, recorded as ``event``; None: not a fleet loop.

    Returns what the server did, the request, and the fleet's name.
    """
    from .._fleet import set_control
    from ._fleet_control_cmd import connected, fleet_loop

    with connected(project_from(args), args) as connection:
        if fleet_loop(connection, args, out, steers=True) is None:
            return None
        request, when = _server_request(connection, args)
        said = OtherEvent(name=event, fields={"by": request.by, "reason": request.reason})
        applied = set_control(
            connection,
            args.change,
            member,
            request,
            where=where,
            keep=keep,
            events=[said],
            when=when,
        )
        return applied, request, connection.config.name


def _server_request(connection: Connection, args: argparse.Namespace) -> tuple[Request, str]:
    """The request, stamped with the server's time (the hosts' loops compare with it)."""
    from .._fleet import server_iso

    when = server_iso(connection.server_time())
    return _request(args, at=when), when


def _fleet_document(
    out: Output, change: str, fleet: str, control: str, request: Request | None, changed: bool
) -> None:
    if out.json_mode:
        out.document({**_as_document(change, control, request, changed), "fleet": fleet})
