"""What each loop is doing right now, for the dashboard, the summary and an interruption."""

from __future__ import annotations

import attrs


@attrs.define
class LoopProgress:
    """Mutable by its loop only; read by the dashboard between checkpoints."""

    change: str
    max_iterations: int
    status: str = "pending"
    iteration: int = 0  # the one running (or last run)
    completed: int = 0  # iterations of this run that finished and were recorded
    circuit: str = "closed"
    trips: int = 0
    cooldown_until: float | None = None  # trio clock
    answer_until: float | None = None  # trio clock: how long it waits for an answer
    verify: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    cost_estimated: bool = False  # some of the cost is estimated from tokens and prices
    last_event: str = ""
    reason: str | None = None
    score: int | None = None
    risk: str = ""
    recovery: str = ""  # the recovery strategy in force, in one line
    alerts: list[str] = attrs.field(factory=list)  # the alerts raised now
    # The alerts the last judged iteration raised, with their detail (for notices).
    raised: list[tuple[str, str]] = attrs.field(factory=list)
    # The question the last judged iteration ended on instead of acting (for notices).
    question: str | None = None
    # Iterations a person should look at: output that fell back to plain text.
    review: list[str] = attrs.field(factory=list)

    def finish(self, reason: str) -> None:
        self.reason = reason
        self.status = reason
        self.cooldown_until = None


def verify_cell(verdict: str, streak: int, threshold: int) -> str:
    """A verify verdict and its failure streak against the breaker's threshold.

    ``FAIL 1/3`` while the streak counts up; once it has reached the threshold
    the breaker is open, and the cell says so rather than ``FAIL 4/3``.
    """
    if streak == 0:
        return verdict
    if streak < threshold:
        return f"{verdict} {streak}/{threshold}"
    return f"{verdict} {streak}× (breaker open at {threshold})"
