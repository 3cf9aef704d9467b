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
    verify: str = ""
    tokens: int = 0
    cost_usd: float = 0.0
    cost_estimated: bool = False  # some of the cost is estimated from tokens and prices
    last_event: str = ""
    reason: str | None = None
    score: int | None = None
    risk: str = ""

    def finish(self, reason: str) -> None:
        self.reason = reason
        self.status = reason
        self.cooldown_until = None
