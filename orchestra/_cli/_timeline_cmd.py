"""``forge timeline <change>``: the session timeline as a table, as JSON, or followed live."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from .._errors import EXIT_OK, StateError
from .._state import ChangePaths, decode_event, event_record, parse_timeline, require_change
from ._common import project_from
from ._console import Output

FOLLOW_POLL_SECONDS = 0.2
_SHOWN_FIRST = ("ts", "seq", "event", "change")


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    if getattr(args, "fleet", False) or os.environ.get("FORGE_REDIS_URL"):
        # A fleet's timelines are on its server, with every host's events.
        from ._fleet_timeline import fleet_timeline

        shown = fleet_timeline(args, out, project, _print_event)
        if shown is not None:
            return shown
    paths = ChangePaths(project.root, args.change)
    if not args.follow:
        # As forge spend and forge status say: a change with no state is a typo
        # (exit 2, the changes there are); --follow may wait for one to start.
        require_change(paths, "forge timeline")
    data = _read_bytes(paths.timeline)
    read = parse_timeline(data)
    for problem in read.problems(paths.timeline):
        out.note(problem)
    if out.json_mode and not args.follow:
        out.document(
            {
                "change": paths.name,
                "events": [event_record(decode_event(raw)) for raw in read.events],
                "torn_last_line": read.torn_last_line is not None,
                "bad_lines": list(read.bad_lines),
            }
        )
        return EXIT_OK
    for raw in read.events:
        _print_event(event_record(decode_event(raw)), out)
    if args.follow:
        from ._trio_run import run_interruptible

        # Follow from the end of the last whole line read: nothing appended since is lost.
        run_interruptible(_follow, paths, out, data.rfind(b"\n") + 1)
    elif not read.events:
        out.line(f'no events yet for change "{paths.name}"', style="dim")
    return EXIT_OK


async def _follow(paths: ChangePaths, out: Output, offset: int) -> None:
    """Print events appended after ``offset``, until interrupted."""
    import trio  # only here: reading a timeline once does not need trio

    pending = b""
    while True:
        await trio.sleep(FOLLOW_POLL_SECONDS)
        try:
            size = paths.timeline.stat().st_size
        except FileNotFoundError:
            continue
        if size < offset:  # replaced or truncated by a human: start over
            offset, pending = 0, b""
        if size == offset:
            continue
        with paths.timeline.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read(size - offset)
        offset = size
        # Only whole lines are printed: a line being written is not torn yet.
        complete, _, pending = (pending + chunk).rpartition(b"\n")
        for raw in parse_timeline(complete + b"\n").events if complete else ():
            _print_event(event_record(decode_event(raw)), out)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _print_event(event: dict[str, Any], out: Output) -> None:
    if out.json_mode:
        print(json.dumps(event, ensure_ascii=False), flush=True)
        return
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
