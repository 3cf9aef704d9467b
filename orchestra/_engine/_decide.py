"""Every trip and stop rule of a loop, as pure functions of its state and records.

:func:`admit` decides, before an iteration, whether it may run: an open loop
circuit waits out its cooldown (or has escalated), an open gate stops the
loop. :func:`decide` judges an iteration from its record: it folds the
record's spend and verify verdict into the state, runs the trip conditions
(integrity, verify streak, budget, stagnation), moves the loop circuit
(open, close after a probe that made progress, re-open with the cooldown
doubled), and says whether and how the loop ends.

Nothing here reads a file, a clock or a process: the live loop and ``forge
policy simulate`` call the same functions, so a recorded history replayed
under the same policy reaches the same verdicts at the same iterations.

The two loops differ only in their :class:`LoopRules`: ``forge supervise``
opens a circuit on a trip, cools down and probes; ``forge run`` stops and
escalates on the first one.
"""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from .._circuit import (
    CLOSED,
    CLOSED_CIRCUIT,
    HALF_OPEN,
    OPEN,
    CircuitState,
    close,
    cooldown_remaining,
    half_open,
    trip,
)
from .._executor import backoff_pause
from .._monitor import Alert, clears, promoted, step_alerts
from .._policy import Policy
from .._spend import NO_SPEND, SpendTotals, budget_exceeded
from .._stagnation import Assessment, Signals, assess, repeats
from .._verify import NEW, PASS, VerifyAttempts, record_verdict
from . import _recovery as recovery
from ._endings import (
    CIRCUIT_OPEN,
    DONE,
    EXECUTOR_FAILED,
    EXHAUSTED,
    GATE_ERROR,
    GATE_OPEN,
    OUTPUT_UNREADABLE,
    PROVIDER_LIMIT,
    Ending,
)
from ._gates import (
    INTEGRITY_GATE,
    GateReading,
    budget_reading,
    circuit_reading,
    first_stop,
    verify_reading,
)
from ._record import IterationRecord

# The trip conditions of a supervised loop, in the order they are judged.
TRIP_CONDITIONS = (INTEGRITY_GATE, "verify", "budget", "stagnation")

# A loop gives up after more refused calls in a row than this ([run] max_refusals),
# whatever their reset times: a misread error must not keep it waiting forever.
MAX_REFUSALS_IN_A_ROW = 10


@attrs.frozen
class LoopRules:
    """How a loop treats what its decision finds.

    Attributes:
        supervised: A trip opens the loop circuit, which cools down and lets
            one probe through (``forge supervise``); otherwise the first trip
            stops the loop and escalates (``forge run``).
        max_iterations: The iteration cap (finishing it is not success).
        run_verify: The loop runs ``[verify]`` after every iteration.
        judge_stagnation: The stagnation detectors may trip.
        max_limit_wait: Without supervision, the longest a loop waits for a
            provider limit's known reset before it stops.
        limit_backoff_max: The longest wait for a provider limit that gave no
            reset time (the wait doubles from a minute at each refusal in a row).
        max_refusals: The most refusals in a row the loop waits out; one more
            stops it.
    """

    supervised: bool
    max_iterations: int
    run_verify: bool = False
    judge_stagnation: bool = False
    max_limit_wait: float = 300.0
    limit_backoff_max: float = 3600.0
    max_refusals: int = MAX_REFUSALS_IN_A_ROW


def supervised_rules(policy: Policy) -> LoopRules:
    """``forge supervise``: a trip opens the circuit, which cools down and lets a probe through."""
    return LoopRules(
        supervised=True,
        max_iterations=policy.run.max_iterations,
        run_verify=bool(policy.verify.command.strip()),
        judge_stagnation=True,
        max_limit_wait=policy.run.max_limit_wait.seconds,
        limit_backoff_max=policy.run.limit_backoff_max.seconds,
        max_refusals=policy.run.max_refusals,
    )


def first_trip_rules(policy: Policy) -> LoopRules:
    """``forge run``: the first trip stops and escalates; the loop runs no verify of its own."""
    return LoopRules(
        supervised=False,
        max_iterations=policy.run.max_iterations,
        max_limit_wait=policy.run.max_limit_wait.seconds,
        limit_backoff_max=policy.run.limit_backoff_max.seconds,
        max_refusals=policy.run.max_refusals,
    )


@attrs.frozen
class LoopState:
    """What a change's loop carries from one iteration to the next (and across runs)."""

    circuit: CircuitState = CLOSED_CIRCUIT
    verify: VerifyAttempts = NEW
    spend: SpendTotals = NO_SPEND
    # The signals the stagnation detectors look back on: since the circuit last
    # opened or was reset, so that a probe is judged on its own progress.
    history: tuple[Signals, ...] = ()
    # Calls a provider refused in this run (they use no iteration), and in a row.
    refused: int = 0
    refusals_in_a_row: int = 0
    # The alerts raised and not cleared since (name, what it says), by name.
    alerts: tuple[tuple[str, str], ...] = ()
    # What the alerts look back on: the measured iterations since a person's
    # reset, the last ALERT_MEMORY of them (openings do not clear it).
    measured: tuple[Signals, ...] = ()
    # The last judged iteration's stagnation risk, raised by the alerts holding.
    risk: str | None = None


@attrs.frozen
class Trip:
    """A condition that holds: the reason the circuit opens.

    ``curable`` is False for what no cooldown can mend (a spent budget, harm
    to a protected path): the loop then escalates at once.
    """

    condition: str
    reason: str
    curable: bool = True
    evidence: dict[str, object] = attrs.field(factory=dict)


@attrs.frozen
class Admission:
    """Whether the next iteration may run.

    Exactly one holds: ``ending`` (stop), ``wait`` (seconds of cooldown to sit
    out, then :func:`cooled_down`), or neither (run it; a probe when the
    circuit is half-open). ``opened`` carries a trip that opened the circuit
    on the way, for the timeline.
    """

    ending: Ending | None = None
    wait: float | None = None
    opened: Trip | None = None


@attrs.frozen
class Pause:
    """A provider's limit to wait out before the next call (wall-clock epoch ``until``).

    ``shared``: a supervised loop's wait is the shared limiter's (every loop
    on it waits for its next permit); otherwise the loop waits here itself,
    bounded by ``[run] max_limit_wait``.
    """

    until: float
    shared: bool


@attrs.frozen
class Verdict:
    """What :func:`decide` made of one iteration.

    Attributes:
        judged: False when a provider refused the call: nothing was judged.
        trip: The trip condition that held, if any.
        opened: The circuit opened (or re-opened) on this iteration.
        closed: A probe made progress and closed the circuit.
        assessment: The stagnation detectors' view, when signals were measured.
        pause: A provider limit's reset to wait for.
        ending: How the loop ends here, if it does.
        raised: The alerts raised by this iteration (a supervised loop's).
        cleared: The names of the alerts it cleared.
        holding: The names of the alerts holding after it (None: not judged).
    """

    judged: bool = True
    trip: Trip | None = None
    opened: bool = False
    closed: bool = False
    assessment: Assessment | None = None
    pause: Pause | None = None
    ending: Ending | None = None
    raised: tuple[Alert, ...] = ()
    cleared: tuple[str, ...] = ()
    holding: tuple[str, ...] | None = None


# ---------------------------------------------------------------------------
# Before an iteration


def admit(
    state: LoopState,
    policy: Policy,
    rules: LoopRules,
    *,
    now: float,
    secscan: GateReading | None,
) -> tuple[LoopState, Admission]:
    """May the next iteration run? ``now`` is wall-clock epoch seconds."""
    circuit = state.circuit
    if not rules.supervised:
        # An open or escalated loop circuit means a human (or its cooldown) has
        # the last word: forge run does not start over it.
        readings = [circuit_reading(circuit, now), *_gate_readings(state, policy, secscan)]
        stop = first_stop(readings)
        return state, Admission(ending=_gate_ending(stop) if stop else None)
    if circuit.state == CLOSED and rules.run_verify and state.verify.gate_open:
        # An open verify breaker stops ordinary iterations; in a supervised loop
        # it is a trip: cool down, then probe past it.
        found = _verify_trip(state.verify)
        state = attrs.evolve(state, circuit=_open(circuit, found, policy, now, ()), history=())
        if state.circuit.escalated:
            return state, Admission(ending=_escalation(state.circuit, policy), opened=found)
        return state, Admission(wait=_cooldown(state.circuit, now), opened=found)
    if circuit.state == OPEN:
        if circuit.escalated:
            return state, Admission(ending=_escalation(circuit, policy))
        return state, Admission(wait=_cooldown(circuit, now))
    # In a supervised loop the verify breaker is a trip condition, not a gate.
    readings = [budget_reading(state.spend, policy.budget)]
    if secscan is not None:
        readings.append(secscan)
    stop = first_stop(readings)
    return state, Admission(ending=_gate_ending(stop) if stop else None)


def cooled_down(state: LoopState) -> LoopState:
    """The cooldown has elapsed: the circuit lets exactly one probe through."""
    return attrs.evolve(state, circuit=half_open(state.circuit))


# ---------------------------------------------------------------------------
# After an iteration


def decide(
    state: LoopState,
    record: IterationRecord,
    policy: Policy,
    rules: LoopRules,
    *,
    now: float,
    now_iso: str,
) -> tuple[LoopState, Verdict]:
    """Judge one iteration: the state after it, and what it means for the loop.

    ``now`` is wall-clock epoch seconds (the circuit's ``opened_at``),
    ``now_iso`` the same instant as the state files write it. A supervised
    loop's alerts are judged too (``verdict.raised``, ``verdict.cleared``).
    """
    state, verdict = _judge(state, record, policy, rules, now=now, now_iso=now_iso)
    if not rules.supervised:
        return state, verdict
    if not verdict.judged:
        return attrs.evolve(state, risk=None), verdict
    return _watch_alerts(state, record, verdict, policy)


def _watch_alerts(
    state: LoopState, record: IterationRecord, verdict: Verdict, policy: Policy
) -> tuple[LoopState, Verdict]:
    """The alerts after a judged iteration: which hold, and the risk they raise."""
    assessment = verdict.assessment
    found = step_alerts(
        state.measured,
        (name for name, _ in state.alerts),
        record.signals,
        policy,
        risk=assessment.risk if assessment is not None else None,
        calls=record.calls,
    )
    state = attrs.evolve(state, alerts=found.holding, measured=found.measured, risk=found.risk)
    holding = tuple(name for name, _ in found.holding)
    return state, attrs.evolve(verdict, raised=found.raised, cleared=found.cleared, holding=holding)


def _judge(
    state: LoopState,
    record: IterationRecord,
    policy: Policy,
    rules: LoopRules,
    *,
    now: float,
    now_iso: str,
) -> tuple[LoopState, Verdict]:
    state = attrs.evolve(
        state,
        spend=_add_spend(state.spend, record, now_iso),
        verify=_fold_verify(state.verify, record, policy, now_iso),
    )
    if record.provider_refused and not record.is_harmful:
        # A refused call uses no iteration and counts against no breaker.
        state = attrs.evolve(
            state, refused=state.refused + 1, refusals_in_a_row=state.refusals_in_a_row + 1
        )
        return state, _provider_limit(record, rules, now, state.refusals_in_a_row)
    state = attrs.evolve(state, refusals_in_a_row=0)
    if record.cannot_start:
        # Not a failed iteration to judge: the executor cannot run at all.
        ending = Ending(EXECUTOR_FAILED, detail=record.failure)
        return state, Verdict(ending=ending)
    if record.unreadable and not record.is_harmful:
        # Whatever it printed (a done marker included), output that cannot be
        # read is no clean ending: it is a failed iteration, whose raw log a
        # human reads. Without supervision a failure stops the loop at once.
        detail = (
            f"the executor's output could not be read ({record.parse_note}); raw log: {record.log}"
        )
        if not rules.supervised:
            return state, Verdict(ending=Ending(OUTPUT_UNREADABLE, detail=detail))
        # Supervised, it is judged like any other failure: the breaker, a
        # cooldown and a probe, never an ending of its own.
        record = attrs.evolve(record, failure=detail, done=False)
    if rules.supervised:
        state, verdict = _decide_supervised(state, record, policy, rules, now)
    else:
        verdict = Verdict(ending=_decide_first_trip(state, record, policy))
    if verdict.ending is None and record.iteration - state.refused >= rules.max_iterations:
        verdict = attrs.evolve(verdict, ending=exhausted(rules.max_iterations))
    return state, verdict


def opening_reason(verdict: Verdict, state: LoopState, rules: LoopRules) -> str | None:
    """Why the loop tripped at this iteration, as the timeline records it (``trip``).

    Supervised: the reason the circuit opened (a trip, or a failed probe).
    First-trip: the reason it stopped, when that was a trip (a gate, the
    executor); finishing, running out of iterations and a provider's limit
    are endings, not trips.
    """
    if rules.supervised:
        return state.circuit.reason if verdict.opened else None
    ending = verdict.ending
    if ending is not None and ending.reason in (GATE_OPEN, GATE_ERROR, EXECUTOR_FAILED):
        return ending.detail or ending.reason
    return None


def exhausted(max_iterations: int) -> Ending:
    detail = (
        f"{max_iterations} of {max_iterations} iteration(s) used without the executor "
        "signalling done"
    )
    return Ending(EXHAUSTED, detail=detail)


def _decide_first_trip(state: LoopState, record: IterationRecord, policy: Policy) -> Ending | None:
    """``forge run``: integrity, then the executor, then the gates; done is the clean ending."""
    if record.is_harmful:
        return Ending(GATE_OPEN, gate=INTEGRITY_GATE, detail=record.integrity_detail)
    if record.failed:
        return Ending(EXECUTOR_FAILED, detail=record.failure)
    stop = first_stop(_gate_readings(state, policy, record.secscan))
    if stop is not None:
        return _gate_ending(stop)
    return Ending(DONE) if record.done else None


def _decide_supervised(
    state: LoopState, record: IterationRecord, policy: Policy, rules: LoopRules, now: float
) -> tuple[LoopState, Verdict]:
    history = state.history
    assessment = None
    if record.signals is not None:
        history = (*history, record.signals)
        assessment = assess(history, policy.stagnation)
    finished = record.done and record.verify_passed and not record.is_harmful
    # A finished iteration is the clean ending: nothing is left to judge it for.
    found = None if finished else _first_trip(state, record, policy, rules, assessment)
    if found is None and not finished and rules.judge_stagnation and record.signals is not None:
        found = _alert_trip(history, policy)
    circuit = state.circuit
    opened = closed = False
    if circuit.state == HALF_OPEN:
        circuit, opened, closed = _judge_probe(
            circuit, record, found, assessment, policy, history, now
        )
    elif found is not None:
        circuit, opened = _open(circuit, found, policy, now, history), True
    else:
        circuit = recovery.on_quiet(circuit)
    if closed:
        circuit = recovery.on_close(circuit, policy)
    if circuit.state == OPEN:
        history = ()  # each opening starts the detectors afresh
    state = attrs.evolve(state, circuit=circuit, history=history)
    ending = _supervised_ending(circuit, opened, record, finished, policy)
    verdict = Verdict(
        trip=found, opened=opened, closed=closed, assessment=assessment, ending=ending
    )
    return state, verdict


def _judge_probe(
    circuit: CircuitState,
    record: IterationRecord,
    found: Trip | None,
    assessment: Assessment | None,
    policy: Policy,
    history: tuple[Signals, ...],
    now: float,
) -> tuple[CircuitState, bool, bool]:
    """The probe's verdict: the circuit after it, and whether it (re)opened or closed."""
    # The probe succeeds with a positive progress score (or by finishing).
    progressed = (
        found is None
        and not record.failed
        and record.verify_passed
        and (record.done or (assessment is not None and assessment.score > 0))
    )
    held = _still_held(circuit, record, policy)
    if progressed and held is None:
        return close(circuit), False, True
    # The most specific word on why: a trip, the agent's failure, what it did not clear.
    why = record.failure or held or "no progress"
    reason = found.reason if found else f"probe failed: {why}"
    curable = found.curable if found else True
    failed = trip(circuit, reason, now=now, policy=policy.breaker, curable=curable)
    return _recover(circuit, failed, found, policy, history), True, False


def _still_held(circuit: CircuitState, record: IterationRecord, policy: Policy) -> str | None:
    """What the opening left for the probe to clear and it did not, if anything.

    After a promoted alert, progress must also clear what the alert measured;
    after a stagnation trip, the probe must not repeat the detector's pattern.
    Finishing clears both.
    """
    if record.done:
        return None
    alert = circuit.recovery_alert
    if alert is not None and not clears(alert, record.signals):
        return f"the {alert} alert still holds"
    pattern = circuit.recovery_detector
    error = circuit.recovery_error
    if pattern is not None and repeats(pattern, record.signals, policy.stagnation, error=error):
        return f"it repeats the {pattern} pattern that opened the circuit"
    return None


def _supervised_ending(
    circuit: CircuitState,
    opened: bool,
    record: IterationRecord,
    finished: bool,
    policy: Policy,
) -> Ending | None:
    """How the loop ends after this iteration, if it does."""
    leak = record.secscan if record.secscan is not None and record.secscan.open else None
    if opened and circuit.escalated:
        return _escalation(circuit, policy)
    if leak is not None:
        # A secret the scan found (or a scan that failed) stops the loop now,
        # a finishing iteration included: done with a leak is not done.
        return _gate_ending(leak)
    if finished:
        return Ending(DONE)
    return None


def _first_trip(
    state: LoopState,
    record: IterationRecord,
    policy: Policy,
    rules: LoopRules,
    assessment: Assessment | None,
) -> Trip | None:
    """The first trip condition that holds after this iteration, in the order they matter."""
    if record.is_harmful:
        # An agent that harms what it was told to keep is escalated, not retried.
        return Trip(
            INTEGRITY_GATE,
            f"integrity: {record.integrity_detail}",
            curable=False,
            evidence={"harmed": list(record.integrity or ())},
        )
    if rules.run_verify and (record.verify is not None or state.verify.gate_open):
        if state.verify.blocked is not None:
            reason = f"verify: state unreadable ({state.verify.blocked})"
            return Trip("verify", reason, curable=False)
        if state.verify.open:
            return _verify_trip(state.verify)
    if policy.budget.has_ceiling:
        if state.spend.blocked is not None:
            reason = f"budget: spend state unreadable ({state.spend.blocked})"
            return Trip("budget", reason, curable=False)
        exceeded = budget_exceeded(state.spend, policy.budget)
        if exceeded:
            return Trip("budget", f"budget: {exceeded}", curable=False)
    if rules.judge_stagnation and assessment is not None and assessment.reason is not None:
        evidence = {"detector": assessment.detector, **assessment.evidence}
        return Trip("stagnation", assessment.reason, evidence=evidence)
    return None


def _alert_trip(history: tuple[Signals, ...], policy: Policy) -> Trip | None:
    """An alert ``[alerts] trip_on`` promotes to a trip, if one holds."""
    alert = promoted(history, policy)
    if alert is None:
        return None
    evidence = {"detector": alert.name, "value": alert.value, "threshold": alert.threshold}
    return Trip("alert", f"alert: {alert.name} ({alert.detail})", evidence=evidence)


def _verify_trip(verify: VerifyAttempts) -> Trip:
    if verify.blocked is not None:
        return Trip("verify", f"verify: state unreadable ({verify.blocked})", curable=False)
    return Trip("verify", f"verify: {verify.consecutive_failures} consecutive failures")


def _provider_limit(
    record: IterationRecord, rules: LoopRules, now: float, in_a_row: int
) -> Verdict:
    """The provider refused: no breaker counts it; wait for the reset, or stop and say when.

    Without a reset time the wait is a backoff: a minute, doubling at each
    refusal in a row, up to ``limit_backoff_max``. An overloaded provider is
    waited out the same way by either loop.
    """
    limit = record.rate_limit
    resets_at = limit.resets_at if limit is not None else None
    overloaded = limit is not None and limit.status == "overloaded"
    backoff = backoff_pause(in_a_row, rules.limit_backoff_max)
    if in_a_row > rules.max_refusals:
        detail = (
            f"the provider refused {in_a_row} calls in a row "
            f"(more than [run] max_refusals = {rules.max_refusals})"
        )
    elif rules.supervised:
        until = resets_at if resets_at is not None else now + backoff
        return Verdict(judged=False, pause=Pause(until, shared=True))
    elif resets_at is not None and resets_at - now <= rules.max_limit_wait:
        return Verdict(judged=False, pause=Pause(resets_at, shared=False))
    elif overloaded and backoff <= rules.max_limit_wait:
        return Verdict(judged=False, pause=Pause(now + backoff, shared=False))
    elif resets_at is None:
        detail = "the provider refused the call and gave no reset time"
    else:
        detail = (
            f"the provider refused the call until {_utc(resets_at)}, longer than "
            f"[run] max_limit_wait ({rules.max_limit_wait:g}s)"
        )
    return Verdict(
        judged=False, ending=Ending(PROVIDER_LIMIT, gate="provider limit", detail=detail)
    )


def _gate_readings(
    state: LoopState, policy: Policy, secscan: GateReading | None
) -> list[GateReading]:
    readings = [verify_reading(state.verify), budget_reading(state.spend, policy.budget)]
    if secscan is not None:
        readings.append(secscan)
    return readings


def _gate_ending(stop: GateReading) -> Ending:
    return Ending(GATE_ERROR if stop.error else GATE_OPEN, gate=stop.gate, detail=stop.detail)


def _open(
    circuit: CircuitState,
    found: Trip,
    policy: Policy,
    now: float,
    history: tuple[Signals, ...],
) -> CircuitState:
    opened = trip(circuit, found.reason, now=now, policy=policy.breaker, curable=found.curable)
    return _recover(circuit, opened, found, policy, history)


def _recover(
    before: CircuitState,
    opened: CircuitState,
    found: Trip | None,
    policy: Policy,
    history: tuple[Signals, ...],
) -> CircuitState:
    """The watch and the next recovery strategy, for a circuit that just opened."""
    last_error = history[-1].error_fingerprint if history else None
    detector = found.evidence.get("detector") if found is not None else None
    alert = detector if found is not None and found.condition == "alert" else None
    stalled = detector if found is not None and found.condition == "stagnation" else None
    opened = attrs.evolve(
        opened,
        # A failed probe keeps what it had to clear (the alert, the detector's
        # pattern); any other opening names its own.
        recovery_error=last_error,
        recovery_alert=alert
        if isinstance(alert, str)
        else (before.recovery_alert if found is None else None),
        recovery_detector=stalled
        if isinstance(stalled, str)
        else (before.recovery_detector if found is None else None),
    )
    if found is None:  # a probe that made no progress: the strategy in force did not work
        # ... unless it failed on the very error the loop stalled on: that is the kind.
        kind = None
        if last_error is not None and last_error == before.recovery_error:
            kind = recovery.IDENTICAL_ERRORS
        return recovery.on_open(before, opened, kind, policy, stagnation=False)
    kind = recovery.trip_kind(found.condition, detector if isinstance(detector, str) else None)
    if kind == recovery.NO_PROGRESS and _repeated_error(history, found) is not None:
        kind = recovery.IDENTICAL_ERRORS  # the stall is the error's, not the plan's
    stagnation = found.condition in ("stagnation", "alert")
    return recovery.on_open(before, opened, kind, policy, stagnation=stagnation)


def _repeated_error(history: tuple[Signals, ...], found: Trip) -> str | None:
    """The error fingerprint every iteration of the trip's window ended with, if one did.

    The window is the streak the detector counted (``iterations`` in its
    evidence), else every iteration since the circuit last opened; it takes
    two iterations to repeat.
    """
    counted = found.evidence.get("iterations")
    window = history[-counted:] if isinstance(counted, int) and counted > 0 else history
    prints = {signals.error_fingerprint for signals in window}
    if len(window) < 2 or len(prints) != 1:
        return None
    return prints.pop()


def _cooldown(circuit: CircuitState, now: float) -> float:
    return cooldown_remaining(circuit, now)


def _escalation(circuit: CircuitState, policy: Policy) -> Ending:
    why = circuit.reason or "tripped"
    if circuit.opens > policy.breaker.max_opens:
        why = f"{why} (opened {circuit.opens} times; max_opens is exhausted)"
    return Ending(CIRCUIT_OPEN, detail=why)


def _add_spend(totals: SpendTotals, record: IterationRecord, now_iso: str) -> SpendTotals:
    return attrs.evolve(
        totals,
        tokens=totals.tokens + record.tokens,
        tool_calls=totals.tool_calls + record.tool_calls,
        cost_usd=round(totals.cost_usd + record.cost_usd, 6),
        iterations=totals.iterations + 1,
        updated_at=now_iso,
        cost_estimated=totals.cost_estimated or (record.cost_estimated and record.cost_usd > 0),
        unpriced=totals.unpriced + (1 if record.cost_note else 0),
    )


def _fold_verify(
    verify: VerifyAttempts, record: IterationRecord, policy: Policy, now_iso: str
) -> VerifyAttempts:
    if record.verify is None or record.verify_by_hook:
        return verify  # none ran, or the Stop hook already counted it in the breaker
    tree = record.tree
    return record_verdict(
        verify,
        passed=record.verify == PASS,
        max_failures=policy.verify.max_failures,
        now=now_iso,
        commit=tree.commit if tree else None,
        tree=tree.fingerprint if tree else None,
    )


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
