"""``forge supervise``: every declared loop at once, one rate limit, a dashboard, a summary."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._engine import (
    DONE,
    INTERRUPTED,
    STOPPED,
    TRIP_CONDITIONS,
    EventSink,
    RunSummary,
    escalation_text,
    new_run_id,
    recovery_text,
)
from .._errors import EXIT_ESCALATE, EXIT_INTERRUPTED, EXIT_OK, StateError, UsageError
from .._executor import Executor
from .._policy import batch_relaxed_warnings, relaxed_warnings
from .._ratelimit import LimiterStatistics, open_limiter
from .._state import STATE_DIR, atomic_write
from .._supervise import (
    Dashboard,
    LoopRun,
    LoopSetup,
    Supervision,
    interrupted_results,
    limiter_line,
    prepare,
    resolve_loops,
    separate_trees,
)
from .._workspace import Project
from ._common import policy_from, project_from
from ._console import Output
from ._run_cmd import (
    ANNOUNCE,
    cost_warning,
    cost_warning_line,
    refuse_unpriced,
    session_summary,
)
from ._trio_run import run_interruptible

if TYPE_CHECKING:
    from .._notify import Delivery, LiveNotices
    from .._policy import Policy


@attrs.frozen
class Batch:
    """What ``forge supervise`` runs: the loops, prepared, under the project's policy.

    Attributes:
        project: The project the batch runs in.
        policy: The project's policy (its ``[rate_limit]``, ``[supervise]``, ``[notify]``).
        runs: Each loop, with its plan and its progress.
        run_id: The batch's run id (``.forge/runs/<id>/``).
        notes: What separating loops that share a tree decided, as said to the person.
        warnings: What the policy warns of (relaxed settings, a cost ceiling that
            cannot be counted), said as the batch starts and kept in its summary.
    """

    project: Project
    policy: Policy
    runs: list[LoopRun]
    run_id: str
    notes: list[str]
    warnings: list[str] = attrs.field(factory=list)


@attrs.frozen
class _Ran:
    """How the batch went: each loop's ending and what the limiter saw."""

    results: dict[str, RunSummary]
    interrupted: bool
    started: float
    waits: list[LimiterStatistics]  # one entry per time a loop had to wait
    stats: LimiterStatistics | None  # the limiter at the end
    live: _Live | None


def run(args: argparse.Namespace, out: Output) -> int:
    if args.fleet:
        return _fleet(args, out)
    batch = _batch(args, out)
    if args.check_executors and not _executors_pass(batch.runs, batch.project.root, out):
        out.line("supervise: not started — an executor check failed", style="bold red")
        return EXIT_ESCALATE
    if args.dry_run:
        return _dry_run(batch, out)
    return supervise_batch(batch, out)


def supervise_batch(batch: Batch, out: Output, *, document: bool = True) -> int:
    """Run a prepared batch to its end: warnings said, the summary and report written.

    ``document``: in ``--json`` mode, print the summary as the command's document
    (a command that runs a batch as one of its steps prints its own).

    Returns:
        The exit code of ``forge supervise``: 0 when every loop ended done.
    """
    for loop in batch.runs:
        warning = cost_warning(loop.plan.executor, loop.setup.policy)
        refuse_unpriced(
            [f"loop {loop.setup.change}: {warning}"] if warning else [], loop.setup.policy
        )
    batch = attrs.evolve(batch, warnings=_warnings(batch))
    out.announce(ANNOUNCE)
    for warning in batch.warnings:
        out.announce(warning, style="yellow")
    return _finish(batch, _supervised(batch, out), out, document=document)


def _warnings(batch: Batch) -> list[str]:
    """What a night must hear: the warnings ``forge policy check`` and the plans give."""
    loops = [(run.setup.change, run.setup.policy) for run in batch.runs]
    found = batch_relaxed_warnings(batch.policy, loops)
    for run in batch.runs:
        policy = run.setup.policy
        if warning := cost_warning(run.plan.executor, policy):
            # Accepted ([budget] allow_unpriced): a refused one never gets here.
            line = cost_warning_line(warning, policy)
            found.append(f"warning: loop {run.setup.change}: {line}")
    return found


def _fleet(args: argparse.Namespace, out: Output) -> int:
    if args.batch or args.only or args.dry_run:
        raise UsageError(
            "--fleet works the batch already submitted to the fleet",
            hint="submit it with forge fleet submit --batch FILE, then forge supervise --fleet",
        )
    from ._fleet_cmd import work_cmd

    return work_cmd(args, out)


def _batch(args: argparse.Namespace, out: Output) -> Batch:
    """The loops the arguments and the policy declare, prepared to run (notes said)."""
    project = project_from(args)
    overlays = [Path(args.batch).resolve()] if args.batch else []
    for overlay in overlays:
        if not overlay.is_file():
            raise UsageError(f"--batch {args.batch}: no such file")
    loaded = policy_from(project, args=args, overlays=overlays)
    setups = resolve_loops(loaded, project.root)
    repos = [s.change for s in setups if s.repo]
    if repos:
        raise UsageError(
            f"loop(s) naming a repo run in a fleet only: {', '.join(repos)}",
            hint="forge fleet submit --batch FILE, then forge fleet work on each host",
        )
    if not setups:
        raise UsageError(
            "no loops to supervise",
            hint="declare [[loop]] tables in forge.toml or in a --batch file",
        )
    if args.only:
        setups = _only(setups, args.only)
    return batch_of(project, loaded.policy, setups, out)


def batch_of(project: Project, policy: Policy, setups: list[LoopSetup], out: Output) -> Batch:
    """These loops prepared as one batch under the project's ``policy`` (notes said)."""
    setups, notes = separate_trees(setups, policy.supervise.worktrees)
    for note in notes:
        out.line(f"note: {note}")
    run_id = new_run_id()
    return Batch(project, policy, prepare(setups, run_id), run_id, notes)


def _only(setups: list[LoopSetup], only: str) -> list[LoopSetup]:
    """``--only A,B``: the declared loops it names."""
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = sorted(set(wanted) - {s.change for s in setups})
    if unknown:
        raise UsageError(
            f"--only names no declared loop: {', '.join(unknown)}",
            hint=f"declared: {', '.join(s.change for s in setups)}",
        )
    return [s for s in setups if s.change in wanted]


def _dry_run(batch: Batch, out: Output) -> int:
    for loop in batch.runs:
        _print_loop_plan(loop, out)
        out.line()
    out.line(f"dry run: {len(batch.runs)} loop(s), nothing executed (drop --dry-run to run)")
    if out.json_mode:
        loops = [_plan_json(r) for r in batch.runs]
        out.document({"dry_run": True, "loops": loops, "notes": batch.notes})
    return EXIT_OK


def _supervised(batch: Batch, out: Output) -> _Ran:
    """Run the batch (a dashboard on a terminal, a line per event elsewhere) until it ends."""
    policy, runs = batch.policy, batch.runs
    waits: list[LimiterStatistics] = []

    def on_limiter(kind: str, stats: LimiterStatistics) -> None:
        if kind == "wait":
            waits.append(stats)
        if kind in ("warn", "wait", "pause"):
            events("limiter", "limiter", f"{kind}: {limiter_line(stats, time.time())}")

    limiter = open_limiter(policy.rate_limit, batch.project.root, on_event=on_limiter)
    dashboard = (
        Dashboard(out.console, [r.progress for r in runs], limiter)
        if out.live and not out.json_mode
        else None
    )

    def events(kind: str, change: str, text: str) -> None:
        if dashboard is not None:
            dashboard.event(kind, change, text)
        else:
            out.line(f"{change}: {text}")

    final: list[LimiterStatistics] = []
    started = time.time()
    interrupted = False
    live = _live_notices(policy, batch.project.root, batch.run_id, events)
    supervision = Supervision(
        runs,
        limiter,
        policy.supervise.max_parallel,
        events,
        on_iteration=None if live is None else live.iteration,
        on_loop_end=None if live is None else live.loop_ended,
    )
    try:
        results = run_interruptible(_main, supervision, dashboard, live, final)
    except KeyboardInterrupt:
        interrupted = True
        results = interrupted_results(runs, supervision.results())
    stats = final[0] if final else None
    return _Ran(results, interrupted, started, waits, stats, live)


def _finish(batch: Batch, ran: _Ran, out: Output, *, document: bool = True) -> int:
    """The summary written, the table and the report shown, the exit code."""
    runs, results = batch.runs, ran.results
    all_done = all(r.reason == DONE for r in results.values()) and len(results) == len(runs)
    code = EXIT_INTERRUPTED if ran.interrupted else (EXIT_OK if all_done else EXIT_ESCALATE)
    summary = _summary(batch, ran, code)
    path = batch.project.root / STATE_DIR / "runs" / batch.run_id / "summary.json"
    # The endings first: a disk that filled up during the night must not
    # swallow them with the summary file.
    _print_table(runs, results, out)
    try:
        atomic_write(path, (json.dumps(summary, indent=2) + "\n").encode())
    except StateError as exc:
        out.note(f"error: {exc.message}; the summary goes to standard error instead", style="red")
        sys.stderr.write(json.dumps(summary) + "\n")
        return code if code != EXIT_OK else EXIT_ESCALATE
    out.line(f"summary: {path}", style="dim")
    from ._report_cmd import after_batch  # the report, and what was not yet said

    live = ran.live.notices if ran.live else None
    after_batch(batch.project.root, batch.policy, summary, path, out, live=live)
    if ran.interrupted:
        out.line("supervise: INTERRUPTED — every loop's state is written; rerun to continue")
    if out.json_mode and document:
        out.document(summary)
    return code


async def _main(
    supervision: Supervision,
    dashboard: Dashboard | None,
    live: _Live | None,
    final: list[LimiterStatistics],
) -> dict[str, RunSummary]:
    try:
        async with trio.open_nursery() as nursery:
            if dashboard is not None:
                nursery.start_soon(dashboard.run)
            async with live.sending() if live is not None else contextlib.nullcontext():
                results = await supervision.run()
            nursery.cancel_scope.cancel()
        return results
    finally:
        if supervision.limiter is not None:
            # It reads trio's clock: take it while in trio.
            final.append(supervision.limiter.statistics())


def _executors_pass(runs: list[LoopRun], root: Path, out: Output) -> bool:
    """``--check-executors``: each named executor the loops use, checked once per level."""
    from .._scripted import profiled_executors
    from ._executors_cmd import check_all

    wanted: dict[tuple[str, str], Executor] = {}
    for loop in runs:
        executor = loop.plan.executor
        if executor.templated and executor.name in profiled_executors():
            wanted.setdefault((executor.name, executor.spec.permission), executor)
    if not wanted:
        out.line("executors check: no loop runs a named agent CLI Forge can check")
        return True
    results = check_all(((e, e.spec.permission) for e in wanted.values()), root, out)
    out.line()
    return all(result.passed for result in results)


def _print_loop_plan(loop: LoopRun, out: Output) -> None:
    policy = loop.setup.policy
    breaker = policy.breaker
    out.line(f'Loop: up to {loop.plan.max_iterations} iteration(s) on change "{loop.setup.change}"')
    out.line(f"  executor: {loop.plan.describe_executor()}")
    if (permission := loop.plan.executor.describe_permission()) is not None:
        out.line(f"  permission: {permission}")
    if loop.plan.executor.templated and loop.plan.executor.spec.session == "continue":
        out.line(f"  session: {session_summary(policy)}")
    if warning := cost_warning(loop.plan.executor, policy):
        out.line(f"  warning:  {cost_warning_line(warning, policy)}", style="yellow")
    where = str(loop.setup.root)
    if loop.setup.worktree:
        where += f" (worktree .forge/worktrees/{loop.setup.change} from {loop.setup.base})"
    out.line(f"  in:       {where}")
    out.line(f"  sandbox:  {loop.plan.describe_sandbox(policy)}")
    out.line(f"  verify:   {policy.verify.command or '(none)'} after each iteration")
    if breaker.on_open == "escalate":
        circuit = "a trip escalates at once"
    else:
        circuit = (
            f"a trip opens the circuit: cooldown {breaker.cooldown} doubling to "
            f"{breaker.cooldown_max}, one probe each; {escalation_text(policy)}"
        )
    out.line(f"  circuit:  {circuit}")
    out.line("  trips:    " + ", ".join(TRIP_CONDITIONS))
    out.line(f"  recovery: {recovery_text(policy)}")
    for warning in relaxed_warnings(policy):
        out.line(f"  {warning}", style="yellow")


def _plan_json(run: LoopRun) -> dict[str, Any]:
    return {
        "change": run.setup.change,
        "dir": str(run.setup.root),
        "max_iterations": run.plan.max_iterations,
        "executor": run.plan.describe_executor(),
        "worktree": run.setup.worktree,
    }


@attrs.define
class _Live:
    """Escalations, alerts and questions told to ``[notify]`` as they happen."""

    notices: LiveNotices
    events: EventSink
    # Where the alerts being sent run, while :meth:`sending` is open.
    _nursery: trio.Nursery | None = None

    @contextlib.asynccontextmanager
    async def sending(self) -> AsyncIterator[None]:
        """Alerts go out while the loops run; the batch ends once they are sent."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                yield
            finally:
                self._nursery = None

    def iteration(self, run: LoopRun) -> None:
        nursery = self._nursery
        if nursery is None:
            return
        change, folder = run.setup.change, str(run.setup.root)
        question = run.progress.question
        if question and self.notices.tells_questions:
            run_policy = run.setup.policy.run
            wait = run_policy.question_wait.seconds if run_policy.on_question == "wait" else None
            ask = partial(
                self.notices.asked, change, folder, run.progress.iteration, question, wait=wait
            )
            nursery.start_soon(self._send, change, ask)
        if not self.notices.tells_alerts:
            return
        for name, detail in run.progress.raised:
            if not self.notices.worth_telling(change, folder, name, trio.current_time()):
                continue
            send = partial(self.notices.alert, change, folder, name, detail)
            nursery.start_soon(self._send, run.setup.change, send)

    async def loop_ended(self, run: LoopRun, result: RunSummary) -> None:
        if result.reason in (DONE, INTERRUPTED, STOPPED) or not self.notices.tells_escalations:
            return
        from .._report import resume_commands

        root = str(run.setup.root)
        resume = resume_commands(run.setup.change, result.reason, result.gate, (), root, root)
        entry = {**_loop_entry(run, result), "gate": result.gate, "resume": list(resume)}
        await self._send(run.setup.change, partial(self.notices.escalated, entry))

    async def _send(self, change: str, send: Callable[[], list[Delivery]]) -> None:
        # A command or a POST, bounded by [notify] timeout: off the event loop.
        for delivery in await trio.to_thread.run_sync(send):
            if not delivery.ok:
                self.events("notify", change, delivery.line())


def _live_notices(policy: Policy, root: Path, run_id: str, events: EventSink) -> _Live | None:
    notify = policy.notify
    if not (notify.on_escalate or notify.on_alert or notify.on_question or notify.webhook):
        return None
    from .._notify import LiveNotices

    folder = root / STATE_DIR / "runs" / run_id
    return _Live(LiveNotices(notify, root=root, run_folder=folder, run_id=run_id), events)


def _loop_entry(loop: LoopRun, result: RunSummary | None) -> dict[str, Any]:
    """A loop's line of ``summary.json``."""
    progress = loop.progress
    return {
        "change": loop.setup.change,
        "dir": str(loop.setup.root),
        "reason": result.reason if result else None,
        "iterations": result.iterations if result else progress.iteration,
        "max_iterations": loop.plan.max_iterations,
        "detail": result.detail if result else None,
        "circuit_trips": progress.trips,
        "circuit": progress.circuit,
        "verify": progress.verify or None,
        "spend": {"tokens": progress.tokens, "cost_usd": progress.cost_usd},
        "recovery": progress.recovery or None,
        "alerts": list(progress.alerts),
        "review": list(progress.review),
    }


def _summary(batch: Batch, ran: _Ran, code: int) -> dict[str, Any]:
    """The batch's ``summary.json``."""
    loops = [_loop_entry(loop, ran.results.get(loop.key)) for loop in batch.runs]
    stats = ran.stats
    return {
        "run_id": batch.run_id,
        "root": str(batch.project.root),
        "started_at": ran.started,
        "finished_at": time.time(),
        "interrupted": ran.interrupted,
        "exit_code": code,
        "warnings": list(batch.warnings),
        "loops": loops,
        "limiter": None if stats is None else {**attrs.asdict(stats), "waits": len(ran.waits)},
    }


def _print_table(runs: list[LoopRun], results: dict[str, RunSummary], out: Output) -> None:
    out.line()
    width = max(len(r.setup.change) for r in runs)
    for loop in runs:
        result = results.get(loop.key)
        reason = result.reason if result else "not started"
        iterations = result.iterations if result else loop.progress.iteration
        detail = f" — {result.detail}" if result and result.detail else ""
        style = "green" if reason == DONE else "red"
        out.styled(
            (f"{loop.setup.change.ljust(width)}  ", "bold"),
            (f"{reason:<22}", style),
            (f"{iterations}/{loop.plan.max_iterations} iteration(s), ", None),
            (f"{loop.progress.trips} trip(s){detail}", None),
        )
        for note in loop.progress.review:
            out.line(f"  review: {note}")
        if loop.progress.alerts:
            out.line(f"  alerts: {', '.join(loop.progress.alerts)}")
