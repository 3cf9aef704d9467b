"""The verify breaker on disk: recording verdicts, reading it as a gate, resetting it.

Every read-modify-write happens under the change's lock. A state file that
cannot be read is moved aside and replaced by a *blocked* state, recorded in
the timeline: the gate stays shut until a human runs ``--reset-breaker``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from .._errors import CorruptStateError
from .._state import (
    ChangePaths,
    append_event,
    exclusive_lock,
    load_or_block,
    read_timeline,
    run_by_a_person,
    save_state,
    utc_now_iso,
)
from .._workspace import TreeState
from ._breaker import NEW, VerifyAttempts, fold_timeline, record_verdict, reset

if TYPE_CHECKING:
    # Only named in annotations: the report's module imports trio, which
    # reading the breaker (forge status) does not need.
    from .._state import VerifyRecorded
    from ._checks import CheckResult
    from ._report import VerifyReport


@attrs.frozen
class BreakerUpdate:
    """The breaker after an operation, and what the operation ran into."""

    before: VerifyAttempts
    after: VerifyAttempts
    corrupt: CorruptStateError | None = None


def record_attempt(
    paths: ChangePaths,
    report: VerifyReport,
    *,
    max_failures: int,
    tree: TreeState,
    checks: str | None = None,
) -> BreakerUpdate:
    """Fold a verify report into the change's breaker and log it to the timeline.

    ``checks`` is the digest of the ``[verify]`` the verdict was reached under.
    """
    with exclusive_lock(paths.lock):
        before, corrupt = load_verify_locked(paths)
        after = record_verdict(
            before,
            passed=report.passed,
            max_failures=max_failures,
            now=utc_now_iso(),
            commit=tree.commit,
            tree=tree.fingerprint,
        )
        after = attrs.evolve(after, last_checks=checks)
        save_state(paths.verify_attempts, after)
        append_event(paths.timeline, paths.name, verify_event(report, after))
    return BreakerUpdate(before=before, after=after, corrupt=corrupt)


def read_breaker(paths: ChangePaths) -> BreakerUpdate:
    """The breaker as a gate sees it (a corrupt file turns into a blocked breaker)."""
    with exclusive_lock(paths.lock):
        state, corrupt = load_verify_locked(paths)
    return BreakerUpdate(before=state, after=state, corrupt=corrupt)


def reset_breaker(paths: ChangePaths, *, reason: str | None = None) -> BreakerUpdate:
    """Clear the breaker: the explicit "a human intervened" signal.

    ``reason`` (why, when the person gave one) is kept in the ``breaker.reset`` event.
    """
    from .._state import VERIFY_BREAKER, BreakerReset  # only when one is written

    with exclusive_lock(paths.lock):
        before, corrupt = load_verify_locked(paths)
        after = reset(before, now=utc_now_iso())
        save_state(paths.verify_attempts, after, journal=run_by_a_person())
        append_event(
            paths.timeline,
            paths.name,
            BreakerReset(
                breaker=VERIFY_BREAKER,
                cleared_consecutive_failures=before.consecutive_failures,
                was_open=before.open,
                was_blocked=before.blocked,
                reason=reason,
            ),
        )
    return BreakerUpdate(before=before, after=after, corrupt=corrupt)


def load_verify_locked(paths: ChangePaths) -> tuple[VerifyAttempts, CorruptStateError | None]:
    """The verify breaker, for a caller that holds the change's lock.

    A corrupt file is moved aside and blocks the breaker; a missing one is
    rebuilt from the timeline's verify events when there are any.
    """
    if paths.verify_attempts.exists():
        return load_or_block(paths, paths.verify_attempts, VerifyAttempts, NEW)
    return _rebuild(paths), None


def _rebuild(paths: ChangePaths) -> VerifyAttempts:
    """A missing state file: the timeline's verify events say what it held, if anything."""
    from .._state import StateRebuilt  # only when one is written

    timeline = read_timeline(paths.timeline)
    try:
        state = fold_timeline(timeline.typed())
    except ValueError as exc:
        state = attrs.evolve(NEW, blocked=f"state file missing and the timeline unusable: {exc}")
    if state is None:
        return NEW
    save_state(paths.verify_attempts, state)
    append_event(
        paths.timeline,
        paths.name,
        StateRebuilt(
            file=paths.verify_attempts.name,
            consecutive_failures=state.consecutive_failures,
            open=state.open,
            blocked=state.blocked,
        ),
    )
    return state


# A failing check's evidence kept in the timeline: enough to say what failed,
# bounded so that a timeline stays small (the output was redacted when captured).
EVIDENCE_LINES = 10


def _check_record(check: CheckResult) -> dict[str, Any]:
    record: dict[str, Any] = {
        "name": check.name,
        "passed": check.passed,
        "outcome": check.outcome,
        "duration": round(check.duration, 3),
    }
    if not check.passed:
        if check.failure_lines:
            record["failures"] = list(check.failure_lines[:EVIDENCE_LINES])
        if check.last_lines:
            record["tail"] = list(check.last_lines[-EVIDENCE_LINES:])
    return record


def verify_event(
    report: VerifyReport,
    state: VerifyAttempts,
    *,
    run_id: str | None = None,
    iteration: int | None = None,
) -> VerifyRecorded:
    """The timeline's record of one verdict and the breaker after it."""
    from .._state import VerifyRecorded

    return VerifyRecorded(
        verdict=report.verdict,
        consecutive_failures=state.consecutive_failures,
        max_failures=state.max_failures,
        open=state.open,
        blocked=state.blocked,
        total_attempts=state.total_attempts,
        duration=round(report.duration, 3),
        checks=[_check_record(c) for c in report.checks],
        scenarios={
            "total": len(report.coverage.scenarios),
            "covered": report.coverage.covered_count,
        },
        commit=state.last_commit,
        tree=state.last_tree,
        run_id=run_id,
        iteration=iteration,
    )
