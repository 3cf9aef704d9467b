"""The one loop under ``forge run`` and ``forge supervise``.

Per iteration: ask :func:`admit` whether it may run (sitting out a cooldown
if the circuit is open), take a permit from the shared rate limiter, run the
executor between an integrity manifest and its check, measure what changed,
run the verify (when the loop does), read the secret scan once, and commit
the iteration's record through :func:`decide` in one write. Only the
executor signalling done (with its verify passing) is a clean ending; every
other ending asks a human to review.

Everything that blocks (state files, git, the scan) runs off the event loop,
so many loops share one trio thread without stalling each other.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import attrs
import trio

from .._circuit import HALF_OPEN, OPEN
from .._errors import StateError
from .._executor import Executor, IterationContext, IterationOutcome, run_iteration
from .._hook_passing import LOOP_VERIFY
from .._monitor import CallsLeft
from .._policy import Policy, policy_as_dict, verify_digest
from .._protect import IntegrityCheck, IntegrityReport, integrity_check
from .._ratelimit import RateLimiter
from .._redact import Redact
from .._stagnation import Snapshot, WorkspaceProbe
from .._state import (
    FORGE_WRITES,
    AlertCleared,
    AlertRaised,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    ChangePaths,
    Event,
    IterationStarted,
    ProtectViolation,
    RecoveryStep,
    RunStarted,
    RunStopped,
    utc_iso,
)
from .._treestatus import TreeStatus, read_status, work_tree_prefix
from .._verify import VerifyReport, read_breaker, run_verify, verify_event
from .._workspace import tree_state, tree_state_from
from ._decide import (
    LoopRules,
    LoopState,
    Trip,
    Verdict,
    admit,
    cooled_down,
    decide,
    exhausted,
    opening_reason,
)
from ._endings import DONE, GATE_ERROR, INTERRUPTED, Ending, RunSummary, new_run_id
from ._gates import (
    STATE_GATE,
    GateReading,
    SecscanGate,
    budget_reading,
    gate_states,
    verify_reading,
)
from ._progress import LoopProgress, verify_cell
from ._record import IterationRecord, finished_event, iteration_record
from ._recovery import Strategy, in_force, with_strategy
from ._store import ChangeStore, Store
from ._watch import IterationWatch

_T = TypeVar("_T")

EventSink = Callable[[str, str, str], None]  # (kind, change, text)
IterationCallback = Callable[[IterationOutcome, IterationRecord], None]


@attrs.frozen
class LoopPlan:
    """Everything one bounded loop needs to know before it starts."""

    paths: ChangePaths
    executor: Executor
    max_iterations: int
    time_limit: float
    grace: float
    done_marker: str
    workdir: Path
    prompt: str = ""
    run_id: str = attrs.field(factory=new_run_id)
    integrity: IntegrityCheck | None = None
    # Secrets in executor output are redacted before anything keeps it.
    redact: Redact | None = None

    def context(self, number: int, strategy: Strategy | None = None) -> IterationContext:
        run_dir = self.paths.runs / self.run_id
        return IterationContext(
            change=self.paths.name,
            number=number,
            max_iterations=self.max_iterations,
            workdir=self.workdir,
            state_dir=self.paths.folder,
            report_path=run_dir / f"iteration-{number}.report.json",
            log_path=run_dir / f"iteration-{number}.log",
            prompt=with_strategy(self.prompt, strategy),
            extra_env=strategy.environment() if strategy is not None else (),
        )

    def describe_executor(self) -> str:
        return self.executor.describe(self.context(1).placeholders())


@attrs.frozen
class LoopSettings:
    """What a loop shares with its supervisor and knows of its own policy.

    Attributes:
        policy: The loop's effective policy.
        rules: How it treats a trip (see :class:`LoopRules`).
        secscan: The secret-scan gate (its scanner, or none).
        limiter: The shared rate limiter every executor start takes a permit from.
        wall_clock: Wall-clock epoch seconds (persisted times, provider resets).
    """

    policy: Policy
    rules: LoopRules
    secscan: SecscanGate = attrs.field(factory=SecscanGate)
    limiter: RateLimiter | None = None
    wall_clock: Callable[[], float] = time.time


def iteration_time_limit(executor: Executor, policy: Policy, *, flag_set: bool = False) -> float:
    """An iteration's limit: a flag wins, then the executor definition's own, then the policy's."""
    if executor.spec.timeout is not None and not flag_set:
        return executor.spec.timeout.seconds
    return policy.run.timeout.seconds


def loop_integrity(policy: Policy, plan: LoopPlan) -> IntegrityCheck:
    """The integrity check of a plan's working tree and of every change's state."""
    paths = plan.paths
    return integrity_check(policy, workdir=plan.workdir, root=paths.root, state_folder=paths.folder)


async def run_loop(
    plan: LoopPlan,
    settings: LoopSettings,
    *,
    progress: LoopProgress,
    on_event: EventSink | None = None,
    on_iteration: IterationCallback | None = None,
    store: Store | None = None,
) -> RunSummary:
    """Run one loop until it is done or must stop; the summary says which.

    ``store`` keeps the change's state (default: its files under ``.forge/``;
    a fleet passes its Redis store).
    """
    if store is None:
        store = ChangeStore(plan.paths, owns_circuit=settings.rules.supervised)
    loop = _Loop(plan, settings, store, progress, on_event, on_iteration)
    try:
        summary = await loop.run()
    except StateError as exc:
        # A state file that cannot be read or written mid-run: the loop stops
        # like a gate that cannot be read, never as if all were well. The
        # iteration whose record failed ran: it counts.
        summary = RunSummary(
            reason=GATE_ERROR, iterations=progress.iteration, gate=STATE_GATE, detail=exc.message
        )
    except BaseException:
        # Cancelled or interrupted: the executor tree is already stopped by the
        # process runner. Record it (unwinding: no thread to hop to, so this one
        # write runs here), but never let a failing record hide the interruption.
        done = progress.iteration if settings.rules.supervised else progress.completed
        with contextlib.suppress(StateError, OSError):
            store.stop(RunStopped(run_id=plan.run_id, reason=INTERRUPTED, iterations=done))
        progress.finish(INTERRUPTED)
        raise
    finished = summary.reason if settings.rules.supervised else None
    stopped = RunStopped(
        run_id=plan.run_id,
        reason=summary.reason,
        iterations=summary.iterations,
        gate=summary.gate,
        detail=summary.detail,
    )
    try:
        await _in_thread(store.stop, stopped, finished=finished)
    except StateError:
        if summary.reason != GATE_ERROR:
            raise
        # The disk that failed mid-run fails again: the ending stands as it is.
    if plan.integrity is not None:
        await _in_thread(plan.integrity.finish)
    progress.finish(summary.reason)
    return summary


@attrs.define
class _Loop:
    plan: LoopPlan
    settings: LoopSettings
    store: Store
    progress: LoopProgress
    on_event: EventSink | None
    on_iteration: IterationCallback | None
    probe: WorkspaceProbe | None = None
    last: IterationOutcome | None = None
    # The working tree as last read: one git status serves the measurement
    # after an iteration, the next iteration's "before" and the secret scan.
    before: Snapshot | None = None
    status: TreeStatus | None = None
    prefix: str | None = None
    # The agent session the last iteration ran in (continued when the executor can).
    session: str | None = None
    hook_attempts: int = 0  # the breaker's attempts before the iteration (see _hook_verdict)
    # The status log and the lessons file: what a person watching reads.
    watch: IterationWatch = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.watch = IterationWatch(
            self.plan.paths,
            self.plan.workdir,
            self.settings.policy,
            active=self.settings.rules.supervised,
            progress=self.progress,
            redact=self.plan.redact,
        )

    @property
    def rules(self) -> LoopRules:
        return self.settings.rules

    @property
    def policy(self) -> Policy:
        return self.settings.policy

    async def run(self) -> RunSummary:
        state = await _in_thread(self.store.load)
        await _in_thread(self._look_at_the_tree)
        secscan = await _in_thread(self.settings.secscan.check, self.status)
        await _in_thread(self.store.append, self._started(state, secscan))
        self._show_state(state)
        circuit = state.circuit
        used = circuit.iterations_used if self.rules.supervised else 0
        if self.rules.supervised and circuit.finished == DONE:
            self._say("loop", "already done in an earlier run; nothing to do")
            return RunSummary(reason=DONE, iterations=used, detail="done in an earlier run")
        number = used
        # A call a provider refused uses no iteration: the cap counts the others.
        while number - state.refused < self.rules.max_iterations:
            number += 1
            state, ending = await self._admit(state, secscan)
            if ending is not None:
                return self._summary(ending, number - 1, state)
            state, verdict, secscan = await self._iterate(state, number)
            if verdict.pause_until is not None:
                await self._pause(verdict.pause_until)
            if verdict.ending is not None:
                return self._summary(verdict.ending, number, state)
        # Nothing left to run: an earlier run used every iteration.
        return self._summary(exhausted(self.rules.max_iterations), self.rules.max_iterations, state)

    # -- before an iteration -------------------------------------------------

    async def _admit(
        self, state: LoopState, secscan: GateReading
    ) -> tuple[LoopState, Ending | None]:
        while True:
            state, admission = admit(
                state,
                self.policy,
                self.rules,
                now=self.settings.wall_clock(),
                secscan=secscan,
            )
            if admission.opened is not None:
                event = self._circuit_event(BreakerOpened, state, admission.opened)
                extra = self._recovery_events(state, None)
                state = await _in_thread(self.store.save_circuit, state.circuit, event, *extra)
                self._show_recovery(state)
                self._show_transition(event, state)
            if admission.ending is not None or admission.wait is None:
                return state, admission.ending
            await self._cool_down(admission.wait)
            # A person may have reset the circuit (or a breaker) meanwhile: look
            # again before moving it, and admit afresh when it is no longer open.
            state = await _in_thread(self.store.refresh)
            if state.circuit.state != OPEN:
                continue
            state = cooled_down(state)
            event = self._circuit_event(BreakerHalfOpen, state, reason="the cooldown has elapsed")
            state = await _in_thread(self.store.save_circuit, state.circuit, event)
            self._show_transition(event, state)

    async def _cool_down(self, seconds: float) -> None:
        progress = self.progress
        progress.status = "cooling down"
        progress.circuit = OPEN
        progress.cooldown_until = trio.current_time() + seconds
        self._say("circuit", f"circuit OPEN — cooling down, {seconds:.0f}s left")
        # The wait runs on trio's monotonic clock: a wall-clock jump cannot cut it short.
        await trio.sleep(seconds)
        progress.cooldown_until = None

    # -- one iteration -------------------------------------------------------

    async def _iterate(
        self, state: LoopState, number: int
    ) -> tuple[LoopState, Verdict, GateReading]:
        """One iteration, in three hops off the event loop around the executor and verify."""
        probing = state.circuit.state == HALF_OPEN
        # A fresh session after the circuit opened: a recovery wants a fresh look.
        session = None if probing or state.circuit.state == OPEN else self.session
        limiter = self.settings.limiter
        if limiter is not None:
            self.progress.status = "waiting for a permit"
            await limiter.acquire(self.plan.paths.name)
        self.progress.status = "probing" if probing else "running"
        self.progress.iteration = number
        label = f"{self.plan.run_id}-{number}"
        await _in_thread(self._before_executor, number)
        strategy = in_force(state.circuit, self.policy) if self.rules.supervised else None
        self.progress.recovery = strategy.describe() if strategy is not None else ""
        context = self.plan.context(number, strategy)
        if self.plan.executor.verifies_at_stop:
            context = attrs.evolve(context, extra_env=(*context.extra_env, self._loop_verify()))
        try:
            outcome = await run_iteration(
                self.plan.executor,
                context,
                time_limit=self.plan.time_limit,
                grace=self.plan.grace,
                done_marker=self.plan.done_marker,
                redact=self.plan.redact,
                session=session,
            )
        except BaseException:
            if self.plan.integrity is not None:
                # Interrupted: the executor tree is stopped; whatever it harmed is
                # put back before the interruption goes on (synchronously: unwinding),
                # and a repair that fails must not replace the interruption.
                with contextlib.suppress(StateError, OSError):
                    _repair_while_unwinding(
                        self.plan, self.store, number, self.plan.integrity, label
                    )
            raise
        self.last = outcome
        self.session = outcome.observation.session_id or self.session
        integrity, after = await _in_thread(self._after_executor, number, label)
        record = iteration_record(
            self.plan.run_id,
            outcome,
            log=str(outcome.log_path.relative_to(self.plan.paths.folder)),
            templated=self.plan.executor.templated,
            integrity=integrity,
        )
        judged = not (record.provider_refused and not record.is_harmful)
        measured = judged and not record.cannot_start
        record = await self._verified(record, measured)
        # The rate window's calls left after this iteration's permit: the
        # calls-remaining alert judges them, and the record keeps them for a replay.
        record = attrs.evolve(record, calls=_calls_left(limiter))
        # The clock is read here, on the event loop (a test's clock lives there).
        # One reading of the loop's wall clock (a fleet's is its server's) for
        # both the decision and the times it persists.
        now = self.settings.wall_clock()
        now_iso = utc_iso(now)
        judge = partial(self._judge, now, now_iso)
        conclude = partial(self._conclude, record, outcome, after, measured, state, now_iso, judge)
        state, verdict, record, secscan = await _in_thread(conclude)
        self.progress.completed += 1
        self._show_iteration(outcome, record, state, verdict)
        return state, verdict, secscan

    async def _verified(self, record: IterationRecord, measured: bool) -> IterationRecord:
        """The record with the iteration's verdict: the Stop hook's that stands, or the loop's."""
        if not (measured and self.rules.run_verify and not record.is_harmful):
            # After harm to a protected path the loop stops: verifying the
            # restored tree would only add a verdict nobody asked for.
            return attrs.evolve(record, verify=None, verify_report=None, tree=None)
        by_hook = await _in_thread(self._hook_verdict)
        if by_hook is not None:
            # The agent's Stop hook verified this very tree and counted it: one
            # verify per iteration, the hook's.
            return attrs.evolve(record, verify=by_hook, verify_by_hook=True)
        self.progress.status = "verifying"
        if self.status is not None:
            tree = tree_state_from(self.status)
        else:
            tree = await _in_thread(tree_state, self.plan.workdir)
        report = await run_verify(
            self.plan.workdir, self.policy.verify, self.plan.grace, self.plan.redact
        )
        return attrs.evolve(record, verify=report.verdict, verify_report=report, tree=tree)

    # -- blocking steps, each run in one worker thread ------------------------

    def _before_executor(self, number: int) -> None:
        """Record the start (counted as used: a rerun goes on after it) and arm the check."""
        self.store.begin(IterationStarted(run_id=self.plan.run_id, iteration=number))
        if self.plan.executor.verifies_at_stop:
            self.hook_attempts = read_breaker(self.plan.paths).after.total_attempts
        if self.plan.integrity is not None:
            self.plan.integrity.arm()

    def _loop_verify(self) -> tuple[str, str]:
        """The loop's ``[verify]``, for the Stop hook whose verdict is the iteration's."""
        table = policy_as_dict(self.policy)["verify"]
        return LOOP_VERIFY, json.dumps({k: v for k, v in table.items() if v is not None})

    def _hook_verdict(self) -> str | None:
        """The verdict the executor's Stop hook recorded during the iteration, if it stands.

        It stands for the iteration only when it was reached during it, under
        the loop's own ``[verify]``, on the tree the iteration ended with: a
        verdict on an earlier tree (the agent edited on after its stop, or was
        cut short) or under other checks is no verdict of this iteration, and
        the loop verifies itself.
        """
        if not self.plan.executor.verifies_at_stop:
            return None
        breaker = read_breaker(self.plan.paths).after
        if breaker.total_attempts <= self.hook_attempts or breaker.last_verdict is None:
            return None
        if breaker.last_checks != verify_digest(self.policy):
            return None
        status = self.status
        tree = tree_state_from(status) if status is not None else tree_state(self.plan.workdir)
        if tree.fingerprint is None or breaker.last_tree != tree.fingerprint:
            return None
        return breaker.last_verdict

    def _after_executor(
        self, number: int, label: str
    ) -> tuple[IntegrityReport | None, Snapshot | None]:
        """Restore and record any harm, then read the tree once."""
        check = self.plan.integrity
        report = _inspect(self.plan, self.store, number, check, label) if check else None
        if self.probe is None:
            if self.prefix is not None:
                self.status = read_status(self.plan.workdir, self.prefix)
            return report, None
        # The agent's work is what changed before the verify ran: files the
        # verify writes (reports, caches) are not the agent's progress.
        after = self.probe.take()
        self.status = after.status
        return report, after

    def _conclude(
        self,
        record: IterationRecord,
        outcome: IterationOutcome,
        after: Snapshot | None,
        measured: bool,
        ran_in: LoopState,
        now_iso: str,
        judge: Callable[[IterationRecord, LoopState], tuple[LoopState, Verdict, list[Event]]],
    ) -> tuple[LoopState, Verdict, IterationRecord, GateReading]:
        """Measure, scan, judge and commit the iteration, then render what a person reads."""
        probe, before = self.probe, self.before
        fresh = after
        if measured and probe is not None and before is not None and after is not None:
            report = record.verify_report
            signals = probe.measure(before, outcome, report, after=after)
            record = attrs.evolve(record, signals=signals)
            if report is not None:
                # The next "before" is the tree after the verify: the files it
                # writes (reports, caches) are not the next iteration's work.
                fresh = probe.take()
                self.status = fresh.status
        if probe is not None and fresh is not None:
            self.before = probe.mark_seen(fresh)
        secscan = self.settings.secscan.check(self.status)
        record = attrs.evolve(record, secscan=secscan)
        state, verdict = self.store.commit(record, partial(judge, record))
        # After the commit, outside the change's lock: the status log and the
        # lessons file are renderings of what was committed, not part of it.
        self.watch.render(record, ran_in, state, verdict, now_iso)
        return state, verdict, record, secscan

    def _judge(
        self, now: float, now_iso: str, record: IterationRecord, state: LoopState
    ) -> tuple[LoopState, Verdict, list[Event]]:
        """Runs inside the store's commit: decide, then the events that record it."""
        after, verdict = decide(state, record, self.policy, self.rules, now=now, now_iso=now_iso)
        events: list[Event] = []
        report: VerifyReport | None = record.verify_report
        if report is not None:
            events.append(
                verify_event(
                    report, after.verify, run_id=self.plan.run_id, iteration=record.iteration
                )
            )
        readings = [verify_reading(after.verify), budget_reading(after.spend, self.policy.budget)]
        if record.secscan is not None:
            readings.append(record.secscan)
        assessment = verdict.assessment
        pause = None if verdict.pause_until is None else max(0.0, verdict.pause_until - now)
        # The risk, raised by the alerts holding (a supervised loop's).
        risk = after.risk if after.risk is not None else assessment.risk if assessment else None
        events.append(
            finished_event(
                record,
                pause=round(pause, 3) if pause is not None else None,
                gates=gate_states(readings),
                judged=verdict.judged,
                trip=opening_reason(verdict, after, self.rules),
                score=assessment.score if assessment else None,
                window_score=assessment.window_score if assessment else None,
                risk=risk,
                circuit=after.circuit.state if self.rules.supervised else None,
            )
        )
        if verdict.opened:
            events.append(self._circuit_event(BreakerOpened, after, verdict.trip))
            events.extend(self._recovery_events(after, record.iteration))
        elif verdict.closed:
            events.append(
                self._circuit_event(BreakerClosed, after, reason="the probe made progress")
            )
        events.extend(self._alert_events(record.iteration, verdict))
        return after, verdict, events

    def _recovery_events(self, state: LoopState, iteration: int | None) -> list[Event]:
        """The circuit just opened: the strategy the iterations after it are given."""
        strategy = in_force(state.circuit, self.policy) if self.rules.supervised else None
        if strategy is None:
            return []
        step = RecoveryStep(
            run_id=self.plan.run_id,
            iteration=iteration,
            trip_kind=strategy.kind,
            step=strategy.step,
            steps=strategy.steps,
            strategy=strategy.text,
            escalated=state.circuit.escalated,
        )
        return [step]

    def _alert_events(self, iteration: int, verdict: Verdict) -> list[Event]:
        """The alerts the decision raised and cleared, for the timeline."""
        run_id = self.plan.run_id
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

    async def _pause(self, until: float) -> None:
        """A provider limit: wait for its reset (every loop on the limiter waits too)."""
        limiter = self.settings.limiter
        reason = f"provider limit reported by {self.plan.paths.name}"
        if self.rules.supervised:
            seconds = max(until - self.settings.wall_clock(), 0.0)
            self._say("limit", f"provider limit — no executor starts for {seconds:.0f}s")
        if limiter is not None:
            await limiter.pause_until(until, reason)
        if not self.rules.supervised or limiter is None:
            # forge run waits here itself (bounded by [run] max_limit_wait); a
            # supervised loop waits for its next permit instead.
            seconds = until - self.settings.wall_clock()
            if seconds > 0:
                self.progress.status = "waiting for the provider's reset"
                self._say("limit", f"provider limit — waiting {seconds:.0f}s for its reset")
                await trio.sleep(seconds)

    # -- the working tree ----------------------------------------------------

    def _look_at_the_tree(self) -> None:
        """Before the first iteration (blocking): where the tree is, and its state."""
        if self.rules.judge_stagnation:
            self.probe = WorkspaceProbe(
                self.plan.workdir, self.policy.stagnation, forge_files=self._forge_files()
            )
            self.before = self.probe.snapshot()
            self.status = self.before.status
        else:
            self.prefix = work_tree_prefix(self.plan.workdir)
            if self.prefix is not None:
                self.status = read_status(self.plan.workdir, self.prefix)

    def _forge_files(self) -> tuple[str, ...]:
        """Files Forge writes inside the working tree, relative to it (the lessons file)."""
        lessons = self.policy.recovery.lessons
        if not lessons:
            return ()
        inside = PurePosixPath(lessons)
        # Its folder's journal of Forge's writes is Forge's too.
        return (inside.as_posix(), (inside.parent / FORGE_WRITES).as_posix())

    # -- records and words ---------------------------------------------------

    def _started(self, state: LoopState, secscan: GateReading) -> RunStarted:
        plan = self.plan
        readings = [
            verify_reading(state.verify),
            budget_reading(state.spend, self.policy.budget),
            secscan,
        ]
        return RunStarted(
            run_id=plan.run_id,
            supervised=self.rules.supervised,
            plan={
                "max_iterations": plan.max_iterations,
                "executor": plan.describe_executor(),
                "timeout": plan.time_limit,
                "grace": plan.grace,
                "iterations_used": state.circuit.iterations_used if self.rules.supervised else 0,
            },
            circuit=state.circuit.state,
            gates=gate_states(readings),
        )

    def _circuit_event(
        self,
        kind: type[BreakerOpened] | type[BreakerHalfOpen] | type[BreakerClosed],
        state: LoopState,
        found: Trip | None = None,
        *,
        reason: str | None = None,
    ) -> BreakerOpened | BreakerHalfOpen | BreakerClosed:
        circuit = state.circuit
        evidence = {"condition": found.condition, **found.evidence} if found else None
        return kind(
            run_id=self.plan.run_id,
            reason=reason if reason is not None else (circuit.reason or ""),
            cooldown=circuit.cooldown,
            opens=circuit.opens,
            escalated=circuit.escalated,
            evidence=evidence,
        )

    def _summary(self, ending: Ending, iterations: int, state: LoopState) -> RunSummary:
        return RunSummary(
            reason=ending.reason,
            iterations=iterations,
            gate=ending.gate,
            detail=ending.detail,
            last=self.last,
            spend=state.spend,
            refused=state.refused,
        )

    def _show_state(self, state: LoopState) -> None:
        """Show what earlier runs left: circuit, trips, spend and verify."""
        progress = self.progress
        circuit = state.circuit
        if self.rules.supervised:
            progress.iteration = circuit.iterations_used
        progress.circuit = circuit.state
        progress.trips = circuit.opens
        progress.tokens, progress.cost_usd = state.spend.tokens, state.spend.cost_usd
        verify = state.verify
        if verify.last_verdict is not None:
            threshold = self.policy.verify.max_failures
            progress.verify = verify_cell(
                verify.last_verdict, verify.consecutive_failures, threshold
            )

    def _show_iteration(
        self,
        outcome: IterationOutcome,
        record: IterationRecord,
        state: LoopState,
        verdict: Verdict,
    ) -> None:
        progress = self.progress
        # The alerts this iteration raised (told to [notify] as they happen) and those holding.
        progress.raised = [(alert.name, alert.detail) for alert in verdict.raised]
        if self.rules.supervised and verdict.judged:
            progress.alerts = [name for name, _ in state.alerts]
        if verdict.opened:
            self._show_recovery(state)
        progress.tokens, progress.cost_usd = state.spend.tokens, state.spend.cost_usd
        progress.cost_estimated = state.spend.cost_estimated
        progress.circuit = state.circuit.state
        progress.trips = state.circuit.opens
        if record.verify is not None:
            threshold = self.policy.verify.max_failures
            streak = state.verify.consecutive_failures
            progress.verify = verify_cell(record.verify, streak, threshold)
        if verdict.assessment is not None:
            progress.score = verdict.assessment.score
            progress.risk = state.risk or verdict.assessment.risk
        if self.on_iteration is not None:
            self.on_iteration(outcome, record)
        if not verdict.judged:
            self._say("iteration", f"{record.iteration}: provider limit (not counted)")
        else:
            ending = record.failure or ("done" if record.done else "exit 0")
            checked = f", verify {record.verify}" if record.verify else ""
            self._say(
                "iteration",
                f"{counted_label(record.iteration, state.refused, self.rules.max_iterations)}: "
                f"{ending}{checked}",
            )
        if verdict.opened:
            opened = BreakerOpened(run_id=self.plan.run_id, reason=state.circuit.reason or "")
            self._show_transition(opened, state)
        elif verdict.closed:
            closed = BreakerClosed(run_id=self.plan.run_id, reason="the probe made progress")
            self._show_transition(closed, state)

    def _show_recovery(self, state: LoopState) -> None:
        """The recovery strategy an opening hands out (none once escalated)."""
        strategy = in_force(state.circuit, self.policy) if self.rules.supervised else None
        if strategy is not None:
            self.progress.recovery = "" if state.circuit.escalated else strategy.describe()

    def _show_transition(
        self, event: BreakerOpened | BreakerHalfOpen | BreakerClosed, state: LoopState
    ) -> None:
        circuit = state.circuit
        self.progress.circuit = circuit.state
        self.progress.trips = circuit.opens
        if isinstance(event, BreakerOpened) and circuit.escalated:
            text = f"circuit OPEN for good — {event.reason}; escalate to a human"
        elif isinstance(event, BreakerOpened):
            text = f"circuit OPEN — {event.reason}; cooling down {circuit.cooldown:g}s"
        elif isinstance(event, BreakerHalfOpen):
            text = "circuit HALF-OPEN — cooldown over; one probe iteration"
        else:
            text = f"circuit CLOSED — {event.reason}"
        self._say(event.kind, text)

    def _say(self, kind: str, text: str) -> None:
        self.progress.last_event = text
        if self.on_event is not None:
            self.on_event(kind, self.plan.paths.name, text)


def _calls_left(limiter: RateLimiter | None) -> CallsLeft | None:
    if limiter is None:
        return None
    stats = limiter.statistics()
    return CallsLeft(remaining=stats.remaining, calls=stats.calls)


def _inspect(
    plan: LoopPlan, store: Store, number: int, check: IntegrityCheck, label: str
) -> IntegrityReport:
    report = check.inspect(label)
    if report.harmed:
        violation = ProtectViolation(
            run_id=plan.run_id, iteration=number, harmed=report.as_record()
        )
        store.append(violation)
    return report


@trio.lowlevel.enable_ki_protection
def _repair_while_unwinding(
    plan: LoopPlan, store: Store, number: int, check: IntegrityCheck, label: str
) -> None:
    # Protected from a second Ctrl-C: a restore cut in half would leave the
    # harm in place and the next run would take it as its starting point.
    _inspect(plan, store, number, check, label)


async def _in_thread(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run a blocking call (locks, fsyncs, git, the scan) off the event loop."""
    return await trio.to_thread.run_sync(partial(function, *args, **kwargs))


def counted_label(number: int, refused: int, max_iterations: int) -> str:
    """``3/5``, or with refused calls before it (which use no iteration) ``3 (2/5 counted)``."""
    if not refused:
        return f"{number}/{max_iterations}"
    return f"{number} ({number - refused}/{max_iterations} counted)"
