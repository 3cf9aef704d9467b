"""The next iteration's prompt, written from the failed verify's evidence.

A failed verify converts the failed rubric items into the prompt of the pass
that fixes them; the passing items are to be preserved, the scope and
non-goals kept, the strategy change said. Worked out from the checkpoint
whenever it is asked for, so it never drifts from the contract it describes.
"""

from __future__ import annotations

from ._model import Checkpoint, RubricItem


def iteration_prompt(checkpoint: Checkpoint, change: str) -> str | None:
    """The prompt of the pass after a failed verify; None when no fix is due.

    No fix is due before a verify failed, or while a stop condition holds
    (the loop then asks, blocks or ships instead of iterating).

    The failed items are those marked ``fail``; when the failed verify
    marked none, every item not yet passing (``pending``, ``blocked``). An
    item without evidence of its own carries the failure's.
    """
    if checkpoint.failed_iteration is None or checkpoint.stop_condition is not None:
        return None
    failed = [item for item in checkpoint.rubric if item.status == "fail"]
    if not failed:
        failed = [item for item in checkpoint.rubric if item.status in ("pending", "blocked")]
    evidence = checkpoint.last_failure or "none recorded"
    lines = [f"Continue the loop for {checkpoint.goal}."]
    lines += _section(
        "Failed rubric items:",
        [f"{_item(item)} — evidence: {item.evidence or evidence}" for item in failed],
    )
    lines += _section(
        "Preserve:", [_kept(item) for item in checkpoint.rubric if item.status == "pass"]
    )
    lines += _section("Constraints:", _constraints(checkpoint))
    lines += _section("Strategy change this pass:", [checkpoint.strategy_change or ""])
    lines += [
        "Required verification:",
        f"- forge verify --change {change}",
        "- evidence for every rubric item (ship-ready needs it and the verify's PASS)",
    ]
    return "\n".join(lines)


def _item(item: RubricItem) -> str:
    return f"{item.id}: {item.text}"


def _kept(item: RubricItem) -> str:
    return f"{_item(item)} — evidence: {item.evidence}" if item.evidence else _item(item)


def _constraints(checkpoint: Checkpoint) -> list[str]:
    lines = []
    if checkpoint.scope:
        lines.append(f"stay within {', '.join(checkpoint.scope)}")
    if checkpoint.non_goals:
        lines.append(f"do not expand beyond {', '.join(checkpoint.non_goals)}")
    lines += [
        f"leave {_item(item)} out of scope" + (f" ({item.evidence})" if item.evidence else "")
        for item in checkpoint.rubric
        if item.status == "out-of-scope"
    ]
    return lines


def _section(heading: str, entries: list[str]) -> list[str]:
    kept = [entry for entry in entries if entry]
    return [heading, *(f"- {entry}" for entry in kept or ["none"])]
