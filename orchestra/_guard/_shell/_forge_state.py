"""Forge's own state, guarded whatever the project's ``[protect]`` lists say.

The hooks' spec already freezes the state files that decide whether a loop
may go on (the verdicts, circuits, spend, waivers: ``orchestra._protect``).
The guard adds every change's timeline, the log of record, which the loop's
integrity check lets grow but which no agent has any business writing: a
shell command that would delete, truncate, rewrite or append to one is
refused. And an agent's file tools (Write, Edit, …) may write nothing in
``.forge/`` at all, but for the loops' worktrees in ``.forge/worktrees/``,
which are checkouts of the project.

This runs on every tool call of an agent: it imports only :mod:`os` and
:mod:`orchestra._protect`'s matching core.
"""

from __future__ import annotations

from ..._protect import FROZEN, Entry, ProtectSpec
from ._harm import root_relative

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._state import Analysis

TIMELINES = ".forge/changes/*/timeline.jsonl"
_FORGE = ".forge"
_WORKTREES = ".forge/worktrees"


def with_forge_state(spec: ProtectSpec) -> ProtectSpec:
    """``spec`` with Forge's own state added (frozen, before the rest: strictest first)."""
    key = TIMELINES
    if any(entry.mode == FROZEN and entry.text == key for entry in spec.entries):
        return spec
    guarded = ProtectSpec(fold=spec.fold)
    guarded.entries = (Entry(key, FROZEN, fold=spec.fold), *spec.entries)
    return guarded


def check_forge_folder(analysis: Analysis, verb: str, path: str) -> None:
    """Refuse a file tool's write of ``path`` (absolute, resolved) anywhere in ``.forge/``."""
    relative = root_relative(analysis, path)
    if not relative:
        return
    key = analysis.key(relative)
    inside = key == _FORGE or key.startswith(_FORGE + "/")
    if not inside or key == _WORKTREES or key.startswith(_WORKTREES + "/"):
        return
    analysis.refuse(relative, FROZEN, f'{verb} would change "{relative}" in Forge\'s own folder')
