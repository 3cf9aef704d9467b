"""The verify circuit-breaker of a change: a streak of consecutive failures.

Pure: no files, no clock of its own. :func:`record_verdict` folds one verdict
into the state; the shell around it reads and writes ``verify-attempts.yaml``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .._state import Event

PASS = "PASS"
FAIL = "FAIL"


@attrs.frozen
class VerifyAttempts:
    """What ``.forge/changes/<c>/verify-attempts.yaml`` holds.

    The first four keys come first, in this order, so scripts and people read
    the streak at a glance. ``blocked`` is set when
    the state could not be read (it was moved aside): the breaker then counts
    as open whatever the streak says, until a human resets it.
    """

    consecutive_failures: int = attrs.field(validator=attrs.validators.ge(0))
    open: bool
    last_verdict: str | None = attrs.field(validator=attrs.validators.in_((PASS, FAIL, None)))
    total_attempts: int = attrs.field(validator=attrs.validators.ge(0))
    max_failures: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    blocked: str | None = None
    last_attempt_at: str | None = None
    opened_at: str | None = None
    reset_at: str | None = None
    last_commit: str | None = None
    last_tree: str | None = None
    # The digest of the [verify] the last verdict was reached under (a Stop hook's).
    last_checks: str | None = None

    @property
    def gate_open(self) -> bool:
        """Whether the breaker stops loops: tripped, or unreadable and not yet cleared."""
        return self.open or self.blocked is not None


NEW = VerifyAttempts(consecutive_failures=0, open=False, last_verdict=None, total_attempts=0)


def record_verdict(
    state: VerifyAttempts,
    *,
    passed: bool,
    max_failures: int,
    now: str,
    commit: str | None = None,
    tree: str | None = None,
) -> VerifyAttempts:
    """Fold one verify verdict into the breaker.

    A PASS resets the streak and closes the breaker. A FAIL extends the streak;
    the breaker opens when the streak reaches ``max_failures`` and, once open,
    stays open through further failures until a PASS or a reset. A blocked
    breaker records nothing but the attempt: its counts were lost with the
    corrupt file and only a human may clear it.
    """
    attempted = attrs.evolve(
        state,
        total_attempts=state.total_attempts + 1,
        last_verdict=PASS if passed else FAIL,
        last_attempt_at=now,
        last_commit=commit,
        last_tree=tree,
        max_failures=max_failures,
    )
    if state.blocked is not None:
        return attempted
    if passed:
        return attrs.evolve(attempted, consecutive_failures=0, open=False, opened_at=None)
    streak = state.consecutive_failures + 1
    opens = state.open or streak >= max_failures
    opened_at = state.opened_at if state.open else (now if opens else None)
    return attrs.evolve(attempted, consecutive_failures=streak, open=opens, opened_at=opened_at)


def fold_timeline(events: Iterable[Event]) -> VerifyAttempts | None:
    """The breaker as the timeline's verify events leave it; None when there are none.

    The timeline is the log of record and ``verify-attempts.yaml`` a fold of it,
    so a state file that went missing (deleted, or a checkout that predates it)
    is rebuilt rather than restarted from zero.

    Raises:
        ValueError: when a verify event is damaged (its fields did not fit).
    """
    from .._state import VERIFY_BREAKER, BreakerReset, OtherEvent, StateCorrupt, VerifyRecorded

    state: VerifyAttempts | None = None
    for event in events:
        if isinstance(event, VerifyRecorded):
            if event.verdict not in (PASS, FAIL) or event.consecutive_failures < 0:
                raise ValueError(f"a verify event holds {event.verdict!r}")
            state = VerifyAttempts(
                consecutive_failures=event.consecutive_failures,
                open=event.open,
                last_verdict=event.verdict,
                total_attempts=event.total_attempts,
                max_failures=event.max_failures or None,
                blocked=event.blocked,
                last_attempt_at=event.ts,
                last_commit=event.commit,
                last_tree=event.tree,
            )
        elif isinstance(event, OtherEvent) and event.name == VerifyRecorded.kind:
            raise ValueError(f"a verify event does not fit: {event.fields!r}")
        elif isinstance(event, BreakerReset) and event.breaker == VERIFY_BREAKER:
            if state is not None:
                state = reset(state, now=str(event.ts))
        elif isinstance(event, StateCorrupt) and event.file == "verify-attempts.yaml":
            state = attrs.evolve(state or NEW, blocked=f"moved aside to {event.moved_to}")
    return state


def reset(state: VerifyAttempts, *, now: str) -> VerifyAttempts:
    """Clear the streak after a human intervened; the attempt count is history and stays."""
    return attrs.evolve(
        state, consecutive_failures=0, open=False, opened_at=None, blocked=None, reset_at=now
    )


def reset_line(before: VerifyAttempts, change: str) -> str:
    """The ``Breaker: reset`` line, for the breaker as it was before a reset (a contract)."""
    if before.blocked is not None:
        what = f"cleared the block ({before.blocked})"
    elif before.open:
        what = f"cleared an OPEN circuit after {before.consecutive_failures} consecutive failures"
    elif before.consecutive_failures:
        what = f"cleared a streak of {before.consecutive_failures} consecutive failures"
    else:
        what = "nothing to clear: the breaker was already closed"
    return f'Breaker: reset for change "{change}" — {what}.'


def holds(state: VerifyAttempts) -> bool:
    """Whether the breaker holds anything a reset would clear (a streak, an opening, a block)."""
    return state.open or state.blocked is not None or state.consecutive_failures > 0


def breaker_line(state: VerifyAttempts, change: str, *, previous_streak: int = 0) -> str:
    """The ``Breaker:`` line of the verify report: a contract, so its wording never changes."""
    if state.blocked is not None:
        return (
            f'Breaker: BLOCKED — the verify state of change "{change}" was unreadable '
            f"({state.blocked}); a human must clear it with "
            f"forge verify --reset-breaker --change {change}"
        )
    if state.open:
        return (
            f"Breaker: CIRCUIT OPEN — {state.consecutive_failures} consecutive verify "
            f'failures for change "{change}".'
        )
    if state.consecutive_failures:
        return (
            f"Breaker: {state.consecutive_failures}/{state.max_failures} consecutive failures "
            f'for change "{change}" — fix the smallest cause and re-run.'
        )
    closed = f'Breaker: 0/{state.max_failures} consecutive failures for change "{change}" — closed'
    if previous_streak:
        return f"{closed} (a streak of {previous_streak} was reset)."
    return f"{closed}."


def gate_detail(state: VerifyAttempts) -> str:
    """Why the breaker stops a loop, as ``forge run`` names it."""
    if state.blocked is not None:
        return f"verify state unreadable: {state.blocked}"
    return f"circuit breaker open after {state.consecutive_failures} consecutive verify failures"
