"""One iteration's decision and the events that record it, as a value.

The loop judges an iteration against the state its store holds (another
process's updates folded in), then hands the store the whole outcome to write:
the state after it, the verdict and the timeline's events. Building that value
is pure, so the store only writes what was decided; when someone wrote the
state in the meantime, the loop decides again on the fresh state (see
:meth:`Store.commit`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .._policy import Policy
from .._state import (
    AlertCleared,
    AlertRaised,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    Event,
    RecoveryStep,
    RunStarted,
)
from .._verify import verify_event
from ._course import in_force_for
from ._decide import LoopRules, LoopState, Trip, Verdict, decide, opening_reason
from ._gates import GateReading, budget_reading, gate_states, verify_reading
from ._record import IterationRecord, finished_event

CircuitEvent = BreakerOpened | BreakerHalfOpen | BreakerClosed


@attrs.frozen
class Decision:
    """What an iteration's commit writes: the state it was judged on, the state after, and why.

    ``before`` is the state the decision was made on: a store that finds its
    state changed since refuses the decision, and the loop decides again.
    """

    before: LoopState
    after: LoopState
    verdict: Verdict
    events: tuple[Event, ...]


def decided(
    before: LoopState,
    record: IterationRecord,
    policy: Policy,
    rules: LoopRules,
    *,
    run_id: str,
    now: float,
    now_iso: str,
) -> Decision:
    """Judge an iteration and build the events that record the judgement."""
    after, verdict = decide(before, record, policy, rules, now=now, now_iso=now_iso)
    events: list[Event] = []
    report = record.verify_report
    if report is not None and not record.verify_read_only:
        # A verdict read at done under read-only gates is the ending's, not the breaker's.
        events.append(verify_event(report, after.verify, run_id=run_id, iteration=record.iteration))
    readings = [verify_reading(after.verify), budget_reading(after.spend, policy.budget)]
    if record.secscan is not None:
        readings.append(record.secscan)
    assessment = verdict.assessment
    pause = verdict.pause
    waited = None if pause is None else round(max(0.0, pause.until - now), 3)
    # The risk, raised by the alerts holding (a supervised loop's).
    risk = after.risk if after.risk is not None else assessment.risk if assessment else None
    events.append(
        finished_event(
            record,
            pause=waited,
            gates=gate_states(readings),
            judged=verdict.judged,
            trip=opening_reason(verdict, after, rules),
            score=assessment.score if assessment else None,
            window_score=assessment.window_score if assessment else None,
            risk=risk,
            circuit=after.circuit.state if rules.supervised else None,
        )
    )
    if verdict.opened:
        events.append(circuit_event(BreakerOpened, after, run_id, verdict.trip))
        events.extend(recovery_events(after, policy, rules, run_id, record.iteration))
    elif verdict.closed:
        events.append(circuit_event(BreakerClosed, after, run_id, reason="the probe made progress"))
    events.extend(alert_events(run_id, record.iteration, verdict))
    return Decision(before=before, after=after, verdict=verdict, events=tuple(events))


def started_event(
    run_id: str,
    state: LoopState,
    policy: Policy,
    rules: LoopRules,
    *,
    plan: Mapping[str, Any],
    secscan: GateReading,
) -> RunStarted:
    """The ``run.started`` event: the plan, the circuit and the gates as the run begins."""
    readings = [verify_reading(state.verify), budget_reading(state.spend, policy.budget), secscan]
    used = state.circuit.iterations_used if rules.supervised else 0
    return RunStarted(
        run_id=run_id,
        supervised=rules.supervised,
        plan={**plan, "iterations_used": used},
        circuit=state.circuit.state,
        gates=gate_states(readings),
    )


def circuit_event(
    kind: type[CircuitEvent],
    state: LoopState,
    run_id: str,
    found: Trip | None = None,
    *,
    reason: str | None = None,
) -> CircuitEvent:
    """The loop circuit moved (opened, half-open, closed): what the timeline records."""
    circuit = state.circuit
    evidence = {"condition": found.condition, **found.evidence} if found else None
    return kind(
        run_id=run_id,
        reason=reason if reason is not None else (circuit.reason or ""),
        cooldown=circuit.cooldown,
        opens=circuit.opens,
        escalated=circuit.escalated,
        evidence=evidence,
    )


def recovery_events(
    state: LoopState, policy: Policy, rules: LoopRules, run_id: str, iteration: int | None
) -> list[Event]:
    """The circuit just opened: the strategy the iterations after it are given."""
    strategy = in_force_for(state, policy, rules)
    if strategy is None:
        return []
    step = RecoveryStep(
        run_id=run_id,
        iteration=iteration,
        trip_kind=strategy.kind,
        step=strategy.step,
        steps=strategy.steps,
        strategy=strategy.text,
        escalated=state.circuit.escalated,
    )
    return [step]


def alert_events(run_id: str, iteration: int, verdict: Verdict) -> list[Event]:
    """The alerts the decision raised and cleared, for the timeline."""
    raised: list[Event] = [
        AlertRaised(
            run_id=run_id,
            iteration=iteration,
            alert=alert.name,
            detail=alert.detail,
            value=alert.value,
            threshold=alert.threshold,
        )
        for alert in verdict.raised
    ]
    cleared = [
        AlertCleared(run_id=run_id, iteration=iteration, alert=name) for name in verdict.cleared
    ]
    return [*raised, *cleared]
