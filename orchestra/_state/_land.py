"""A change's land state, read from the ``land.*`` events of its timeline.

``forge land`` records how landing a change went (``land.done``,
``land.conflict``, ``land.failed``) and which change it handed back to its loop
(``land.rework``), ``forge clean`` what it removed
(``land.cleaned``) and whom a person gave up on (``land.abandoned``). A change
*has landed* when its latest ``land.*`` event other than ``land.cleaned`` is
``land.done``. This module only reads records: status, the report and clean
all take a change's land state from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ._files import STATE_DIR

LAND_DONE = "land.done"
LAND_CONFLICT = "land.conflict"
LAND_FAILED = "land.failed"
LAND_CLEANED = "land.cleaned"
LAND_ABANDONED = "land.abandoned"
LAND_REWORK = "land.rework"

NOT_LANDED = "none"
LANDED = "landed"
CONFLICT = "conflict"
FAILED = "failed"
ABANDONED = "abandoned"
REWORKED = "reworked"

_STATES = {
    LAND_DONE: LANDED,
    LAND_CONFLICT: CONFLICT,
    LAND_FAILED: FAILED,
    LAND_ABANDONED: ABANDONED,
    LAND_REWORK: REWORKED,
}


@attrs.frozen
class LandState:
    """Where a change stands with landing.

    Attributes:
        state: ``none`` (never tried), ``landed``, ``conflict``, ``failed``,
            ``reworked`` (handed back to its loop) or ``abandoned``.
        base: The base branch it landed on or was tried against ("" when unknown).
        commit: The base's head after landing (``landed``), or merged into its
            branch for a rework (``reworked``).
        mode: How it landed: rebase, merge or squash (``landed`` only).
        order: Its 1-based place in its land run (``landed`` only; 0 when unknown).
        files: The conflicted paths (``conflict``, and ``reworked`` after one).
        checks: The failing checks or verify lines (``failed``, and ``reworked`` after one).
        reason: Why a person abandoned it, and ``by`` who.
        cleaned: Whether ``forge clean`` or ``forge land`` removed its worktree
            or branch since.
    """

    state: str = NOT_LANDED
    base: str = ""
    commit: str = ""
    mode: str = ""
    order: int = 0
    files: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    reason: str = ""
    by: str = ""
    cleaned: bool = False

    @property
    def landed(self) -> bool:
        """Whether the change's latest land outcome is ``land.done``."""
        return self.state == LANDED

    def line(self) -> str:
        """The state in a few words: ``landed on main (abc1234)``, ``conflict (src/x.py)``."""
        if self.state == LANDED:
            where = f" on {self.base}" if self.base else ""
            return f"landed{where} ({self.commit[:7] or '?'})"
        if self.state == CONFLICT:
            return f"conflict ({_listed(self.files)})"
        if self.state == FAILED:
            return f"failed ({_listed(self.checks)})"
        if self.state == REWORKED:
            return f"reworked against {self.base or '?'} ({self.commit[:7] or '?'})"
        return self.state


def land_state(records: Sequence[Mapping[str, Any]]) -> LandState:
    """The land state a timeline's records (oldest first) leave a change in."""
    found = LandState()
    cleaned = False
    for record in records:
        kind = record.get("event")
        if kind == LAND_CLEANED:
            cleaned = True
            continue
        state = _STATES.get(str(kind))
        if state is None:
            continue
        cleaned = False
        found = LandState(
            state=state,
            base=_text(record.get("base")),
            commit=_text(record.get("commit")) if state in (LANDED, REWORKED) else "",
            mode=_text(record.get("mode")) if state == LANDED else "",
            order=_number(record.get("order")) if state == LANDED else 0,
            files=_texts(record.get("files")) if state in (CONFLICT, REWORKED) else (),
            checks=_texts(record.get("checks")) if state in (FAILED, REWORKED) else (),
            reason=_text(record.get("reason")) if state == ABANDONED else "",
            by=_text(record.get("by")) if state == ABANDONED else "",
        )
    return attrs.evolve(found, cleaned=cleaned)


def pending_landing_path(root: Path) -> Path:
    """Where a land run journals the landing under way: ``.forge/land/pending.json``."""
    return root / STATE_DIR / "land" / "pending.json"


def interrupted_landing(root: Path) -> tuple[str, str] | None:
    """``(change, base)`` of a landing a killed ``forge land`` left journalled, if any.

    Only for showing it: the land run itself reads (and judges) the whole journal.
    """
    try:
        data = json.loads(pending_landing_path(root).read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    change, base = data.get("change"), data.get("base")
    return (change, base) if isinstance(change, str) and isinstance(base, str) else None


def _listed(items: tuple[str, ...]) -> str:
    # A status line stays one line: the first few, then how many more.
    if not items:
        return "?"
    shown = ", ".join(items[:3])
    return shown if len(items) <= 3 else f"{shown}, +{len(items) - 3} more"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _texts(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(item) for item in value)
    return ()
