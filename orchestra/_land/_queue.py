"""The land queue: each change in turn onto the base, verified on the combined tree.

Each change is combined with the base as it is *now* — including the changes
landed before it in the same run — in a scratch worktree, and its verify runs
there. Only a PASS moves the base; a conflict or a FAIL leaves it as it was
and the run goes on with the next change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._state import STATE_DIR, ChangePaths, read_timeline
from ._events import record
from ._pending import Pending, clear_pending, write_pending
from ._repo import (
    advance,
    all_changes,
    close_scratch,
    combine,
    commit_all,
    head_of,
    mode_for,
    must,
    open_scratch,
    remove_change,
    reset_scratch,
)

Verifier = Callable[[str, Path], Awaitable[tuple[bool, list[str]]]]
"""Runs a change's verify in a folder: ``(passed, failing checks)``."""


@attrs.frozen
class LandSettings:
    """How a land run lands: onto which base, how, and what it keeps."""

    base: str
    mode: str = "rebase"
    keep: bool = False
    checked_out: bool = False


@attrs.frozen
class LandOutcome:
    """What became of one change.

    Attributes:
        change: Its name.
        result: ``landed``, ``conflict`` or ``failed``.
        commit: The base's new head when it landed.
        files: The conflicted paths.
        checks: The failing checks.
        committed: The commit made of work left uncommitted in its worktree.
        cleaned: Whether its worktree and branch were removed.
    """

    change: str
    result: str
    commit: str = ""
    files: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    committed: str = ""
    cleaned: bool = False

    def line(self, base: str) -> str:
        """Its line of the land run's output."""
        if self.result == "landed":
            return f"land: {self.change} — landed on {base} ({self.commit[:7]}), verify PASS"
        if self.result == "conflict":
            return f"land: {self.change} — CONFLICT in {', '.join(self.files)}; base unchanged"
        return (
            f"land: {self.change} — verify FAIL on the combined tree "
            f"({', '.join(self.checks) or 'verify'}); base unchanged"
        )

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def worktree_of(root: Path, change: str) -> Path:
    """The change's worktree, ``.forge/worktrees/<change>``."""
    return root / STATE_DIR / "worktrees" / change


async def land_all(
    root: Path,
    changes: Sequence[str],
    settings: LandSettings,
    verify: Verifier,
    said: Callable[[str], None],
) -> list[LandOutcome]:
    """Land ``changes`` in order; one outcome each. ``said`` gets each line as it happens."""
    base_head = head_of(root, settings.base)
    if base_head is None:
        raise ValueError(f"no branch {settings.base}")  # the command checked it
    outcomes: list[LandOutcome] = []
    scratch = open_scratch(root, base_head)
    try:
        for order, change in enumerate(changes, start=1):
            outcome = await _land_one(root, scratch, change, order, settings, verify, said)
            outcomes.append(outcome)
            said(outcome.line(settings.base))
    finally:
        close_scratch(root)
    return outcomes


async def _land_one(
    root: Path,
    scratch: Path,
    change: str,
    order: int,
    settings: LandSettings,
    verify: Verifier,
    said: Callable[[str], None],
) -> LandOutcome:
    paths = ChangePaths(root, change)
    events = read_timeline(paths.timeline).events
    worktree = worktree_of(root, change)
    committed = ""
    if (worktree / ".git").exists() and all_changes(worktree):
        committed = commit_all(
            worktree, commit_message(change, events, f"forge: uncommitted work of {change}")
        )
        said(f"land: {change} — committed its uncommitted work on forge/{change} ({committed[:7]})")
    old = head_of(root, settings.base) or ""
    tip = head_of(root, f"forge/{change}") or ""
    reset_scratch(scratch, old)
    mode = mode_for(root, old, tip, settings.mode)
    files = combine(
        scratch, old, tip, mode, commit_message(change, events, f"forge land: {change}")
    )
    if files:
        record(paths, "land.conflict", {"base": settings.base, "files": files})
        return LandOutcome(change, "conflict", files=tuple(files), committed=committed)
    passed, checks = await verify(change, scratch)
    if not passed:
        record(paths, "land.failed", {"base": settings.base, "checks": checks, "verify": "FAIL"})
        reset_scratch(scratch, old)
        return LandOutcome(change, "failed", checks=tuple(checks), committed=committed)
    new = must(scratch, "rev-parse", "HEAD")
    # From here to clear_pending a kill is finished by the next run (_pending.py).
    write_pending(
        root,
        Pending(
            change=change,
            base=settings.base,
            old=old,
            new=new,
            mode=mode,
            order=order,
            keep=settings.keep,
            checked_out=settings.checked_out,
        ),
    )
    advance(root, settings.base, new, old, checked_out=settings.checked_out)
    fields = {"base": settings.base, "commit": new, "mode": mode}
    record(paths, "land.done", {**fields, "verify": "PASS", "order": order})
    cleaned = False
    if not settings.keep:
        removed, deleted = remove_change(root, change, worktree)
        record(paths, "land.cleaned", {"worktree": removed, "branch": deleted})
        cleaned = True
    clear_pending(root)
    return LandOutcome(change, "landed", commit=new, committed=committed, cleaned=cleaned)


def commit_message(change: str, events: Sequence[dict[str, Any]], title: str) -> str:
    """A commit message from the change's name and its timeline: iterations, last verify."""
    iterations = sum(1 for event in events if event.get("event") == "iteration.finished")
    verdicts = [event.get("verdict") for event in events if event.get("event") == "verify"]
    verdict = verdicts[-1] if verdicts else "not run"
    return f"{title}\n\nChange {change}: {iterations} iteration(s), last verify {verdict}.\n"
