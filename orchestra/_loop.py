"""One bounded loop: gates before the first iteration and after every one, then a stop reason.

This is ``forge run``'s engine. Only one ending is clean: the executor
signalled done. Every other ending (a gate open or unreadable, the iteration
cap reached, the executor failing, an interruption) stops the loop and asks a
human to review. Every step lands in the change's timeline.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from ._errors import ForgeError, StateError
from ._executor import Executor, IterationContext, IterationOutcome, run_iteration
from ._gates import Gate, GateReading, first_stop
from ._policy import Policy
from ._protect._check import INTEGRITY, IntegrityCheck, IntegrityReport, integrity_check
from ._redact import Redact
from ._spend import SpendTotals, add_spend
from ._state import ChangePaths, append_event, exclusive_lock

_T = TypeVar("_T")

DONE = "done"
GATE_OPEN = "gate-open"
GATE_ERROR = "gate-error"
EXHAUSTED = "iterations-exhausted"
EXECUTOR_FAILED = "executor-failed"
INTERRUPTED = "interrupted"
CIRCUIT_OPEN = "circuit-open"


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
    run_id: str = attrs.field(factory=lambda: new_run_id())
    integrity: IntegrityCheck | None = None
    # Secrets in executor output are redacted before anything keeps it.
    redact: Redact | None = None

    def context(self, number: int) -> IterationContext:
        run_dir = self.paths.runs / self.run_id
        return IterationContext(
            change=self.paths.name,
            number=number,
            max_iterations=self.max_iterations,
            workdir=self.workdir,
            state_dir=self.paths.folder,
            report_path=run_dir / f"iteration-{number}.report.json",
            log_path=run_dir / f"iteration-{number}.log",
            prompt=self.prompt,
        )

    def describe_executor(self) -> str:
        return self.executor.describe(self.context(1).placeholders())


@attrs.frozen
class RunSummary:
    """How a loop ended."""

    reason: str
    iterations: int
    gate: str | None = None
    detail: str | None = None
    last: IterationOutcome | None = None
    spend: SpendTotals | None = None

    @property
    def clean(self) -> bool:
        return self.reason == DONE


@attrs.define
class RunProgress:
    """What a running loop has done so far; read after an interruption."""

    iterations: int = 0
    spend: SpendTotals | None = None


IterationCallback = Callable[[IterationOutcome, Sequence[GateReading]], None]


def new_run_id() -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(2)}"


async def run_loop(
    plan: LoopPlan,
    gates: Sequence[Gate],
    *,
    progress: RunProgress | None = None,
    on_iteration: IterationCallback | None = None,
) -> RunSummary:
    """Run up to ``plan.max_iterations`` iterations, stopping at the first reason to."""
    progress = progress if progress is not None else RunProgress()
    readings = await check_gates(gates)
    record_event(
        plan.paths,
        "run.started",
        {
            "run_id": plan.run_id,
            "plan": {
                "max_iterations": plan.max_iterations,
                "executor": plan.describe_executor(),
                "timeout": plan.time_limit,
                "grace": plan.grace,
            },
            "gates": gate_states(readings),
        },
    )
    try:
        summary = await _iterate(plan, gates, readings, progress, on_iteration)
    except StateError as exc:
        # Spend or timeline state that cannot be written is a gate that cannot
        # be read: stop and escalate, never carry on as if it were recorded.
        summary = RunSummary(
            reason=GATE_ERROR,
            iterations=progress.iterations,
            gate="forge state",
            detail=exc.message,
        )
    except BaseException:
        # Cancelled or interrupted: the executor tree is already stopped by the
        # process runner; record the interruption, then let the exception go on.
        record_stop(plan, RunSummary(reason=INTERRUPTED, iterations=progress.iterations))
        raise
    record_stop(plan, summary)
    if plan.integrity is not None:
        await _in_thread(plan.integrity.finish)
    return summary


async def _iterate(
    plan: LoopPlan,
    gates: Sequence[Gate],
    readings: Sequence[GateReading],
    progress: RunProgress,
    on_iteration: IterationCallback | None,
) -> RunSummary:
    if (stop := first_stop(readings)) is not None:
        return gate_summary(stop, 0, None, None)
    last: IterationOutcome | None = None
    for number in range(1, plan.max_iterations + 1):
        await _in_thread(
            record_event,
            plan.paths,
            "iteration.started",
            {"run_id": plan.run_id, "iteration": number},
        )
        last, integrity = await guarded_iteration(plan, number)
        progress.iterations = number
        spent = await _in_thread(
            add_spend,
            plan.paths,
            tokens=last.tokens,
            tool_calls=last.tool_calls,
            cost_usd=last.cost_usd,
        )
        spend = spent.totals
        progress.spend = spend
        readings = await check_gates(gates)
        fields = iteration_event(plan, last, readings)
        fields["integrity"] = integrity.as_record() if integrity is not None else None
        await _in_thread(record_event, plan.paths, "iteration.finished", fields)
        if on_iteration is not None:
            on_iteration(last, readings)
        if integrity is not None and integrity.harmed:
            return RunSummary(
                reason=GATE_OPEN,
                iterations=number,
                gate=INTEGRITY,
                detail=integrity.detail(),
                last=last,
                spend=spend,
            )
        if last.failed:
            return RunSummary(
                reason=EXECUTOR_FAILED,
                iterations=number,
                detail=last.failure,
                last=last,
                spend=spend,
            )
        if (stop := first_stop(readings)) is not None:
            return gate_summary(stop, number, last, spend)
        if last.done:
            return RunSummary(reason=DONE, iterations=number, last=last, spend=spend)
    return RunSummary(
        reason=EXHAUSTED,
        iterations=plan.max_iterations,
        detail=(
            f"{plan.max_iterations} of {plan.max_iterations} iteration(s) used without the "
            "executor signalling done"
        ),
        last=last,
        spend=progress.spend,
    )


def loop_integrity(policy: Policy, plan: LoopPlan) -> IntegrityCheck:
    """The integrity check of a plan's working tree and of its change's own state."""
    paths = plan.paths
    return integrity_check(
        policy, workdir=plan.workdir, root=paths.root, change=paths.name, state_folder=paths.folder
    )


async def guarded_iteration(
    plan: LoopPlan, number: int
) -> tuple[IterationOutcome, IntegrityReport | None]:
    """Run one iteration between an integrity manifest and its check.

    Harmed protected paths are restored and recorded (``protect.violation``)
    before anything else happens, an interrupted iteration included.
    """
    iteration = partial(
        run_iteration,
        plan.executor,
        plan.context(number),
        time_limit=plan.time_limit,
        grace=plan.grace,
        done_marker=plan.done_marker,
        redact=plan.redact,
    )
    check = plan.integrity
    if check is None:
        return await iteration(), None
    await _in_thread(check.arm)
    label = f"{plan.run_id}-{number}"
    try:
        outcome = await iteration()
    except BaseException:
        # Interrupted: the executor tree is stopped; whatever it harmed is put
        # back before the interruption goes on (synchronously: we are unwinding).
        _repair_while_unwinding(plan, number, check, label)
        raise
    report = await _in_thread(check.inspect, label)
    await _in_thread(_record_integrity, plan, number, report)
    return outcome, report


@trio.lowlevel.enable_ki_protection
def _repair_while_unwinding(plan: LoopPlan, number: int, check: IntegrityCheck, label: str) -> None:
    # Protected from a second Ctrl-C: a restore cut in half would leave the
    # harm in place and the next run would take it as its starting point.
    _record_integrity(plan, number, check.inspect(label))


def _record_integrity(plan: LoopPlan, number: int, report: IntegrityReport) -> None:
    if report.harmed:
        record_event(
            plan.paths,
            "protect.violation",
            {"run_id": plan.run_id, "iteration": number, "harmed": report.as_record()},
        )


async def _in_thread(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Run a locking, fsyncing state write off the event loop (other loops keep going)."""
    return await trio.to_thread.run_sync(partial(function, *args, **kwargs))


async def check_gates(gates: Sequence[Gate]) -> list[GateReading]:
    # Gates read files under a lock: off the event loop, so other loops keep going.
    return await trio.to_thread.run_sync(lambda: [_check_one(gate) for gate in gates])


def _check_one(gate: Gate) -> GateReading:
    """A gate's reading; a check that fails is an unreadable gate, never a closed one."""
    try:
        return gate.check()
    except (ForgeError, OSError, ValueError) as exc:
        return GateReading(gate.name, open=True, error=True, detail=f"gate check failed: {exc}")


def gate_summary(
    stop: GateReading, iterations: int, last: IterationOutcome | None, spend: SpendTotals | None
) -> RunSummary:
    return RunSummary(
        reason=GATE_ERROR if stop.error else GATE_OPEN,
        iterations=iterations,
        gate=stop.gate,
        detail=stop.detail,
        last=last,
        spend=spend,
    )


def gate_states(readings: Sequence[GateReading]) -> dict[str, dict[str, str]]:
    return {r.gate: {"state": r.state, "detail": r.detail} for r in readings}


def iteration_event(
    plan: LoopPlan, outcome: IterationOutcome, readings: Sequence[GateReading]
) -> dict[str, Any]:
    process = outcome.process
    observation = outcome.observation
    return {
        "run_id": plan.run_id,
        "iteration": outcome.number,
        "duration": round(process.duration, 3),
        "exit": process.exit_code,
        "timed_out": process.timed_out,
        "signal": process.signal,
        "start_error": process.start_error,
        "output_bytes": process.output.total_bytes,
        "output_lines": process.output.total_lines,
        "tokens": outcome.tokens,
        "tool_calls": outcome.tool_calls,
        "cost_usd": outcome.cost_usd,
        "permission_denials": observation.permission_denials,
        "done": outcome.done,
        "failure": outcome.failure,
        "error": observation.error,
        "rate_limit": attrs.asdict(observation.rate_limit) if observation.rate_limit else None,
        "parse_note": observation.note,
        "report_problems": list(outcome.report_problems),
        "log": str(outcome.log_path.relative_to(plan.paths.folder)),
        "gates": gate_states(readings),
    }


def record_stop(plan: LoopPlan, summary: RunSummary) -> None:
    record_event(
        plan.paths,
        "run.stopped",
        {
            "run_id": plan.run_id,
            "reason": summary.reason,
            "iterations": summary.iterations,
            "gate": summary.gate,
            "detail": summary.detail,
        },
    )


def record_event(paths: ChangePaths, event: str, fields: dict[str, Any]) -> None:
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, paths.name, event, fields)
