"""One iteration as the loop judges it: the record that goes into the timeline.

An :class:`IterationRecord` holds everything the decision function reads
about an iteration: how the executor ended and what its output said, the
integrity check, the verify verdict, the secret scan's reading and the
measured signals. The timeline's ``iteration.finished`` event is this record
plus what was decided, so a recorded history can be replayed through the same
decision under another policy.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._executor import IterationOutcome
from .._monitor import CallsLeft
from .._protect import IntegrityReport
from .._stagnation import Signals
from .._state import (
    IterationDecision,
    IterationFacts,
    IterationFinished,
    facts_of,
)
from .._verify import PASS, VerifyReport
from .._workspace import TreeState
from ._gates import SECSCAN_GATE, GateReading

# Through ``sh -c``, 126 and 127 mean the command could not be run at all.
_CANNOT_RUN = (126, 127)


@attrs.frozen(kw_only=True)
class IterationRecord(IterationFacts):
    """One iteration's facts, as the decision function reads them.

    The facts it shares with its ``iteration.finished`` event are declared
    once, in :class:`IterationFacts` (``failure``, ``done``, ``verify`` ...).
    The record adds what it reads typed and the event holds otherwise: the
    signals (as JSON), the secret scan's reading (in the event's ``gates``)
    and the rate window's calls (in its ``extra``).

    Attributes:
        secscan: The secret scan's reading after it (None: not read).
        signals: What it changed, measured (None: the loop does not measure).
        calls: The shared rate window's calls left after its permit, read
            just before it was judged (None: no limiter); the
            ``calls-remaining`` alert judges it.
    """

    secscan: GateReading | None = None
    signals: Signals | None = None
    calls: CallsLeft | None = None
    # Kept for the verify event and the tree it judged; not part of the record.
    verify_report: VerifyReport | None = attrs.field(default=None, eq=False, repr=False)
    tree: TreeState | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def is_harmful(self) -> bool:
        return bool(self.integrity)

    @property
    def provider_refused(self) -> bool:
        """The provider refused the call for now (a limit, an overload): not the agent's failure."""
        return self.rate_limit is not None and self.rate_limit.status in ("rejected", "overloaded")

    @property
    def unreadable(self) -> bool:
        """The executor ended well but its structured output could not be read."""
        return self.parse_note is not None and not self.failed

    @property
    def verify_passed(self) -> bool:
        """No verify ran, or it passed."""
        return self.verify in (None, PASS)


def iteration_record(
    run_id: str,
    outcome: IterationOutcome,
    *,
    log: str,
    templated: bool,
    integrity: IntegrityReport | None = None,
) -> IterationRecord:
    """The record of an iteration that just ran (verify, secscan and signals come later)."""
    process = outcome.process
    observation = outcome.observation
    failure = outcome.failure
    if failure is None and observation.is_error:
        # The agent's own output says it failed: as much a failure as a non-zero exit.
        said = (observation.error or "").strip().splitlines()
        failure = "the agent reported an error" + (f": {said[0]}" if said else "")
    cannot_start = process.start_error is not None or (
        not templated and process.exit_code in _CANNOT_RUN
    )
    harmed = integrity is not None and integrity.harmed
    return IterationRecord(
        run_id=run_id,
        iteration=outcome.number,
        duration=round(process.duration, 3),
        exit=process.exit_code,
        timed_out=process.timed_out,
        signal=process.signal,
        start_error=process.start_error,
        output_bytes=process.output.total_bytes,
        output_lines=process.output.total_lines,
        tokens=outcome.tokens,
        tool_calls=outcome.tool_calls,
        cost_usd=outcome.cost_usd,
        permission_denials=observation.permission_denials,
        guard_refusals=observation.guard_refusals,
        done=outcome.done,
        failure=failure,
        cannot_start=cannot_start,
        cost_estimated=outcome.cost_estimated,
        tokens_cached=observation.tokens_cached,
        session=observation.session_id,
        error=observation.error,
        rate_limit=observation.rate_limit,
        parse_note=observation.note,
        cost_note=outcome.cost_note,
        report_problems=tuple(outcome.report_problems),
        log=log,
        integrity=tuple(integrity.as_record()) if integrity is not None else None,
        integrity_detail=integrity.detail() if integrity is not None and harmed else None,
    )


# The keys of the rate window's calls in an ``iteration.finished`` event.
_CALLS_LEFT = "calls_remaining"
_CALLS = "calls_allowed"


def finished_event(
    record: IterationRecord,
    *,
    gates: dict[str, dict[str, str]],
    judged: bool = True,
    trip: str | None = None,
    score: int | None = None,
    window_score: int | None = None,
    risk: str | None = None,
    circuit: str | None = None,
    pause: float | None = None,
) -> IterationFinished:
    """The ``iteration.finished`` event: the record and what was decided about it."""
    calls = record.calls
    # The rate window's calls left after the permit, beside the record (and the
    # window's size, so that a replay judges the calls-remaining alert too).
    extra = {} if calls is None else {_CALLS_LEFT: calls.remaining, _CALLS: calls.calls}
    decision = IterationDecision(
        gates=gates,
        judged=judged,
        trip=trip,
        score=score,
        window_score=window_score,
        risk=risk,
        circuit=circuit,
        pause=pause,
    )
    signals = record.signals.as_record() if record.signals is not None else None
    return IterationFinished.compose(record, decision, signals=signals, extra=extra)


def secscan_reading(gates: dict[str, Any]) -> GateReading | None:
    """The secret scan's reading as an event's ``gates`` recorded it, if it did."""
    secscan = gates.get(SECSCAN_GATE)
    if not isinstance(secscan, dict) or not isinstance(secscan.get("state"), str):
        return None
    state = secscan["state"]
    return GateReading(
        SECSCAN_GATE,
        open=state != "closed",
        error=state == "error",
        detail=str(secscan.get("detail", "")),
    )


def record_from_event(event: IterationFinished) -> IterationRecord:
    """The record an ``iteration.finished`` event holds, for a replay.

    Raises:
        ValueError: when its signals do not parse.
    """
    return IterationRecord(
        **facts_of(event),
        secscan=secscan_reading(event.gates),
        signals=Signals.from_record(event.signals) if event.signals is not None else None,
        calls=_calls_from(event.extra),
    )


def _calls_from(extra: dict[str, Any]) -> CallsLeft | None:
    """The rate window's calls an event recorded (older timelines hold only the calls left)."""
    remaining, calls = extra.get(_CALLS_LEFT), extra.get(_CALLS)
    if type(remaining) is not int or type(calls) is not int:
        return None
    return CallsLeft(remaining=remaining, calls=calls)
