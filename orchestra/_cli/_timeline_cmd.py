"""``forge timeline <change>``: the session timeline in words, raw, as JSON, or followed live."""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from .._errors import EXIT_OK, UsageError
from .._state import ChangePaths, decode_event, event_record, parse_timeline, require_change
from ._common import project_from
from ._console import Output
from ._follow import POLL_SECONDS, Show, Tail, in_words, new_events, read_whole
from ._timeline_view import Selection, since_moment

_SHOWN_FIRST = ("ts", "seq", "event", "change")


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    selection = _selection(args)
    show = _shower(args, out)
    if getattr(args, "fleet", False) or os.environ.get("FORGE_REDIS_URL"):
        # A fleet's timelines are on its server, with every host's events.
        from ._fleet_timeline import fleet_timeline

        shown = fleet_timeline(args, out, project, selection, show)
        if shown is not None:
            return shown
    paths = ChangePaths(project.root, args.change)
    if not args.follow:
        # As forge spend and forge status say: a change with no state is a typo
        # (exit 2, the changes there are); --follow may wait for one to start.
        require_change(paths, "forge timeline")
    data = read_whole(paths.timeline)
    read = parse_timeline(data)
    for problem in read.problems(paths.timeline):
        out.note(problem)
    records = [event_record(decode_event(raw)) for raw in read.events]
    selection.check(str(record["event"]) for record in records)
    chosen = selection.select(records)
    if out.json_mode and not args.follow:
        out.document(
            {
                "change": paths.name,
                "events": chosen,
                "torn_last_line": read.torn_last_line is not None,
                "bad_lines": list(read.bad_lines),
            }
        )
        return EXIT_OK
    for record in chosen:
        show(record)
    if args.follow:
        from ._trio_run import run_interruptible

        # Follow from the end of the last whole line read: nothing appended since is lost.
        run_interruptible(_follow, paths, _passing(selection, show), data.rfind(b"\n") + 1)
    elif not records:
        out.line(f'no events yet for change "{paths.name}"', style="dim")
    elif not chosen:
        out.line(f'none of the {len(records)} events of "{paths.name}" match', style="dim")
    return EXIT_OK


def _selection(args: argparse.Namespace) -> Selection:
    """``-n``, ``--since`` and ``--kind`` as a :class:`Selection`.

    Raises:
        UsageError: (exit 2) for a negative ``-n`` or a ``--since`` that is no span or time.
    """
    if args.n is not None and args.n < 0:
        raise UsageError(f"forge timeline: -n {args.n}: expected a count of events, 0 or more")
    since = None if args.since is None else since_moment(args.since, time.time())
    return Selection(count=args.n, since=since, kinds=tuple(args.kind))


def _shower(args: argparse.Namespace, out: Output) -> Show:
    """How one record is printed: a JSON line, its raw fields, or in words."""
    if out.json_mode:
        return _print_json
    if args.raw:
        return lambda record: _print_event(record, out)
    return in_words(out)


def _passing(selection: Selection, show: Show) -> Show:
    """``show`` for the records ``--since`` and ``--kind`` keep (``-n`` bounds the past only)."""

    def shown(record: dict[str, Any]) -> None:
        if selection.passes(record):
            show(record)

    return shown


async def _follow(paths: ChangePaths, show: Show, offset: int) -> None:
    """Print events appended after ``offset``, until interrupted."""
    import trio  # only here: reading a timeline once does not need trio

    tail = Tail(paths.timeline, offset)
    while True:
        await trio.sleep(POLL_SECONDS)
        for event in new_events(tail):
            show(event_record(event))


def _print_json(event: dict[str, Any]) -> None:
    print(json.dumps(event, ensure_ascii=False), flush=True)


def _print_event(event: dict[str, Any], out: Output) -> None:
    """The raw form: seq, time and kind, then every other field as ``key=value``."""
    details = " ".join(
        f"{key}={_short(value)}" for key, value in event.items() if key not in _SHOWN_FIRST
    )
    out.styled(
        (f"{_header(event, 'seq'):>4}  ", "dim"),
        (f"{_header(event, 'ts')}  ", "dim"),
        (f"{_header(event, 'event'):<18} ", "bold"),
        (details, None),
    )


def _header(event: dict[str, Any], key: str) -> str:
    """A header field as text; ``?`` where a hand-edited line has none (or null)."""
    value = event.get(key)
    return "?" if value is None else str(value)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:119] + "…"
