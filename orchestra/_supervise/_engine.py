"""A supervised loop: the loop of ``forge run`` with a circuit instead of a first-failure stop.

Per iteration: wait out an open circuit (or escalate), take a permit from the
shared rate limiter, run the executor, verify the change, and let the trip
conditions judge the iteration. A trip opens the circuit; after its cooldown
one half-open probe runs (even past an open verify breaker), and the probe's
outcome closes the circuit or re-opens it with the cooldown doubled. Only the
executor signalling done, with its verify passing, is a clean ending.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial

import attrs
import trio

from .. import _circuit as circuit_rules
from .._circuit import CLOSED, HALF_OPEN, OPEN, CircuitState
from .._errors import StateError
from .._executor import IterationOutcome
from .._gates import VERIFY_GATE, Gate, GateReading, first_stop
from .._loop import (
    CIRCUIT_OPEN,
    DONE,
    EXECUTOR_FAILED,
    EXHAUSTED,
    GATE_ERROR,
    INTERRUPTED,
    LoopPlan,
    RunSummary,
    check_gates,
    gate_states,
    gate_summary,
    guarded_iteration,
    iteration_event,
    record_event,
    record_stop,
)
from .._policy import Policy
from .._protect._check import IntegrityReport
from .._ratelimit import RateLimiter
from .._spend import add_spend, read_spend
from .._stagnation import Assessment, Signals, WorkspaceProbe, assess, recorded_iterations
from .._state import read_timeline
from .._verify import VerifyReport, read_breaker, record_attempt, run_verify
from .._workspace import tree_state
from ._circuit_store import load_circuit, save_circuit
from ._progress import LoopProgress
from ._trips import Trip, TripContext, judge

EventSink = Callable[[str, str, str], None]  # (kind, change, text)


@attrs.frozen
class Supervision:
    """What a supervised loop shares with the supervisor and knows of its own policy."""

    policy: Policy
    limiter: RateLimiter | None
    wall_clock: Callable[[], float] = time.time


async def run_supervised(
    plan: LoopPlan,
    gates: Sequence[Gate],
    supervision: Supervision,
    *,
    progress: LoopProgress,
    on_event: EventSink,
) -> RunSummary:
    """Run one loop under the supervisor until it is done or must stop."""
    circuit = load_circuit(plan.paths)
    readings = await check_gates(gates)
    record_event(
        plan.paths,
        "run.started",
        {
            "run_id": plan.run_id,
            "supervised": True,
            "plan": {
                "max_iterations": plan.max_iterations,
                "executor": plan.describe_executor(),
                "iterations_used": circuit.iterations_used,
            },
            "circuit": circuit.state,
            "gates": gate_states(readings),
        },
    )
    loop = _Loop(plan, gates, supervision, progress, on_event)
    try:
        summary = await loop.run(circuit)
    except StateError as exc:
        # A state file that cannot be read or written mid-run: the loop stops
        # like a gate that cannot be read, never as if all were well.
        summary = RunSummary(
            reason=GATE_ERROR, iterations=progress.iteration, gate="forge state", detail=exc.message
        )
    except BaseException:
        # Cancelled or interrupted: the executor tree is already stopped by the
        # process runner; record it, keep what was used, and let it go on.
        record_stop(plan, RunSummary(reason=INTERRUPTED, iterations=progress.iteration))
        progress.finish(INTERRUPTED)
        raise
    record_stop(plan, summary)
    save_circuit(plan.paths, attrs.evolve(loop.circuit, finished=summary.reason))
    if plan.integrity is not None:
        await trio.to_thread.run_sync(plan.integrity.finish)
    progress.finish(summary.reason)
    return summary


@attrs.define
class _Loop:
    plan: LoopPlan
    gates: Sequence[Gate]
    supervision: Supervision
    progress: LoopProgress
    on_event: EventSink
    circuit: CircuitState = attrs.field(factory=CircuitState)
    history: list[Signals] = attrs.field(factory=list)
    probe: WorkspaceProbe | None = None
    integrity: IntegrityReport | None = None

    async def run(self, circuit: CircuitState) -> RunSummary:
        self.circuit = circuit
        # The detectors look back across runs: a restarted loop keeps its history.
        events = read_timeline(self.plan.paths.timeline).events
        self.history = [r.signals for r in recorded_iterations(events)]
        self.probe = await trio.to_thread.run_sync(
            WorkspaceProbe, self.plan.workdir, self.supervision.policy.stagnation
        )
        used = circuit.iterations_used
        await trio.to_thread.run_sync(self._load_progress)
        if circuit.finished == DONE:
            self._say("loop", "already done in an earlier run; nothing to do")
            return RunSummary(reason=DONE, iterations=used, detail="done in an earlier run")
        last: IterationOutcome | None = None
        for number in range(used + 1, self.plan.max_iterations + 1):
            if self.circuit.state == CLOSED and await self._verify_breaker_open():
                # An open verify breaker stops ordinary iterations; in a supervised
                # loop it is a trip: cool down, then probe past it.
                state = read_breaker(self.plan.paths).after
                already = Trip(
                    "verify", f"verify: {state.consecutive_failures} consecutive failures"
                )
                if (stop := self._open(already)) is not None:
                    return attrs.evolve(stop, iterations=number - 1, last=last)
            if (stop := await self._wait_for_circuit()) is not None:
                return attrs.evolve(stop, iterations=number - 1, last=last)
            probe = self.circuit.state == HALF_OPEN
            readings = await check_gates(self._gates())
            if (gate := first_stop(readings)) is not None:
                return gate_summary(gate, number - 1, last, None)
            if self.supervision.limiter is not None:
                self.progress.status = "waiting for a permit"
                await self.supervision.limiter.acquire(self.plan.paths.name)
            self.progress.status = "probing" if probe else "running"
            before = await trio.to_thread.run_sync(self._probe().snapshot)
            last = await self._iterate(number)
            if _cannot_start(last, self.plan):
                # Not a failed iteration to judge: the executor cannot run at all.
                return RunSummary(
                    reason=EXECUTOR_FAILED, iterations=number, detail=last.failure, last=last
                )
            limit = last.observation.rate_limit
            harmed_now = self.integrity is not None and self.integrity.harmed
            if limit is not None and limit.status == "rejected" and not harmed_now:
                # The provider refused: not this loop's failure. Nothing is judged;
                # every loop waits for the reset (the limiter is paused).
                self._say("iteration", f"{number}/{self.plan.max_iterations}: provider limit")
                await self._record_async(last, await check_gates(self._gates()))
                continue
            # The agent's work is what changed before the verify ran: files the
            # verify writes (reports, caches) are not the agent's progress.
            after = await trio.to_thread.run_sync(self._probe().take)
            # After harm to a protected path the loop stops: verifying the
            # restored tree would only add a verdict nobody asked for.
            verify = None if harmed_now else await self._verify()
            measure = partial(self._probe().measure, before, last, verify, after=after)
            signals = await trio.to_thread.run_sync(measure)
            self.history.append(signals)
            stagnation = assess(self.history, self.supervision.policy.stagnation)
            self.progress.score = stagnation.score
            self.progress.risk = stagnation.risk
            harmed = self.integrity is not None and self.integrity.harmed
            finished = last.done and (verify is None or verify.passed) and not harmed
            # A finished iteration is the clean ending: nothing left to judge it for.
            trip = None if finished else judge(self._trip_context(last, verify, stagnation))
            ending_text = last.failure or ("done" if last.done else "exit 0")
            verdict = f", verify {verify.verdict}" if verify else ""
            self._say("iteration", f"{number}/{self.plan.max_iterations}: {ending_text}{verdict}")
            ending = self._update_circuit(trip, last, verify, probe, stagnation)
            readings = await check_gates(self._gates())
            record = partial(
                self._record_iteration, last, readings, verify, trip, signals, stagnation
            )
            await trio.to_thread.run_sync(record)
            if self.circuit.state == OPEN:
                # A fresh start after each opening: the probe is judged on its own
                # progress, not on the window that tripped the circuit.
                self.history.clear()
            if ending is not None:
                return attrs.evolve(ending, iterations=number, last=last)
            if finished:
                return RunSummary(reason=DONE, iterations=number, last=last)
        return RunSummary(
            reason=EXHAUSTED,
            iterations=self.plan.max_iterations,
            detail=(
                f"{self.plan.max_iterations} of {self.plan.max_iterations} iteration(s) used "
                "without the executor signalling done"
            ),
            last=last,
        )

    async def _wait_for_circuit(self) -> RunSummary | None:
        """Sit out an open circuit's cooldown; None when the loop may go on."""
        if self.circuit.state != OPEN:
            return None
        if self.circuit.escalated:
            return RunSummary(reason=CIRCUIT_OPEN, iterations=0, detail=self._escalation_detail())
        remaining = circuit_rules.cooldown_remaining(self.circuit, self.supervision.wall_clock())
        self.progress.status = "cooling down"
        self.progress.circuit = self.circuit.state
        self.progress.cooldown_until = trio.current_time() + remaining
        self._say("circuit", f"circuit OPEN — cooling down, {remaining:.0f}s left")
        # The wait runs on trio's monotonic clock: a wall-clock jump cannot cut it short.
        await trio.sleep(remaining)
        self.progress.cooldown_until = None
        self.circuit = circuit_rules.half_open(self.circuit)
        save_circuit(self.plan.paths, self.circuit)
        self._transition("breaker.half_open", "the cooldown has elapsed")
        return None

    async def _verify_breaker_open(self) -> bool:
        if not self.supervision.policy.verify.command.strip():
            return False
        state = (await trio.to_thread.run_sync(read_breaker, self.plan.paths)).after
        return state.open or state.blocked is not None

    def _load_progress(self) -> None:
        """Show what earlier runs left: circuit, trips, spend and verify."""
        circuit = self.circuit
        self.progress.iteration = circuit.iterations_used
        self.progress.circuit = circuit.state
        self.progress.trips = circuit.opens
        spend = read_spend(self.plan.paths).totals
        self.progress.tokens, self.progress.cost_usd = spend.tokens, spend.cost_usd
        verify = read_breaker(self.plan.paths).after
        if verify.last_verdict is not None:
            threshold = self.supervision.policy.verify.max_failures
            self.progress.verify = (
                f"{verify.last_verdict} {verify.consecutive_failures}/{threshold}"
            )

    def _gates(self) -> list[Gate]:
        # In a supervised loop the verify breaker is a trip condition, not a gate.
        return [gate for gate in self.gates if gate.name != VERIFY_GATE]

    async def _iterate(self, number: int) -> IterationOutcome:
        self.progress.iteration = number
        # Counted as used when it starts: an interrupted iteration was spent too,
        # and a rerun goes on after it rather than running it twice.
        self.circuit = attrs.evolve(self.circuit, iterations_used=number, finished=None)
        # State writes fsync: off the event loop, or every other loop would wait.
        await trio.to_thread.run_sync(save_circuit, self.plan.paths, self.circuit)
        started = {"run_id": self.plan.run_id, "iteration": number}
        await trio.to_thread.run_sync(record_event, self.plan.paths, "iteration.started", started)
        outcome, self.integrity = await guarded_iteration(self.plan, number)
        spent = partial(
            add_spend,
            self.plan.paths,
            tokens=outcome.tokens,
            tool_calls=outcome.tool_calls,
            cost_usd=outcome.cost_usd,
        )
        spend = (await trio.to_thread.run_sync(spent)).totals
        self.progress.tokens = spend.tokens
        self.progress.cost_usd = spend.cost_usd
        limit = outcome.observation.rate_limit
        if limit is not None and limit.status == "rejected" and self.supervision.limiter:
            until = limit.resets_at or self.supervision.wall_clock() + 60
            await self.supervision.limiter.pause_until(
                until, f"provider limit reported by {self.plan.paths.name}"
            )
        return outcome

    async def _verify(self) -> VerifyReport | None:
        verify = self.supervision.policy.verify
        if not verify.command.strip():
            return None
        self.progress.status = "verifying"
        tree = await trio.to_thread.run_sync(tree_state, self.plan.workdir)
        report = await run_verify(self.plan.workdir, verify, self.plan.grace, self.plan.redact)
        update = await trio.to_thread.run_sync(
            partial(
                record_attempt, self.plan.paths, report, max_failures=verify.max_failures, tree=tree
            )
        )
        self.progress.verify = (
            f"{report.verdict} {update.after.consecutive_failures}/{verify.max_failures}"
        )
        return report

    def _probe(self) -> WorkspaceProbe:
        if self.probe is None:  # pragma: no cover - run() sets it first
            raise RuntimeError("the workspace probe is made when the loop starts")
        return self.probe

    def _trip_context(
        self, last: IterationOutcome, verify: VerifyReport | None, stagnation: Assessment
    ) -> TripContext:
        return TripContext(
            paths=self.plan.paths,
            policy=self.supervision.policy,
            outcome=last,
            verify=verify,
            stagnation=stagnation,
            integrity=self.integrity,
        )

    def _update_circuit(
        self,
        trip: Trip | None,
        last: IterationOutcome,
        verify: VerifyReport | None,
        probe: bool,
        stagnation: Assessment,
    ) -> RunSummary | None:
        """Apply the iteration's verdict to the circuit; a summary when the loop must stop."""
        now = self.supervision.wall_clock()
        policy = self.supervision.policy.breaker
        if probe:
            # The seed: a probe succeeds with a positive progress score.
            progressed = (
                trip is None
                and not last.failed
                and not last.observation.is_error
                and (verify is None or verify.passed)
                and (stagnation.score > 0 or last.done)
            )
            if progressed:
                self.circuit = circuit_rules.close(self.circuit)
                save_circuit(self.plan.paths, self.circuit)
                self._transition("breaker.closed", "the probe made progress")
                return None
            reason = trip.reason if trip else f"probe failed: {last.failure or 'no progress'}"
            curable = trip.curable if trip else True
            self.circuit = circuit_rules.trip(
                self.circuit, reason, now=now, policy=policy, curable=curable
            )
            return self._opened(trip)
        if trip is not None:
            return self._open(trip)
        return None

    def _open(self, trip: Trip) -> RunSummary | None:
        """A trip condition holds: open the circuit (a summary when that escalates)."""
        self.circuit = circuit_rules.trip(
            self.circuit,
            trip.reason,
            now=self.supervision.wall_clock(),
            policy=self.supervision.policy.breaker,
            curable=trip.curable,
        )
        return self._opened(trip)

    def _opened(self, trip: Trip | None) -> RunSummary | None:
        save_circuit(self.plan.paths, self.circuit)
        evidence = {"condition": trip.condition, **trip.evidence} if trip else {}
        self._transition("breaker.opened", self.circuit.reason or "", evidence)
        if self.circuit.escalated:
            return RunSummary(reason=CIRCUIT_OPEN, iterations=0, detail=self._escalation_detail())
        return None

    def _escalation_detail(self) -> str:
        circuit = self.circuit
        why = circuit.reason or "tripped"
        if circuit.opens > self.supervision.policy.breaker.max_opens:
            return f"{why} (opened {circuit.opens} times; max_opens is exhausted)"
        return why

    def _transition(
        self, event: str, reason: str, evidence: dict[str, object] | None = None
    ) -> None:
        circuit = self.circuit
        fields: dict[str, object] = {
            "run_id": self.plan.run_id,
            "reason": reason,
            "cooldown": circuit.cooldown,
            "opens": circuit.opens,
            "escalated": circuit.escalated,
        }
        if evidence:
            fields["evidence"] = evidence
        record_event(self.plan.paths, event, fields)
        self.progress.circuit = circuit.state
        self.progress.trips = circuit.opens
        if event == "breaker.opened" and circuit.escalated:
            text = f"circuit OPEN for good — {reason}; escalate to a human"
        elif event == "breaker.opened":
            text = f"circuit OPEN — {reason}; cooling down {circuit.cooldown:g}s"
        elif event == "breaker.half_open":
            text = "circuit HALF-OPEN — cooldown over; one probe iteration"
        else:
            text = f"circuit CLOSED — {reason}"
        self._say(event, text)

    async def _record_async(self, last: IterationOutcome, readings: Sequence[GateReading]) -> None:
        fields = iteration_event(self.plan, last, readings)
        fields["judged"] = False
        await trio.to_thread.run_sync(record_event, self.plan.paths, "iteration.finished", fields)

    def _record_iteration(
        self,
        last: IterationOutcome,
        readings: Sequence[GateReading],
        verify: VerifyReport | None,
        trip: Trip | None,
        signals: Signals,
        stagnation: Assessment,
    ) -> None:
        fields = iteration_event(self.plan, last, readings)
        fields["verify"] = None if verify is None else verify.verdict
        fields["trip"] = None if trip is None else trip.reason
        fields["signals"] = signals.as_record()
        fields["score"] = stagnation.score
        fields["window_score"] = stagnation.window_score
        fields["risk"] = stagnation.risk
        fields["circuit"] = self.circuit.state
        fields["integrity"] = self.integrity.as_record() if self.integrity is not None else None
        record_event(self.plan.paths, "iteration.finished", fields)

    def _say(self, kind: str, text: str) -> None:
        self.progress.last_event = text
        self.on_event(kind, self.plan.paths.name, text)


def _cannot_start(outcome: IterationOutcome, plan: LoopPlan) -> bool:
    """The executor did not run at all: no program, or (through sh -c) not found or not runnable."""
    if outcome.process.start_error is not None:
        return True
    return not plan.executor.templated and outcome.process.exit_code in (126, 127)
