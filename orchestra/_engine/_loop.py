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
import math
import os
import shutil
import stat
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import attrs
import trio

from .._circuit import HALF_OPEN, OPEN
from .._durations import format_duration
from .._errors import StateError
from .._executor import (
    Executor,
    IterationContext,
    IterationOutcome,
    ProtectedPaths,
    run_iteration,
    state_paths,
)
from .._hook_passing import LOOP_VERIFY
from .._inside import REFUSED_EVENT
from .._monitor import CallsLeft
from .._policy import Policy, policy_as_dict, verify_digest
from .._protect import IntegrityCheck, IntegrityReport, integrity_check
from .._ratelimit import RateLimiter
from .._redact import Redact
from .._sandbox import (
    BUBBLEWRAP,
    INBOX_ENV,
    SANDBOX_ENV,
    SandboxChoice,
    apply_requests,
    choose_sandbox,
    empty_inbox,
    read_refusals,
    run_inbox,
)
from .._secscan import project_scanner
from .._stagnation import Snapshot, WorkspaceProbe, tasks_all_ticked
from .._state import (
    FORGE_WRITES,
    GUIDANCE_DELIVERED,
    QUESTION_WAITED,
    STATE_DIR,
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    ChangePaths,
    Guidance,
    IterationStarted,
    LoopControls,
    OtherEvent,
    ProtectViolation,
    RunStarted,
    RunStopped,
    live_loop,
    utc_iso,
)
from .._treestatus import TreeStatus, read_status, work_tree_prefix
from .._verify import read_breaker, run_verify
from .._workspace import tree_state, tree_state_from
from ._course import (
    Start,
    counted_iterations,
    counted_label,
    in_force_for,
    kept_ending,
    may_run,
    moves_circuit,
    start,
)
from ._decide import (
    LoopRules,
    LoopState,
    Pause,
    Verdict,
    admit,
    cooled_down,
    exhausted,
)
from ._decision import (
    CircuitEvent,
    Decision,
    circuit_event,
    decided,
    recovery_events,
    started_event,
)
from ._endings import GATE_ERROR, INTERRUPTED, Ending, RunSummary, new_run_id
from ._gates import STATE_GATE, GateReading, SecscanGate
from ._hold import CONTROL_LOOK, PersonHold
from ._progress import LoopProgress, verify_cell
from ._record import IterationRecord, iteration_record
from ._recovery import (
    Strategy,
    steering_text,
    with_brief,
    with_question,
    with_steering,
    with_strategy,
)
from ._session import Resume, Session, carried, resumable
from ._store import ChangeStore, Store
from ._watch import IterationWatch

_T = TypeVar("_T")

# How often a loop waiting for an answer looks for a person's guidance (trio seconds).
_ANSWER_LOOK = 2.0

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
    # The sandbox the executor runs in, or why there is none (None: not chosen yet).
    sandbox: SandboxChoice | None = None
    # What this run is for beyond the prompt (``forge land --rework``: the conflict
    # to resolve), appended to every iteration's prompt and given as FORGE_BRIEF.
    brief: str = ""

    def context(
        self,
        number: int,
        strategy: Strategy | None = None,
        question: str | None = None,
        guidance: tuple[Guidance, ...] = (),
    ) -> IterationContext:
        run_dir = self.paths.runs / self.run_id
        return IterationContext(
            change=self.paths.name,
            number=number,
            max_iterations=self.max_iterations,
            workdir=self.workdir,
            state_dir=self.paths.folder,
            report_path=run_dir / f"iteration-{number}.report.json",
            log_path=run_dir / f"iteration-{number}.log",
            prompt=with_steering(
                with_question(
                    with_strategy(with_brief(self.prompt, self.brief), strategy),
                    question,
                    answered=bool(guidance),
                ),
                guidance,
            ),
            extra_env=(
                *(strategy.environment() if strategy is not None else ()),
                *((("FORGE_QUESTION", question),) if question else ()),
                *((("FORGE_BRIEF", self.brief),) if self.brief else ()),
                *((("FORGE_GUIDANCE", steering_text(guidance)),) if guidance else ()),
            ),
        )

    def describe_executor(self) -> str:
        return self.executor.describe(self.context(1).placeholders())

    def describe_sandbox(self, policy: Policy) -> str:
        """The protection in force, for the plan: the sandbox and what it mounts, or why none."""
        choice = self.sandbox
        if choice is None:
            choice = choose_sandbox(
                policy,
                root=self.paths.root,
                workdir=self.workdir,
                state_folder=self.paths.folder,
            )
        return choice.describe()


@attrs.frozen
class LoopSettings:
    """What a loop shares with its supervisor and knows of its own policy.

    Attributes:
        policy: The loop's effective policy.
        rules: How it treats a trip (see :class:`LoopRules`).
        secscan: The secret-scan gate (its scanner, or none).
        limiter: The shared rate limiter every executor start takes a permit from.
        wall_clock: Wall-clock epoch seconds (persisted times, provider resets).
        began: When the run began, on ``wall_clock`` (None: as :func:`run_loop`
            starts it): a person's stop asked earlier was meant for an earlier
            run. A fleet's loop passes 0: its server keeps no earlier run's stop.
    """

    policy: Policy
    rules: LoopRules
    secscan: SecscanGate = attrs.field(factory=SecscanGate)
    limiter: RateLimiter | None = None
    wall_clock: Callable[[], float] = time.time
    began: float | None = None


def iteration_time_limit(executor: Executor, policy: Policy, *, flag_set: bool = False) -> float:
    """An iteration's limit: a flag wins, then the executor definition's own, then the policy's."""
    if executor.spec.timeout is not None and not flag_set:
        return executor.spec.timeout.seconds
    return policy.run.timeout.seconds


def guarded(
    plan: LoopPlan,
    policy: Policy,
    rules: LoopRules,
    *,
    limiter: RateLimiter | None,
    wall_clock: Callable[[], float] = time.time,
) -> tuple[LoopPlan, LoopSettings]:
    """A loop as every command runs it: its plan guarded, its settings with the secret scan.

    The plan gains the integrity check of its working tree and of every
    change's state, the sandbox ``[sandbox]`` asks for, the redaction of the
    secrets the project's scan knows, and an executor told the protected paths
    (when its CLI's permission system can take them); the settings carry the
    scan's gate and the shared limiter.

    Raises:
        ConfigError: ``[sandbox] mode = "bubblewrap"`` where bubblewrap does not work.
    """
    paths = plan.paths
    scanner = project_scanner(policy.secscan, root=paths.root, workdir=plan.workdir)
    integrity = integrity_check(
        policy, workdir=plan.workdir, root=paths.root, state_folder=paths.folder
    )
    sandbox = choose_sandbox(
        policy,
        root=paths.root,
        workdir=plan.workdir,
        state_folder=paths.folder,
    )
    # The CLI's own permission system is told the protected paths too (for the
    # shipped definitions that can take them), so it refuses before trying.
    protected = ProtectedPaths(
        workdir=plan.workdir,
        frozen=policy.protect.frozen,
        state=state_paths(paths.root / STATE_DIR, plan.workdir),
    )
    plan = attrs.evolve(
        plan,
        executor=plan.executor.protecting(protected),
        integrity=integrity,
        redact=scanner.redact if scanner is not None else None,
        sandbox=sandbox,
    )
    secscan = SecscanGate(scanner, paths.secscan_markers)
    return plan, LoopSettings(policy, rules, secscan, limiter, wall_clock)


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
        store = ChangeStore(plan.paths, owns_circuit=moves_circuit(settings.rules))
    if settings.began is None:
        # Before the loop says it runs: a stop asked once it does is for this run.
        # To the millisecond a request's time is written with, rounded down.
        settings = attrs.evolve(settings, began=math.floor(settings.wall_clock() * 1000) / 1000)
    loop = _Loop(plan, settings, store, progress, on_event, on_iteration)
    with contextlib.ExitStack() as live:
        # Held while the loop runs: how forge pause and forge stop know it does.
        await _in_thread(live.enter_context, live_loop(plan.paths))
        return await _run_to_its_end(loop, plan, settings, store, progress)


async def _run_to_its_end(
    loop: _Loop, plan: LoopPlan, settings: LoopSettings, store: Store, progress: LoopProgress
) -> RunSummary:
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
        done = counted_iterations(
            settings.rules, started=progress.iteration, completed=progress.completed
        )
        with contextlib.suppress(StateError, OSError):
            store.stop(RunStopped(run_id=plan.run_id, reason=INTERRUPTED, iterations=done))
        progress.finish(INTERRUPTED)
        raise
    finished = kept_ending(settings.rules, summary.reason)
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


@attrs.frozen
class _Sight:
    """How the loop reads the working tree, fixed when it starts.

    ``probe`` measures what each iteration changed (when the loop measures);
    otherwise ``prefix`` (the working tree within its repository, if it is
    one) is what a git status reads for the secret scan.
    """

    probe: WorkspaceProbe | None = None
    prefix: str | None = None


@attrs.frozen
class _Tree:
    """The working tree as last read: one git status serves the measurement
    after an iteration, the next iteration's "before" and the secret scan."""

    status: TreeStatus | None = None
    before: Snapshot | None = None
    # Every task of the tasks files is ticked (a done signal too), as last read.
    tasks_done: bool = False


@attrs.frozen
class _Between:
    """What one iteration hands the next."""

    state: LoopState
    secscan: GateReading
    tree: _Tree
    # The question the last iteration ended on, if it asked instead of acting.
    question: str | None = None
    # The agent session the last iteration ran in (continued when the executor can).
    session: Session | None = None
    last: IterationOutcome | None = None
    # A person's pause or stop, as read after the last iteration (None: read it
    # again, the loop has waited since).
    controls: LoopControls | None = None


@attrs.frozen
class _Run:
    """What a run fixed as it started: where it counts from, how it sees the tree, its watch."""

    start: Start
    sight: _Sight
    # The status log and the lessons file: what a person watching reads.
    watch: IterationWatch
    # A person's pause and stop, as this run obeys them.
    hold: PersonHold


@attrs.frozen
class _Ran:
    """The executor's part of an iteration, as measured right after it."""

    outcome: IterationOutcome
    integrity: IntegrityReport | None
    after: Snapshot | None
    tree: _Tree
    hook_attempts: int
    # The verdict the executor's Stop hook recorded on this tree, if it stands
    # (read in the same thread hop as the tree: see _Loop._hook_verdict).
    hook_verdict: str | None
    # The session it continued (None: a fresh one), and when it began (wall clock).
    resumed: str | None = None
    began: float = 0.0


@attrs.frozen
class _Concluded:
    """An iteration committed: its record as written, the decision, and the tree after it."""

    record: IterationRecord
    decision: Decision
    tree: _Tree
    secscan: GateReading
    controls: LoopControls


@attrs.frozen
class _Loop:
    plan: LoopPlan
    settings: LoopSettings
    store: Store
    progress: LoopProgress
    on_event: EventSink | None
    on_iteration: IterationCallback | None

    @property
    def policy(self) -> Policy:
        return self.settings.policy

    async def run(self) -> RunSummary:
        rules = self.settings.rules
        began = self.settings.began if self.settings.began is not None else 0.0
        state = await _in_thread(self.store.load)
        begun = start(state, rules)
        sight, tree = await _in_thread(self._look_at_the_tree, begun.measures)
        secscan = await _in_thread(self.settings.secscan.check, tree.status)
        await _in_thread(self.store.append, self._started(state, secscan))
        self._show_state(state, begun)
        if begun.ending is not None:
            self._say("loop", "already done in an earlier run; nothing to do")
            return self._summary(begun.ending, begun.used, _Between(state, secscan, tree))
        watch = IterationWatch(
            self.plan.paths,
            self.plan.workdir,
            self.policy,
            active=begun.keeps_status,
            progress=self.progress,
            redact=self.plan.redact,
        )
        hold = PersonHold(
            self.store, self.progress, self._say, self.plan.run_id, self.plan.paths.name, began
        )
        run = _Run(begun, sight, watch, hold)
        between = _Between(state, secscan, tree)
        number = begun.used
        while may_run(between.state, number + 1, rules):
            number += 1
            between, ending = await self._before_iteration(between, number, run)
            if ending is not None:
                return self._summary(ending, number - 1, between)
            between, verdict = await self._iterate(between, number, run)
            if verdict.pause is not None:
                await self._pause(verdict.pause)
            if verdict.ending is not None:
                return self._summary(verdict.ending, number, between)
            if between.question and self.policy.run.on_question == "wait":
                between = attrs.evolve(between, controls=None)
                ending = await run.hold.unless_stopped(partial(self._await_answer, number))
                if ending is not None:
                    return self._summary(ending, number, between)
        # Nothing left to run: an earlier run used every iteration.
        most = self.plan.max_iterations
        return self._summary(exhausted(most), most, between)

    # -- before an iteration -------------------------------------------------

    async def _before_iteration(
        self, between: _Between, number: int, run: _Run
    ) -> tuple[_Between, Ending | None]:
        """Admit iteration ``number`` (a cooldown sat out), hold it while paused, take a permit.

        A person's stop ends the run at any of these waits; after a pause the
        loop is admitted afresh (a person may have reset its circuit meanwhile).
        """
        while True:
            between, ending = await self._admit(between, run)
            if ending is not None:
                return between, ending
            between, ending, held = await self._hold(between, number, run)
            if ending is not None:
                return between, ending
            if not held:
                break
        limiter = self.settings.limiter
        if limiter is None:
            return between, None
        self.progress.status = "waiting for a permit"
        asked = trio.current_time()
        ending = await run.hold.unless_stopped(partial(limiter.acquire, self.plan.paths.name))
        if ending is not None or trio.current_time() - asked < CONTROL_LOOK:
            return between, ending
        # The permit took its time: a pause given meanwhile holds the loop now,
        # its permit spent (an agent started against a person's pause is worse).
        # A permit at once (the usual case) costs no second look.
        between, ending, _held = await self._hold(attrs.evolve(between, controls=None), number, run)
        return between, ending

    async def _hold(
        self, between: _Between, number: int, run: _Run
    ) -> tuple[_Between, Ending | None, bool]:
        """A person's stop ends the run here; a pause holds it until resumed (or stopped).

        Returns the state after it, the ending (stopped), and whether the loop
        held (then its state is read afresh).
        """
        controls = between.controls
        if controls is None:
            controls = await run.hold.controls()
        ending, held = await run.hold.hold(controls, number)
        if ending is not None or not held:
            return attrs.evolve(between, controls=controls), ending, False
        state = await _in_thread(self.store.refresh)
        return attrs.evolve(between, state=state, controls=None), None, True

    async def _admit(self, between: _Between, run: _Run) -> tuple[_Between, Ending | None]:
        run_id, rules = self.plan.run_id, self.settings.rules
        state = between.state
        while True:
            state, admission = admit(
                state,
                self.policy,
                rules,
                now=self.settings.wall_clock(),
                secscan=between.secscan,
            )
            if admission.opened is not None:
                event = circuit_event(BreakerOpened, state, run_id, admission.opened)
                extra = recovery_events(state, self.policy, rules, run_id, None)
                state = await _in_thread(self.store.save_circuit, state.circuit, event, *extra)
                self._show_recovery(state)
                self._show_transition(event, state)
            if admission.ending is not None or admission.wait is None:
                return attrs.evolve(between, state=state), admission.ending
            # Read again after the wait: a person may pause the loop meanwhile.
            between = attrs.evolve(between, state=state, controls=None)
            stopped = await run.hold.unless_stopped(partial(self._cool_down, admission.wait))
            if stopped is not None:
                return between, stopped
            # A person may have reset the circuit (or a breaker) meanwhile: look
            # again before moving it, and admit afresh when it is no longer open.
            state = await _in_thread(self.store.refresh)
            if state.circuit.state != OPEN:
                continue
            state = cooled_down(state)
            event = circuit_event(BreakerHalfOpen, state, run_id, reason="the cooldown has elapsed")
            state = await _in_thread(self.store.save_circuit, state.circuit, event)
            self._show_transition(event, state)

    async def _await_answer(self, number: int) -> None:
        """After a question: wait (``[run] question_wait`` at most) for a person's guidance.

        The wait runs on trio's clock and holds no permit; the guidance is
        looked for every few seconds. Answered or not, the loop goes on: the
        next iteration gets the answer, or is told to decide.
        """
        progress, wait = self.progress, self.policy.run.question_wait.seconds
        began = trio.current_time()
        progress.status = "waiting for an answer"
        progress.answer_until = began + wait
        self._say(
            "loop",
            f"iteration {number} asked a question: waiting up to {format_duration(wait)} for "
            f'an answer (forge steer {self.plan.paths.name} "…")',
        )
        answered = False
        while not (answered := await _in_thread(self._answered)):
            left = progress.answer_until - trio.current_time()
            if left <= 0:
                break
            await trio.sleep(min(_ANSWER_LOOK, left))
        progress.answer_until = None
        waited = round(trio.current_time() - began, 3)
        fields = {"run_id": self.plan.run_id, "iteration": number, "answered": answered}
        event = OtherEvent(name=QUESTION_WAITED, fields={**fields, "waited": waited})
        await _in_thread(self.store.append, event)
        if not answered:
            self._say("loop", "no answer: the next iteration decides")

    def _answered(self) -> bool:
        """Whether guidance waits for the next iteration (a person answered)."""
        return self.store.guidance_waiting()

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

    async def _iterate(self, between: _Between, number: int, run: _Run) -> tuple[_Between, Verdict]:
        """One iteration, in three hops off the event loop around the executor and verify.

        Before the executor (record the start, arm the check), after it (inspect,
        the tree, the Stop hook's verdict) and after the verify (measure, scan,
        commit, render); the limiter's permit and the verify's coverage, when
        there are specs to read, take one more each.
        """
        ran = await self._run_executor(between, number, run.sight)
        outcome = ran.outcome
        record = iteration_record(
            self.plan.run_id,
            outcome,
            log=str(outcome.log_path.relative_to(self.plan.paths.folder)),
            templated=self.plan.executor.templated,
            integrity=ran.integrity,
        )
        finished = record.done or record.failed or record.cannot_start or record.provider_refused
        if ran.tree.tasks_done and not finished:
            # Every task ticked is a done signal, under the same verification.
            record = attrs.evolve(record, done=True)
        judged = not (record.provider_refused and not record.is_harmful)
        measured = judged and not record.cannot_start
        begun = run.start
        verify = begun.verifies or (begun.verifies_done and record.done and not record.failed)
        record = await self._verified(record, ran, measured and verify)
        if record.verify is not None and not begun.verifies:
            # Read at done by a loop whose gates are read-only: no breaker counts it.
            record = attrs.evolve(record, verify_read_only=True)
        # The rate window's calls left after this iteration's permit: the
        # calls-remaining alert judges them, and the record keeps them for a replay.
        record = attrs.evolve(record, calls=_calls_left(self.settings.limiter))
        # The clock is read here, on the event loop (a test's clock lives there).
        # One reading of the loop's wall clock (a fleet's is its server's) for
        # both the decision and the times it persists.
        now = self.settings.wall_clock()
        concluded = await _in_thread(self._conclude, record, ran, measured, between.state, run, now)
        self.progress.completed += 1
        decision = concluded.decision
        self._show_iteration(outcome, concluded.record, decision.after, decision.verdict)
        after = _Between(
            state=decision.after,
            secscan=concluded.secscan,
            tree=concluded.tree,
            session=carried(
                between.session,
                outcome.observation.session_id,
                resumed=ran.resumed,
                began=ran.began,
            ),
            last=outcome,
            question=concluded.record.question,
            controls=concluded.controls,
        )
        return after, decision.verdict

    async def _run_executor(self, between: _Between, number: int, sight: _Sight) -> _Ran:
        """Take a permit; run the executor between arming the integrity check and inspecting."""
        state = between.state
        probing = state.circuit.state == HALF_OPEN
        # A fresh session after the circuit opened: a recovery wants a fresh look.
        previous = None if probing or state.circuit.state == OPEN else between.session
        self.progress.status = "probing" if probing else "running"
        self.progress.iteration = number
        label = f"{self.plan.run_id}-{number}"
        hook_attempts, wrapper, guidance = await _in_thread(self._before_executor, number)
        if guidance:
            self._say("loop", f"iteration {number} given {len(guidance)} piece(s) of guidance")
        strategy = in_force_for(state, self.policy, self.settings.rules)
        self.progress.recovery = strategy.describe() if strategy is not None else ""
        context = self.plan.context(number, strategy, between.question, guidance)
        context = self._sandboxed(context, wrapper)
        if self.plan.executor.verifies_at_stop:
            context = attrs.evolve(context, extra_env=(*context.extra_env, self._loop_verify()))
        began = self.settings.wall_clock()
        resume = self._resume(previous, began)
        try:
            outcome = await run_iteration(
                self.plan.executor,
                context,
                time_limit=self.plan.time_limit,
                grace=self.plan.grace,
                done_marker=self.plan.done_marker,
                redact=self.plan.redact,
                session=resume.session,
                # A provider's "resets in N": N from the loop's clock (the server's in a fleet).
                wall_clock=self.settings.wall_clock,
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
        integrity, after, tree, by_hook = await _in_thread(
            self._after_executor, number, label, sight, between.tree, hook_attempts
        )
        return _Ran(outcome, integrity, after, tree, hook_attempts, by_hook, resume.session, began)

    def _resume(self, session: Session | None, now: float) -> Resume:
        """The session this iteration continues, if its executor continues sessions."""
        if not self.plan.executor.continues_sessions:
            return Resume()
        resume = resumable(session, now=now, max_age=self.policy.run.session_max_age.seconds)
        if resume.note is not None:
            self._say("session", resume.note)
        return resume

    async def _verified(self, record: IterationRecord, ran: _Ran, verify: bool) -> IterationRecord:
        """The record with the iteration's verdict: the Stop hook's that stands, or the loop's."""
        if not verify or record.is_harmful:
            # After harm to a protected path the loop stops: verifying the
            # restored tree would only add a verdict nobody asked for.
            return attrs.evolve(record, verify=None, verify_report=None, tree=None)
        by_hook = ran.hook_verdict
        if ran.tree.status is None:
            by_hook = await _in_thread(self._hook_verdict, ran.hook_attempts, None)
        if by_hook is not None:
            # The agent's Stop hook verified this very tree and counted it: one
            # verify per iteration, the hook's.
            return attrs.evolve(record, verify=by_hook, verify_by_hook=True)
        self.progress.status = "verifying"
        status = ran.tree.status
        if status is not None:
            tree = tree_state_from(status)
        else:
            tree = await _in_thread(tree_state, self.plan.workdir)
        report = await run_verify(
            self.plan.workdir, self.policy.verify, self.plan.grace, self.plan.redact
        )
        return attrs.evolve(record, verify=report.verdict, verify_report=report, tree=tree)

    # -- blocking steps, each run in one worker thread ------------------------

    def _before_executor(self, number: int) -> tuple[int, tuple[str, ...], tuple[Guidance, ...]]:
        """Record the start (counted as used: a rerun goes on after it) and arm the check.

        Returns the breaker's attempts before the iteration (see :meth:`_hook_verdict`),
        the sandbox's ``bwrap ... --`` (empty without one), its mounts
        found as the protected paths stand now, its inbox emptied, and the
        person's guidance the iteration is given (recorded as delivered).
        """
        self.store.begin(IterationStarted(run_id=self.plan.run_id, iteration=number))
        guidance = self._take_guidance(number)
        attempts = 0
        if self.plan.executor.verifies_at_stop:
            attempts = read_breaker(self.plan.paths).after.total_attempts
        if self.plan.integrity is not None:
            self.plan.integrity.arm()
        sandbox = self.plan.sandbox.sandbox if self.plan.sandbox is not None else None
        if sandbox is None:
            # Unsandboxed, the agent's requests go to the inbox as well: none left
            # from before this iteration is run after it.
            empty_inbox(self._inbox, create=False)
            return attempts, (), guidance
        empty_inbox(self._inbox)
        _, wrapper = sandbox.wrapper()
        return attempts, wrapper, guidance

    def _take_guidance(self, number: int) -> tuple[Guidance, ...]:
        """The guidance ``forge steer`` left for this iteration, recorded as delivered."""
        taken = self.store.take_guidance()
        if taken:
            redact = self.plan.redact
            texts = [redact(g.text) if redact is not None else g.text for g in taken]
            fields = {
                "run_id": self.plan.run_id,
                "iteration": number,
                "by": [given.by for given in taken],
                "texts": texts,
            }
            self.store.append(OtherEvent(name=GUIDANCE_DELIVERED, fields=fields))
        return taken

    @property
    def _inbox(self) -> Path:
        """This run's own folder of the change's inbox (another run of it has its own)."""
        return run_inbox(self.plan.paths.folder, self.plan.run_id)

    def _apply_inbox(self, inbox: Path, number: int, verified: bool) -> None:
        """Run what the agent asked of Forge's state from its iteration, then empty the inbox.

        After the check and the iteration's commit: a request writes Forge's
        state, which is no harm. What each request did goes to the iteration's
        log. ``verified``: the loop recorded a verify of the tree itself, so
        the agent's queued verify is not run again (the breaker counts one).
        """
        refused = [
            OtherEvent(name=REFUSED_EVENT, fields={**fields, "recorded": "from the inbox"})
            for fields in read_refusals(inbox)
        ]
        if refused:
            # A person's control the agent tried inside the sandbox, which keeps
            # the timeline out of its reach: recorded now, by the loop.
            self.store.append(*refused)
        env = {k: v for k, v in os.environ.items() if k not in (SANDBOX_ENV, INBOX_ENV)}
        lines = apply_requests(
            inbox,
            change=self.plan.paths.name,
            workdir=self.plan.workdir,
            env=env,
            redact=self.plan.redact,
            verified=verified,
            verify_seconds=self.policy.verify.timeout.seconds,
        )
        # Its report is read: nothing left there outlives the iteration.
        empty_inbox(inbox, create=False)
        with contextlib.suppress(OSError):
            inbox.rmdir()
        if lines:
            log = self.plan.context(number).log_path
            with open(log, "a", encoding="utf-8") as handle:
                handle.writelines(f"forge: from the inbox: {line}\n" for line in lines)

    def _sandboxed(self, context: IterationContext, wrapper: tuple[str, ...]) -> IterationContext:
        """The context inside the sandbox: its report goes to the inbox, the one place it may."""
        sandbox = self.plan.sandbox.sandbox if self.plan.sandbox is not None else None
        inbox = (INBOX_ENV, str(self._inbox))
        if sandbox is None or not wrapper:
            # The agent's forge checkpoint and forge event queue their requests there too.
            return attrs.evolve(context, extra_env=(*context.extra_env, inbox))
        return attrs.evolve(
            context,
            wrapper=wrapper,
            report_path=self._inbox / "report.json",
            extra_env=(*context.extra_env, (SANDBOX_ENV, BUBBLEWRAP), inbox),
        )

    def _loop_verify(self) -> tuple[str, str]:
        """The loop's ``[verify]``, for the Stop hook whose verdict is the iteration's."""
        table = policy_as_dict(self.policy)["verify"]
        return LOOP_VERIFY, json.dumps({k: v for k, v in table.items() if v is not None})

    def _hook_verdict(self, hook_attempts: int, status: TreeStatus | None) -> str | None:
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
        if breaker.total_attempts <= hook_attempts or breaker.last_verdict is None:
            return None
        if breaker.last_checks != verify_digest(self.policy):
            return None
        tree = tree_state_from(status) if status is not None else tree_state(self.plan.workdir)
        if tree.fingerprint is None or breaker.last_tree != tree.fingerprint:
            return None
        return breaker.last_verdict

    def _after_executor(
        self, number: int, label: str, sight: _Sight, tree: _Tree, hook_attempts: int
    ) -> tuple[IntegrityReport | None, Snapshot | None, _Tree, str | None]:
        """Restore and record any harm, read the tree once, and the Stop hook's verdict on it."""
        check = self.plan.integrity
        report = _inspect(self.plan, self.store, number, check, label) if check else None
        ticked = tasks_all_ticked(self.plan.workdir, self.policy.stagnation.tasks_files)
        tree = attrs.evolve(tree, tasks_done=ticked)
        after = None
        if sight.probe is not None:
            # The agent's work is what changed before the verify ran: files the
            # verify writes (reports, caches) are not the agent's progress.
            after = sight.probe.take()
            tree = attrs.evolve(tree, status=after.status)
        elif sight.prefix is not None:
            tree = attrs.evolve(tree, status=read_status(self.plan.workdir, sight.prefix))
        # Read now, with the tree: nothing runs between the executor's end and
        # the verify, and a hop of its own would cost a thread hand-off. Not
        # after harm (nothing is verified then), nor outside git (where the
        # tree's state takes git commands: read only when a verify follows).
        by_hook = None
        if tree.status is not None and not (report and report.harmed):
            by_hook = self._hook_verdict(hook_attempts, tree.status)
        return report, after, tree, by_hook

    def _conclude(
        self,
        record: IterationRecord,
        ran: _Ran,
        measured: bool,
        ran_in: LoopState,
        run: _Run,
        now: float,
    ) -> _Concluded:
        """Measure, scan, judge and commit the iteration, then render what a person reads."""
        probe, tree = run.sight.probe, ran.tree
        before, fresh = tree.before, ran.after
        if measured and probe is not None and before is not None and fresh is not None:
            report = record.verify_report
            signals = probe.measure(before, ran.outcome, report, after=fresh)
            record = attrs.evolve(record, signals=signals)
            if report is not None:
                # The next "before" is the tree after the verify: the files it
                # writes (reports, caches) are not the next iteration's work.
                fresh = probe.take()
                tree = attrs.evolve(tree, status=fresh.status)
        if probe is not None and fresh is not None:
            tree = attrs.evolve(tree, before=probe.mark_seen(fresh))
        secscan = self.settings.secscan.check(tree.status)
        record = attrs.evolve(record, secscan=secscan)
        now_iso = utc_iso(now)
        decision = self._commit(record, now, now_iso)
        # After the check and the loop's own verify: a checkpoint the agent
        # asked for (ship-ready, verify-failed) is judged on the verdict of the
        # tree its iteration ended with.
        # The loop's own recorded verify of this tree stands for the agent's.
        counted = record.verify is not None and not record.verify_read_only
        self._apply_inbox(self._inbox, ran.outcome.number, counted)
        # After the commit, outside the change's lock: the status log and the
        # lessons file are renderings of what was committed, not part of it.
        run.watch.render(record, ran_in, decision.after, decision.verdict, now_iso)
        # Read in this hop, not one of its own: the next iteration's pause or stop.
        return _Concluded(record, decision, tree, secscan, self.store.controls())

    def _commit(self, record: IterationRecord, now: float, now_iso: str) -> Decision:
        """Decide on the state as it stands and commit it; decide again if it moved meanwhile."""
        while True:
            decision = decided(
                self.store.current(),
                record,
                self.policy,
                self.settings.rules,
                run_id=self.plan.run_id,
                now=now,
                now_iso=now_iso,
            )
            if self.store.commit(record, decision):
                return decision

    async def _pause(self, pause: Pause) -> None:
        """A provider limit: wait for its reset (every loop on the limiter waits too)."""
        limiter = self.settings.limiter
        reason = f"provider limit reported by {self.plan.paths.name}"
        if pause.shared:
            seconds = max(pause.until - self.settings.wall_clock(), 0.0)
            self._say("limit", f"provider limit — no executor starts for {seconds:.0f}s")
        if limiter is not None:
            await limiter.pause_until(pause.until, reason)
        if not pause.shared or limiter is None:
            # forge run waits here itself (bounded by [run] max_limit_wait); a
            # supervised loop waits for its next permit instead.
            seconds = pause.until - self.settings.wall_clock()
            if seconds > 0:
                self.progress.status = "waiting for the provider's reset"
                self._say("limit", f"provider limit — waiting {seconds:.0f}s for its reset")
                await trio.sleep(seconds)

    # -- the working tree ----------------------------------------------------

    def _look_at_the_tree(self, measures: bool) -> tuple[_Sight, _Tree]:
        """Before the first iteration (blocking): where the tree is, and its state."""
        if measures:
            probe = WorkspaceProbe(
                self.plan.workdir, self.policy.stagnation, forge_files=self._forge_files()
            )
            before = probe.snapshot()
            return _Sight(probe=probe), _Tree(status=before.status, before=before)
        prefix = work_tree_prefix(self.plan.workdir)
        if prefix is None:
            return _Sight(), _Tree()
        return _Sight(prefix=prefix), _Tree(status=read_status(self.plan.workdir, prefix))

    def _forge_files(self) -> tuple[str, ...]:
        """Files Forge writes inside the working tree, relative to it.

        The lessons file (and its folder's journal of Forge's writes), and
        Forge's own output when it is redirected into the tree
        (``forge supervise > nightly.log``): none of it is the agent's work.
        """
        files = list(_own_output(self.plan.workdir))
        lessons = self.policy.recovery.lessons
        if lessons:
            inside = PurePosixPath(lessons)
            files += [inside.as_posix(), (inside.parent / FORGE_WRITES).as_posix()]
        return tuple(files)

    # -- records and words ---------------------------------------------------

    def _started(self, state: LoopState, secscan: GateReading) -> RunStarted:
        plan = self.plan
        described = {
            "max_iterations": plan.max_iterations,
            "executor": plan.describe_executor(),
            "timeout": plan.time_limit,
            "grace": plan.grace,
        }
        return started_event(
            plan.run_id, state, self.policy, self.settings.rules, plan=described, secscan=secscan
        )

    def _summary(self, ending: Ending, iterations: int, between: _Between) -> RunSummary:
        state = between.state
        # What an iteration cut short left in this run's inbox goes with the run.
        shutil.rmtree(self._inbox, ignore_errors=True)
        return RunSummary(
            reason=ending.reason,
            iterations=iterations,
            gate=ending.gate,
            detail=ending.detail,
            last=between.last,
            spend=state.spend,
            refused=state.refused,
        )

    def _show_state(self, state: LoopState, begun: Start) -> None:
        """Show what earlier runs left: circuit, trips, spend and verify."""
        progress = self.progress
        circuit = state.circuit
        progress.iteration = begun.used
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
        progress.question = record.question
        if verdict.holding is not None:
            progress.alerts = list(verdict.holding)
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
                f"{counted_label(record.iteration, state.refused, self.plan.max_iterations)}: "
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
        strategy = in_force_for(state, self.policy, self.settings.rules)
        if strategy is not None:
            self.progress.recovery = "" if state.circuit.escalated else strategy.describe()

    def _show_transition(self, event: CircuitEvent, state: LoopState) -> None:
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


def _own_output(workdir: Path) -> list[str]:
    """This process's stdout and stderr, where they are files inside ``workdir`` (relative)."""
    found = []
    root = workdir.resolve()
    for fd in (1, 2):
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            # Linux names an open file's path here; elsewhere the redirection goes unseen.
            path = Path(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
        if path.is_relative_to(root):
            found.append(path.relative_to(root).as_posix())
    return found


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
