"""``forge steer CHANGE "text"``: a person's guidance for a loop's next iteration.

The guidance waits in the change's folder (``guidance.yaml``) until the
loop's next iteration starts, whether the loop is running, cooling down or
escalated (then it goes with the probe, or with the run a reset resumes).
That iteration gets it at ``{guidance}`` in its prompt (appended when the
prompt has none) and as ``FORGE_GUIDANCE``. ``--once`` (the default) is for
that iteration only; ``--until-cleared`` for every one until
``forge steer CHANGE --clear``. With ``--fleet`` (or ``FORGE_REDIS_URL`` set
and the batch has the change) the guidance waits on the fleet's server
instead, where whichever host runs the loop takes it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import EXIT_OK, UsageError
from .._fleet import fleet_meant
from .._operator import operator
from .._state import (
    GUIDANCE_CLEARED,
    GUIDANCE_GIVEN,
    ONCE,
    UNTIL_CLEARED,
    ChangePaths,
    Guidance,
    GuidanceState,
    OtherEvent,
    clear_guidance,
    give_guidance,
    read_guidance,
    require_change,
    utc_now_iso,
)
from ._common import project_from
from ._console import Output

if TYPE_CHECKING:
    from .._fleet import Connection


def run(args: argparse.Namespace, out: Output) -> int:
    text = _text(args)
    if args.clear and text:
        raise UsageError("--clear takes no text", hint=f"forge steer {args.change} --clear")
    if fleet_meant(args.fleet):
        done = _fleet_steer(args, out, text)
        if done is not None:
            return done
    project = project_from(args)
    command = "forge steer --clear" if args.clear else "forge steer"
    paths = require_change(ChangePaths(project.root, args.change), command)
    by = operator()
    if args.clear:
        before = clear_guidance(
            paths,
            lambda was: OtherEvent(
                name=GUIDANCE_CLEARED, fields={"by": by, "count": len(was.entries)}
            ),
        )
        out.line(f'steer: cleared {len(before.entries)} piece(s) of guidance for "{paths.name}"')
        if out.json_mode:
            out.document({"change": paths.name, "cleared": len(before.entries)})
        return EXIT_OK
    if not text:
        waiting = read_guidance(paths)
        blocked = None
        if waiting.blocked:
            blocked = f"steer: the guidance file was {waiting.blocked}: forge steer --clear"
        _list(out, paths.name, waiting, blocked)
        return EXIT_OK
    keep = UNTIL_CLEARED if args.until_cleared else ONCE
    given = Guidance(text=text, by=by, at=utc_now_iso(), keep=keep)
    said = OtherEvent(name=GUIDANCE_GIVEN, fields={"by": by, "keep": keep, "text": text})
    after = give_guidance(paths, given, said)
    when = "its next iteration" if keep == ONCE else "every iteration until --clear"
    out.line(f'steer: guidance for "{paths.name}" waits for {when} ({len(after.entries)} waiting)')
    if after.blocked:
        out.line(
            f"steer: the guidance file was {after.blocked}: nothing is delivered until "
            f"forge steer {paths.name} --clear",
            style="yellow",
        )
    if out.json_mode:
        out.document({"change": paths.name, "given": _entry(given), "waiting": len(after.entries)})
    return EXIT_OK


def _list(out: Output, change: str, waiting: GuidanceState, blocked: str | None) -> None:
    """What waits for the change's next iteration; ``blocked``: the line saying it is unreadable."""
    for given in waiting.entries:
        out.line(f"steer: waiting ({given.keep}, by {given.by}): {given.text}")
    if not waiting.entries:
        out.line(f'steer: no guidance waiting for "{change}"')
    if blocked:
        out.line(blocked)
    if out.json_mode:
        out.document(
            {
                "change": change,
                "waiting": [_entry(given) for given in waiting.entries],
                "blocked": waiting.blocked,
            }
        )


def _text(args: argparse.Namespace) -> str:
    """The guidance, from the argument or ``--file`` (not both)."""
    if args.text is not None and args.file is not None:
        raise UsageError("give the guidance as text or --file, not both", hint="forge steer C TEXT")
    if args.file is not None:
        try:
            text = Path(args.file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--file {args.file}: cannot read it ({exc})") from exc
        if not text.strip():
            raise UsageError(f"--file {args.file} is empty", hint="write the guidance in it")
        return text.strip()
    text = (args.text or "").strip()
    if args.text is not None and not text:
        raise UsageError("the guidance is empty", hint='forge steer C "use the fixture"')
    return text


def _entry(given: Guidance) -> dict[str, str]:
    return {"text": given.text, "by": given.by, "at": given.at, "keep": given.keep}


# -- a fleet loop, on its server ---------------------------------------------


def _fleet_steer(args: argparse.Namespace, out: Output, text: str) -> int | None:
    """``forge steer`` of a fleet loop; None when the change is this host's own."""
    from ._fleet_control_cmd import connected, fleet_loop

    with connected(project_from(args), args) as connection:
        # Listing only reads: this host's file is a fair answer when the server is out of reach.
        if fleet_loop(connection, args, out, steers=bool(args.clear or text)) is None:
            return None
        if args.clear:
            return _fleet_clear(connection, args.change, out)
        if not text:
            return _fleet_list(connection, args.change, out)
        return _fleet_give(connection, args, out, text)


def _fleet_give(connection: Connection, args: argparse.Namespace, out: Output, text: str) -> int:
    from .._fleet import give_fleet_guidance, server_iso

    keep = UNTIL_CLEARED if args.until_cleared else ONCE
    at = server_iso(connection.server_time())
    given = Guidance(text=text, by=operator(), at=at, keep=keep)
    after = give_fleet_guidance(connection, args.change, given)
    fleet = connection.config.name
    when = "its next iteration" if keep == ONCE else "every iteration until --clear"
    out.line(
        f'steer: guidance for "{args.change}" (fleet "{fleet}") waits for {when}, on whichever '
        f"host runs it ({len(after.entries)} waiting)"
    )
    if out.json_mode:
        out.document(
            {
                "change": args.change,
                "fleet": fleet,
                "given": _entry(given),
                "waiting": len(after.entries),
            }
        )
    return EXIT_OK


def _fleet_clear(connection: Connection, change: str, out: Output) -> int:
    from .._fleet import clear_fleet_guidance, server_iso

    when = server_iso(connection.server_time())
    before = clear_fleet_guidance(connection, change, by=operator(), when=when)
    fleet = connection.config.name
    out.line(
        f'steer: cleared {len(before.entries)} piece(s) of guidance for "{change}" '
        f'(fleet "{fleet}")'
    )
    if before.blocked:
        out.line("steer: the unreadable guidance on the fleet's server is gone too")
    if out.json_mode:
        out.document({"change": change, "fleet": fleet, "cleared": len(before.entries)})
    return EXIT_OK


def _fleet_list(connection: Connection, change: str, out: Output) -> int:
    from .._fleet import read_fleet_guidance

    waiting = read_fleet_guidance(connection, change)
    blocked = None
    if waiting.blocked:
        blocked = (
            f"steer: the guidance waiting is {waiting.blocked}: nothing is "
            f"delivered until forge steer {change} --clear --fleet"
        )
    _list(out, change, waiting, blocked)
    return EXIT_OK
