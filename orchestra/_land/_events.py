"""The land events a change's timeline gets, and what they say about it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._state import ChangePaths, OtherEvent, append_event, exclusive_lock


def record(paths: ChangePaths, name: str, fields: dict[str, Any]) -> None:
    """Append ``name`` with ``fields`` to the change's timeline, under its lock."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, paths.name, OtherEvent(name=name, fields=fields))


def done_at(events: Iterable[Mapping[str, Any]], commit: str) -> tuple[bool, bool]:
    """``(landed, cleaned)``: ``land.done`` at ``commit`` is recorded; ``land.cleaned`` after it."""
    landed = cleaned = False
    for event in events:
        kind = event.get("event")
        if kind == "land.done" and event.get("commit") == commit:
            landed, cleaned = True, False
        elif kind == "land.cleaned" and landed:
            cleaned = True
    return landed, cleaned
