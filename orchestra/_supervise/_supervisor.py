"""The supervisor: many bounded loops in one trio nursery, sharing one rate limiter."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import attrs
import trio

from .._engine import (
    EXECUTOR_FAILED,
    INTERRUPTED,
    WORKTREE_FAILED,
    EventSink,
    LoopPlan,
    LoopProgress,
    RunSummary,
    guarded,
    iteration_time_limit,
    run_loop,
    supervised_rules,
)
from .._errors import ConfigError, ForgeError
from .._executor import Executor, load_executor, shell_command
from .._ratelimit import RateLimiter
from .._secscan import load_rules
from .._state import ChangePaths
from ._imports import check_worktree_imports
from ._loop_tables import LoopSetup
from ._worktree import WorktreeError, ensure_worktree


@attrs.frozen
class LoopRun:
    """One loop as the supervisor starts it."""

    setup: LoopSetup
    plan: LoopPlan
    progress: LoopProgress

    @property
    def key(self) -> str:
        """Unique per loop: two repositories may each have a change of one name."""
        return self.setup.source


def prepare(setups: Sequence[LoopSetup], run_id: str) -> list[LoopRun]:
    """A plan and a progress record for every loop (worktrees are made when each starts).

    Raises:
        ConfigError: a loop with no executor, or an unknown executor.
    """
    runs = []
    problems = []
    for setup in setups:
        try:
            executor = executor_for(setup)
        except ConfigError as exc:
            problems.append(f"{setup.source}: {exc.message}")
            continue
        run_policy = setup.policy.run
        secscan = setup.policy.secscan
        if secscan.enabled:
            try:
                load_rules(secscan.rules, root=setup.root)  # a bad rules file stops them all
            except ConfigError as exc:
                problems.extend(f"{setup.source}: {p}" for p in exc.problems or [exc.message])
                continue
        plan = LoopPlan(
            paths=ChangePaths(setup.root, setup.change),
            executor=executor,
            max_iterations=run_policy.max_iterations,
            time_limit=iteration_time_limit(executor, setup.policy),
            grace=run_policy.grace.seconds,
            done_marker=run_policy.done_marker,
            workdir=setup.root,
            prompt=run_policy.prompt,
            run_id=run_id,
        )
        runs.append(LoopRun(setup, plan, LoopProgress(setup.change, run_policy.max_iterations)))
    if problems:
        raise ConfigError("the loops cannot run", problems=problems)
    return runs


def executor_for(setup: LoopSetup) -> Executor:
    run_policy = setup.policy.run
    if run_policy.cmd:
        return shell_command(run_policy.cmd)
    if run_policy.executor:
        executor = load_executor(run_policy.executor, setup.root)
        return executor.for_policy(run_policy.permission, run_policy.session)
    raise ConfigError("no executor: set cmd or executor in the [[loop]] table or in [run]")


@attrs.define
class Supervision:
    """A batch of loops under one supervisor, at most ``max_parallel`` at once.

    :meth:`run` runs every loop until each stops and returns their endings.
    :meth:`results` reads the endings so far at any moment, so that a caller
    that was interrupted still knows how far each loop got.

    Attributes:
        on_iteration: Called after each of a loop's iterations.
        on_loop_end: Called when a loop has ended (its slot already given to
            the next loop).
    """

    runs: Sequence[LoopRun]
    limiter: RateLimiter | None
    max_parallel: int | None
    on_event: EventSink
    wall_clock: Callable[[], float] = time.time
    on_iteration: Callable[[LoopRun], None] | None = None
    on_loop_end: Callable[[LoopRun, RunSummary], Awaitable[None]] | None = None
    _ended: dict[str, RunSummary] = attrs.field(factory=dict, init=False)

    def results(self) -> dict[str, RunSummary]:
        """The endings of the loops that have ended, by loop key (a copy)."""
        return dict(self._ended)

    async def run(self) -> dict[str, RunSummary]:
        """Run every loop until each stops; their endings, by loop key."""
        runs = self.runs
        slots = trio.CapacityLimiter(self.max_parallel or max(1, len(runs)))
        worktree_lock = trio.Lock()
        async with trio.open_nursery() as nursery:
            for run in runs:
                # Slots are taken here, in the declared order, so with max_parallel
                # the loops start in the order the file lists them.
                slot = object()  # two loops in two repositories may share a change name
                await slots.acquire_on_behalf_of(slot)
                nursery.start_soon(self._one, run, slots, slot, worktree_lock)
        return self.results()

    async def _one(
        self, run: LoopRun, slots: trio.CapacityLimiter, slot: object, lock: trio.Lock
    ) -> None:
        try:
            ended = await self._loop(run, lock)
        finally:
            slots.release_on_behalf_of(slot)
        self._ended[run.key] = ended
        if self.on_loop_end is not None:
            await self.on_loop_end(run, ended)

    async def _loop(self, run: LoopRun, lock: trio.Lock) -> RunSummary:
        try:
            plan = await _with_worktree(run, lock)
            policy = run.setup.policy
            plan, settings = guarded(
                plan,
                policy,
                supervised_rules(policy),
                limiter=self.limiter,
                wall_clock=self.wall_clock,
            )
            on_iteration = self.on_iteration
            return await run_loop(
                plan,
                settings,
                progress=run.progress,
                on_event=self.on_event,
                on_iteration=(None if on_iteration is None else lambda *_: on_iteration(run)),
            )
        except ForgeError as exc:
            # One loop's failure to start is that loop's ending, not the supervisor's;
            # a worktree git would not make is no fault of the executor.
            reason = WORKTREE_FAILED if isinstance(exc, WorktreeError) else EXECUTOR_FAILED
            run.progress.finish(reason)
            self.on_event("loop", run.setup.change, f"cannot run: {exc.message}")
            return RunSummary(reason=reason, iterations=run.progress.iteration, detail=exc.message)


async def _with_worktree(run: LoopRun, lock: trio.Lock) -> LoopPlan:
    if not run.setup.worktree:
        return run.plan
    run.progress.status = "making its worktree"
    path: Path = await ensure_worktree(run.setup.root, run.setup.change, run.setup.base, lock)
    # Its verify must test the worktree's code: say so now rather than after
    # three failed verifies of a correct edit.
    await check_worktree_imports(path, run.setup.change)
    return attrs.evolve(run.plan, workdir=path)


def interrupted_results(
    runs: Sequence[LoopRun], results: dict[str, RunSummary]
) -> dict[str, RunSummary]:
    """Every loop's ending after an interruption: those still running were interrupted."""
    merged = dict(results)
    for run in runs:
        merged.setdefault(
            run.key, RunSummary(reason=INTERRUPTED, iterations=run.progress.iteration)
        )
    return merged
