"""Replaying a change's recorded history through the live loop's own decisions.

A timeline holds every iteration record a loop judged and every event that
changed its state from outside (a hook's verdict, a person's reset). Folding
them in order through :func:`admit` and :func:`decide` under another policy
says where that policy would have opened the circuit, escalated, or stopped,
which is what ``forge policy simulate`` shows. Under the policy the loop ran
with, the replay reaches the verdicts the loop reached, at the same
iterations. Cooldowns are not waited out: the replay moves on to the probe.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import attrs

from .._policy import Policy
from .._stagnation import Assessment
from .._state import (
    BreakerOpened,
    Event,
    IterationFinished,
    IterationStarted,
    RunStarted,
)
from ._decide import (
    LoopRules,
    LoopState,
    admit,
    cooled_down,
    decide,
    first_trip_rules,
    opening_reason,
    supervised_rules,
)
from ._endings import Ending
from ._gates import GateReading
from ._outside import Resuming, apply_outside_event, run_started
from ._record import IterationRecord, record_from_event, secscan_reading
from ._recovery import in_force


@attrs.frozen
class ReplayStep:
    """One recorded iteration, as the replay judged it.

    Attributes:
        record: The iteration's record.
        judged: False for a provider's refusal (nothing is judged then).
        score, window_score, risk: The stagnation detectors' view, if measured.
        would_open: Why the circuit would open here (a trip, or a failed probe).
        evidence: The figures behind a stagnation trip.
        live_trip: Why the live loop opened its circuit here, as recorded.
        ending: How the replayed loop would end here, if it would.
        ran: False when the replayed loop would have stopped before this
            iteration (its ending then applies before it, not after).
    """

    record: IterationRecord
    judged: bool
    score: int | None
    window_score: int | None
    risk: str | None
    would_open: str | None
    evidence: dict[str, object]
    live_trip: str | None
    ending: Ending | None
    ran: bool = True
    # What a person would have seen: the recovery strategy handed out after an
    # opening here (escalated: none left), and the alerts holding after it.
    recovery: str | None = None
    alerts: tuple[str, ...] = ()
    # The alerts raised and cleared by this iteration, as the live loop records them.
    raised: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()


@attrs.frozen
class Replay:
    """A whole replay: each recorded iteration's step, and what was left out.

    Attributes:
        steps: The recorded iterations up to each replayed loop's ending.
        unreached: Recorded iterations the candidate policy would not have
            run (its loop had ended before them).
        skipped: Records that could not be read (damaged signals).
    """

    steps: tuple[ReplayStep, ...]
    unreached: tuple[IterationRecord, ...] = ()
    skipped: int = 0

    @property
    def not_run(self) -> int:
        return len(self.unreached)


def replay(events: Iterable[Event], policy: Policy) -> Replay:
    """Replay a timeline's iterations under ``policy`` (see the module docstring)."""
    replaying = _Replaying(policy)
    for event in events:
        if isinstance(event, RunStarted):
            replaying.run_started(event)
        elif isinstance(event, IterationStarted):
            replaying.iteration_started(event)
        elif isinstance(event, IterationFinished):
            replaying.iteration_finished(event)
        else:
            replaying.outside(event)
    return Replay(
        steps=tuple(replaying.steps),
        unreached=tuple(replaying.unreached),
        skipped=replaying.skipped,
    )


@attrs.define
class _Replaying:
    """One replay as it folds the timeline, event by event."""

    policy: Policy
    state: LoopState = attrs.field(factory=LoopState)
    rules: LoopRules = attrs.field(init=False)
    secscan: GateReading | None = None
    ended: bool = False
    steps: list[ReplayStep] = attrs.field(factory=list)
    unreached: list[IterationRecord] = attrs.field(factory=list)
    skipped: int = 0
    # The admission of the next iteration, decided when it started (as live:
    # whatever a hook wrote during the iteration comes after that decision).
    admitted: Ending | None = None
    started: bool = False
    # The timeline as the replayed loop would have left it (the candidate's own
    # openings, not the recorded ones): what each new run reads back, as live.
    written: Resuming = attrs.field(factory=Resuming)

    def __attrs_post_init__(self) -> None:
        self.rules = supervised_rules(self.policy)

    def run_started(self, event: RunStarted) -> None:
        policy = self.policy
        self.rules = supervised_rules(policy) if event.supervised else first_trip_rules(policy)
        self.state = run_started(self.state, self.written.resumed, supervised=event.supervised)
        self.written = self.written.after(event)
        self.ended = False
        # Each run's own pre-flight scan, not what the last run left.
        self.secscan = secscan_reading(event.gates)

    def iteration_started(self, event: IterationStarted) -> None:
        if self.ended:
            return
        opens = self.state.circuit.opens
        self.state, self.admitted = _admit(
            self.state, self.policy, self.rules, _epoch(event.ts), self.secscan
        )
        self.written = _opened(self.written.after(event), opens, self.state)
        self.started = True

    def outside(self, event: Event) -> None:
        self.state = apply_outside_event(self.state, event, self.policy)
        if not isinstance(event, BreakerOpened):  # the replay's own openings stand
            self.written = self.written.after(event)

    def iteration_finished(self, event: IterationFinished) -> None:
        try:
            record = record_from_event(event)
        except ValueError:
            self.skipped += 1
            if not self.ended:
                self.written = self.written.after(event)  # a restart reads it back all the same
            return
        if self.ended:
            self.unreached.append(record)
            return
        now = _epoch(event.ts)
        if not self.started:  # no start recorded for it: decide its admission now
            self.state, self.admitted = _admit(
                self.state, self.policy, self.rules, now, self.secscan
            )
        ending, self.admitted, self.started = self.admitted, None, False
        if ending is not None:
            # The candidate would have stopped before this iteration ran.
            self.steps.append(attrs.evolve(_step(record, event, None, None, ending), ran=False))
            self.unreached.append(record)
            self.ended = True
            return
        self._judge(record, event, now)

    def _judge(self, record: IterationRecord, event: IterationFinished, now: float) -> None:
        policy, rules = self.policy, self.rules
        opens = self.state.circuit.opens
        state, verdict = decide(self.state, record, policy, rules, now=now, now_iso=event.ts or "")
        self.state = state
        self.written = _opened(self.written.after(event), opens, state)
        self.secscan = record.secscan
        would_open = opening_reason(verdict, state, rules)
        step = _step(record, event, verdict.assessment, would_open, verdict.ending)
        strategy = in_force(state.circuit, policy) if verdict.opened else None
        recovery = None
        if strategy is not None:
            recovery = "escalate" if state.circuit.escalated else strategy.describe()
        # The alerts as the live loop judged them, the rate window's calls included.
        alerts = tuple(name for name, _ in state.alerts) if rules.supervised else ()
        risk = state.risk if verdict.judged and rules.supervised else step.risk
        self.steps.append(
            attrs.evolve(
                step,
                judged=verdict.judged,
                recovery=recovery,
                alerts=alerts,
                raised=tuple(alert.name for alert in verdict.raised),
                cleared=verdict.cleared,
                risk=risk,
            )
        )
        self.ended = verdict.ending is not None


def _opened(written: Resuming, opens: int, state: LoopState) -> Resuming:
    """``written`` with the replayed circuit's opening since it had ``opens``, if it opened."""
    return written.opened() if state.circuit.opens > opens else written


def _admit(
    state: LoopState,
    policy: Policy,
    rules: LoopRules,
    now: float,
    secscan: GateReading | None,
) -> tuple[LoopState, Ending | None]:
    """As the live loop before an iteration, with every cooldown taken as served."""
    while True:
        state, admission = admit(state, policy, rules, now=now, secscan=secscan)
        if admission.ending is not None or admission.wait is None:
            return state, admission.ending
        state = cooled_down(state)


def _step(
    record: IterationRecord,
    event: IterationFinished,
    found: Assessment | None,
    would_open: str | None,
    ending: Ending | None,
) -> ReplayStep:
    live = event.trip
    return ReplayStep(
        record=record,
        judged=True,
        score=found.score if found else None,
        window_score=found.window_score if found else None,
        risk=found.risk if found else None,
        would_open=would_open,
        evidence=dict(found.evidence) if found and found.reason else {},
        live_trip=live,
        ending=ending,
    )


def _epoch(ts: str | None) -> float:
    if not ts:
        return 0.0
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
