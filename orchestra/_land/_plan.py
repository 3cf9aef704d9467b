"""Which changes a land run takes, in which order: pure functions of the batch and timelines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._errors import UsageError

LAND_EVENTS = ("land.done", "land.conflict", "land.failed", "land.abandoned")


@attrs.frozen
class LandPlan:
    """The changes to land, in order, and those left out with the reason.

    Attributes:
        changes: The change names to land, in the order they land.
        skipped: ``(change, why)`` for each batch change not taken.
    """

    changes: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...] = ()


def batch_changes(summary: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """``(change, reason)`` of every loop of a ``summary.json``, in the batch's order."""
    loops = summary.get("loops")
    if not isinstance(loops, list):
        return []
    found: list[tuple[str, str | None]] = []
    for loop in loops:
        if isinstance(loop, dict) and isinstance(loop.get("change"), str):
            reason = loop.get("reason")
            found.append((loop["change"], reason if isinstance(reason, str) else None))
    return found


def has_landed(events: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the change's latest land event (``land.cleaned`` aside) is ``land.done``."""
    latest = None
    for event in events:
        if event.get("event") in LAND_EVENTS:
            latest = event.get("event")
    return latest == "land.done"


def order_changes(
    batch: Sequence[tuple[str, str | None]],
    *,
    named: Sequence[str],
    order: Sequence[str],
    has_branch: Mapping[str, bool],
    landed: Mapping[str, bool],
) -> LandPlan:
    """The plan: the named changes, or the batch's ``done`` ones with a branch, not landed.

    Args:
        batch: The batch's loops, ``(change, reason)``, in submission order.
        named: Changes the person named (empty: take them from the batch).
        order: An explicit order (``--order``); the rest follow in batch order.
        has_branch: Whether each change has its ``forge/<change>`` branch.
        landed: Whether each change has landed already.

    Raises:
        UsageError: a named change that has no branch and has not landed, an
            ordered one the run does not take, or an order
            that names a change twice.
    """
    skipped: list[tuple[str, str]] = []
    if named:
        for change in named:
            # A landed change's branch is gone after its cleanup: it is skipped below.
            if not has_branch.get(change, False) and not landed.get(change, False):
                raise UsageError(
                    f"unknown change {change!r}: there is no branch forge/{change}",
                    hint="forge land with no change takes the latest batch's done loops",
                )
        wanted = list(dict.fromkeys(named))
    else:
        wanted = []
        for change, reason in batch:
            if reason != "done":
                skipped.append((change, f"its loop ended {reason or 'without an ending'}"))
            elif not has_branch.get(change, False):
                skipped.append((change, f"no branch forge/{change}"))
            else:
                wanted.append(change)
    if len(set(order)) != len(order):
        raise UsageError("--order names a change twice", hint="--order C1,C2,C3")
    for change in order:
        if change not in wanted:
            raise UsageError(
                f"--order names {change!r}, which this land run does not take",
                hint=f"the changes taken: {', '.join(wanted) or 'none'}",
            )
    ordered = [*order, *(change for change in wanted if change not in order)]
    taken: list[str] = []
    for change in ordered:
        if landed.get(change, False):
            skipped.append((change, "already landed"))
        else:
            taken.append(change)
    return LandPlan(changes=tuple(taken), skipped=tuple(skipped))
