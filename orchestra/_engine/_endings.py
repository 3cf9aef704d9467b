"""How a loop ends: the ending names scripts read, and the summary of a finished loop."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import attrs

from .._executor import IterationOutcome
from .._spend import SpendTotals

DONE = "done"
GATE_OPEN = "gate-open"
GATE_ERROR = "gate-error"
EXHAUSTED = "iterations-exhausted"
EXECUTOR_FAILED = "executor-failed"
INTERRUPTED = "interrupted"
CIRCUIT_OPEN = "circuit-open"
PROVIDER_LIMIT = "provider-limit"
# The executor ended but its structured output could not be read: a human looks at the log.
OUTPUT_UNREADABLE = "output-unreadable"
# The executor signalled done but the verify failed on the tree it left (forge run).
DONE_UNVERIFIED = "done-unverified"
# A supervised loop whose git worktree could not be made: it never started.
WORKTREE_FAILED = "worktree-failed"
# A person stopped the loop (forge stop): it goes on when the batch runs again.
STOPPED = "stopped"


@attrs.frozen
class Ending:
    """Why a loop stops: the ending's name, the gate that stopped it, and in words why."""

    reason: str
    gate: str | None = None
    detail: str | None = None


@attrs.frozen
class RunSummary:
    """How a loop ended."""

    reason: str
    iterations: int
    gate: str | None = None
    detail: str | None = None
    last: IterationOutcome | None = None
    spend: SpendTotals | None = None
    refused: int = 0  # calls a provider refused among them: they used no iteration

    @property
    def clean(self) -> bool:
        return self.reason == DONE

    @property
    def counted(self) -> int:
        """The iterations used: those run, less the calls a provider refused."""
        return max(self.iterations - self.refused, 0)


def new_run_id() -> str:
    """A run's id: its UTC start time and a few random hex digits."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"
