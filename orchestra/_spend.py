"""The spend budget of a change: tokens, tool calls and cost, accumulated across runs.

Totals live in ``.forge/changes/<c>/spend.yaml``. The gate opens when a total
reaches its ceiling; with no ceiling configured it is closed and cannot open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._errors import CorruptStateError
from ._state import (
    ChangePaths,
    append_event,
    exclusive_lock,
    load_or_block,
    run_by_a_person,
    save_state,
    utc_now_iso,
)

if TYPE_CHECKING:
    from ._policy import BudgetPolicy  # only named in annotations


@attrs.frozen
class SpendTotals:
    """What a change has spent so far (``blocked``: its file was unreadable)."""

    tokens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    tool_calls: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    cost_usd: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    iterations: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    blocked: str | None = None
    updated_at: str | None = None
    # Some of the cost is Forge's estimate from tokens and a price table.
    cost_estimated: bool = False
    # Iterations whose cost is unknown: their model has no price in the table.
    unpriced: int = attrs.field(default=0, validator=attrs.validators.ge(0))


NO_SPEND = SpendTotals()


@attrs.frozen
class SpendReading:
    totals: SpendTotals
    corrupt: CorruptStateError | None = None


def read_spend(paths: ChangePaths) -> SpendReading:
    with exclusive_lock(paths.lock):
        totals, corrupt = load_or_block(paths, paths.spend, SpendTotals, NO_SPEND)
    return SpendReading(totals, corrupt)


def reset_spend(paths: ChangePaths) -> SpendReading:
    """Start the totals again from zero after a human decided to grant more budget."""
    from ._state import SpendReset  # building an event: only when one is written

    with exclusive_lock(paths.lock):
        before, corrupt = load_or_block(paths, paths.spend, SpendTotals, NO_SPEND)
        save_state(
            paths.spend, attrs.evolve(NO_SPEND, updated_at=utc_now_iso()), journal=run_by_a_person()
        )
        append_event(
            paths.timeline,
            paths.name,
            SpendReset(
                tokens=before.tokens,
                tool_calls=before.tool_calls,
                cost_usd=before.cost_usd,
                was_blocked=before.blocked,
            ),
        )
    return SpendReading(before, corrupt)


def budget_exceeded(totals: SpendTotals, budget: BudgetPolicy) -> str | None:
    """Which ceiling the totals have reached, in words, or None."""
    if budget.max_tokens is not None and totals.tokens >= budget.max_tokens:
        return f"{totals.tokens} tokens spent, ceiling {budget.max_tokens}"
    if budget.max_tool_calls is not None and totals.tool_calls >= budget.max_tool_calls:
        return f"{totals.tool_calls} tool calls made, ceiling {budget.max_tool_calls}"
    if budget.max_cost_usd is not None and totals.cost_usd >= budget.max_cost_usd:
        return f"${totals.cost_usd:.4f} spent, ceiling ${budget.max_cost_usd:.2f}"
    return None
