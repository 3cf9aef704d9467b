"""One host of the fleet: claim loops up to ``max_parallel``, run each with the engine.

The worker is a trio program. Its tasks:

- the claimer: takes a loop another host left (``XAUTOCLAIM`` of an entry
  idle past a lease) or a new one, and claims its lease and fencing token;
- one task per running loop: :func:`run_loop` with the Redis store and the
  fleet's limiter, beside a renewer that renews its lease every heartbeat
  until the loop's ending is recorded. A renewal the fence refuses means
  another host has the loop: the store refuses every write and the loop (its
  executor's process group with it) is stopped. When renewals fail (the server
  cannot be reached), the loop is stopped a heartbeat plus the executor's
  grace before the lease runs out, so that its executor is gone before any
  other host may claim the loop (hence ``2 × heartbeat + grace < lease``);
- the heartbeat: reads the server's clock and reports the host as alive, and
  once more when the host stops (finished or interrupted).

Every executor's process group is handed to a watchdog process, which kills
them if the worker itself is killed, and also if the worker, alive but frozen
or stuck, stops renewing its leases: each successful claim or renewal moves
the watchdog's deadline on, which lapses half a heartbeat before the oldest
lease could (see :mod:`._deadline`, :mod:`._watchdog`). A ``repo`` loop
with ``push = true`` pushes its branch after every recorded iteration and when
it is given back, so a host that takes it over continues from those commits.

An unreachable server stops nothing by itself: the limiter grants no permit
(no executor starts), writes wait for the server, and a host that was cut
off waits one lease before it takes over anyone's loop, so the hosts still
running theirs renew first.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from .._engine import (
    DONE,
    EXECUTOR_FAILED,
    WORKTREE_FAILED,
    EventSink,
    LoopProgress,
    RunSummary,
    guarded,
    new_run_id,
    run_loop,
    supervised_rules,
)
from .._errors import ForgeError
from .._policy import structure_policy
from .._ratelimit import EventHandler, RateLimiter
from .._supervise import LoopSetup, ensure_worktree, prepare
from ._config import GROUP, FleetConfig
from ._connection import Connection, FleetUnavailable, ServerClock, host_clock
from ._control import cancelled_by
from ._deadline import LeaseDeadline
from ._limiter import RedisBackend
from ._queue import (
    CLAIM,
    DONE_STATE,
    ESCALATED,
    FINISH,
    QUEUED,
    RELEASE,
    RENEW,
    RUNNING,
    BatchInfo,
    LoopSpec,
    all_ended,
    forget_entry,
    next_entry,
    read_batch,
    status_json,
)
from ._retention import prune_hosts, retire_batch
from ._source import SourceError, checkout_repo, push_branch
from ._store import RedisChangeStore
from ._watchdog import Watchdog, executors_die_with_this_process

PUSH_FAILED = "push-failed"
"""The ending of a loop whose work could not be pushed to the remote."""

# A push when a loop is given back must not hold a stopping host for long.
GIVE_BACK_PUSH_TIMEOUT = 60.0

_T = TypeVar("_T")


def default_host() -> str:
    """This host's name in the fleet: the machine's name and the process id."""
    return f"{socket.gethostname()}-{os.getpid()}"


@attrs.define
class Running:
    """A loop this host runs."""

    change: str
    progress: LoopProgress
    # Seconds between SIGTERM and SIGKILL for this loop's executor (its policy's).
    grace: float = 0.0


@attrs.define
class WorkerResult:
    """What one host did: the endings of the loops it ran to their end, and the lost ones."""

    ran: dict[str, RunSummary] = attrs.field(factory=dict)
    lost: list[str] = attrs.field(factory=list)


class Worker:
    """One host working a batch until every loop of it has ended.

    Args:
        config: The fleet.
        batch: The batch as submitted.
        host: This host's name (unique in the fleet).
        max_parallel: Loops run at once on this host.
        cache: Where repo loops are cloned.
        on_event: ``(kind, change, text)`` for every line worth showing.
        on_limiter: The limiter's events (warning, wait, outage).
    """

    def __init__(
        self,
        config: FleetConfig,
        batch: BatchInfo,
        *,
        connection: Connection,
        host: str,
        max_parallel: int,
        cache: Path,
        on_event: EventSink,
        on_limiter: EventHandler | None = None,
    ) -> None:
        self.config = config
        self.keys = config.keys
        self.batch = batch
        self.connection = connection
        self.host = host
        self.max_parallel = max_parallel
        self.cache = cache / config.name
        self.on_event = on_event
        self.clock = ServerClock(connection)
        self.limiter = RateLimiter(
            RedisBackend(connection, self.keys, host, grace=max(2.0, 2 * config.heartbeat)),
            batch.calls,
            batch.window,
            batch.warn_at,
            clock=trio.current_time,
            on_event=on_limiter,
            wall_clock=self.clock,
        )
        self.running: dict[str, Running] = {}
        # Every loop this host has run, in the order it claimed them (the dashboard's rows).
        self.shown: list[LoopProgress] = []
        self.result = WorkerResult()
        self._claim = connection.script(CLAIM)
        self._renew = connection.script(RENEW)
        self._finish = connection.script(FINISH)
        self._release = connection.script(RELEASE)
        self._worktree_lock = trio.Lock()
        # After the server was unreachable, leave others' loops alone for one
        # lease: the hosts running them renew first.
        self._quiet_until = 0.0
        # The leases held, and the deadline they give the watchdog (once it runs).
        self._watchdog: Watchdog | None = None
        self.deadline = LeaseDeadline(config.lease, config.heartbeat, self._publish_deadline)

    async def run(self) -> WorkerResult:
        """Work until every loop of the batch has ended (on any host)."""
        await self._call_retrying(lambda _client: self.clock.sync())
        interrupted = True
        try:
            with executors_die_with_this_process() as watchdog:
                self._watchdog = watchdog
                try:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._heartbeat)
                        await self._claim_until_all_ended(nursery)
                        nursery.cancel_scope.cancel()
                finally:
                    self._watchdog = None
            await self._retire()
            interrupted = False
        finally:
            # The last word, also when stopped: the status shows this host gone
            # rather than running loops it gave back.
            with trio.CancelScope(shield=True), contextlib.suppress(FleetUnavailable):
                with trio.move_on_after(self.config.command_timeout * 2):
                    await self._beat(finished=True, interrupted=interrupted)
        return self.result

    # -- claiming -------------------------------------------------------------

    async def _claim_until_all_ended(self, nursery: trio.Nursery) -> None:
        poll = min(0.25, self.config.heartbeat)
        while True:
            try:
                if len(self.running) < self.max_parallel:
                    claimed = await self._claim_one()
                    if claimed is not None:
                        entry_id, spec, token = claimed
                        self.running[spec.change] = Running(
                            spec.change, LoopProgress(spec.change, 0)
                        )
                        nursery.start_soon(self._run_one, entry_id, spec, token)
                        continue
                if not self.running and await self._call(
                    lambda client: all_ended(client, self.keys)
                ):
                    return
            except FleetUnavailable as exc:
                if not exc.outage:
                    raise
                self._quiet_until = trio.current_time() + self.config.lease
            await trio.sleep(poll)

    async def _claim_one(self) -> tuple[str, LoopSpec, int] | None:
        may_take_over = trio.current_time() >= self._quiet_until
        min_idle = int(self.config.lease * 1000) if may_take_over else None
        entry = await self._call(
            lambda client: next_entry(client, self.keys, self.host, min_idle_ms=min_idle)
        )
        if entry is None:
            return None
        entry_id, spec = entry
        if spec.change in self.running:
            # Cancelled then requeued while this host still stops its first copy:
            # the entry stays pending, and is taken again once it has been idle a lease.
            return None
        status = status_json(RUNNING, host=self.host, since=self.clock.iso())
        lease_ms = int(self.config.lease * 1000)
        keys = [self.keys.lease(spec.change), self.keys.fence(spec.change), self.keys.status]
        sent = self.deadline.now()
        granted, detail = await self._call(
            lambda _client: self._claim(keys=keys, args=[self.host, lease_ms, spec.change, status])
        )
        if int(granted) != 1:
            if detail == "ended":
                # Ended on some host whose acknowledgement was lost: acknowledge it here.
                await self._call(lambda client: forget_entry(client, self.keys, entry_id))
            return None
        self.deadline.renewed(spec.change, sent)
        return entry_id, spec, int(detail)

    # -- one loop ---------------------------------------------------------------

    async def _run_one(self, entry_id: str, spec: LoopSpec, token: int) -> None:
        running = self.running[spec.change]
        pushing = bool(spec.repo and spec.push)
        trusted = self.deadline.trust()
        store = RedisChangeStore(
            self.connection,
            self.keys,
            spec.change,
            token,
            self.clock.iso,
            after_commit=partial(self._push_after_iteration, spec) if pushing else None,
            trusted=trusted,
        )
        self.on_event("fleet", spec.change, f"claimed by {self.host} (fencing token {token})")
        try:
            summary: RunSummary | None = None
            async with trio.open_nursery() as renewing:
                # The lease is renewed until the loop's ending is recorded (a push
                # may take minutes): only then is the renewer cancelled.
                scope = trio.CancelScope()
                renew = partial(self._renew_lease, entry_id, spec.change, token, running, trusted)
                renewing.start_soon(renew, store, scope)
                try:
                    with scope:
                        summary = await self._run_loop(spec, store, running)
                except BaseException:
                    # This host is stopping (cancelled, interrupted; a nursery may wrap
                    # it in a group): push what the loop committed, give the loop back
                    # so that another host takes it over now rather than after its
                    # lease, then go on stopping.
                    if not store.revoked:
                        with trio.CancelScope(shield=True):
                            if pushing:
                                await self._push_given_back(spec)
                            await self._give_back(entry_id, spec.change, token)
                    raise
                if store.revoked or summary is None:
                    # Stopped (the lease could not be renewed) or fenced out: the loop
                    # is another host's to resume once its entry has been idle for a lease.
                    self.result.lost.append(spec.change)
                    self.on_event("fleet", spec.change, await self._why_stopped(spec.change))
                    renewing.cancel_scope.cancel()
                    return
                if pushing and summary.reason not in (WORKTREE_FAILED,):
                    summary = await self._push(spec, summary)
                ended = await self._finish_loop(entry_id, spec.change, token, summary)
                renewing.cancel_scope.cancel()
            if ended:
                self.result.ran[spec.change] = summary
            else:
                self.result.lost.append(spec.change)
        finally:
            # Only this copy's own bookkeeping: never that of a later claim of the change.
            if self.running.get(spec.change) is running:
                self.deadline.released(spec.change)
                del self.running[spec.change]

    async def _why_stopped(self, change: str) -> str:
        """The line for a loop this host stopped: a person cancelled it, or its lease was lost."""
        with contextlib.suppress(FleetUnavailable):
            cancelled = await self._call(lambda client: cancelled_by(client, self.keys, change))
            if cancelled is not None:
                return f"{cancelled}: this host stopped its agent"
        return "lease lost: this host stopped its copy of the loop"

    async def _run_loop(
        self, spec: LoopSpec, store: RedisChangeStore, running: Running
    ) -> RunSummary:
        try:
            policy = structure_policy(spec.policy, f"fleet loop {spec.change}")
            root = await self._source(spec)
            setup = LoopSetup(
                change=spec.change,
                policy=policy,
                root=root,
                worktree=spec.worktree and not spec.repo,
                base=spec.base,
                source=f"fleet loop {spec.change}",
            )
            [run] = prepare([setup], new_run_id())
            plan = run.plan
            running.progress = run.progress
            running.grace = plan.grace
            self.shown.append(run.progress)
            if setup.worktree:
                path = await ensure_worktree(root, spec.change, spec.base, self._worktree_lock)
                plan = attrs.evolve(plan, workdir=path)
            plan, settings = guarded(
                plan, policy, supervised_rules(policy), limiter=self.limiter, wall_clock=self.clock
            )
            # Every stop on the server is meant for this run (a requeue drops the
            # last run's): one asked from the claim on (the status says running while
            # this host still clones), or of the host this one takes the loop over from.
            settings = attrs.evolve(settings, began=0.0)
        except ForgeError as exc:
            reason = WORKTREE_FAILED if isinstance(exc, SourceError) else EXECUTOR_FAILED
            self.on_event("loop", spec.change, f"cannot run: {exc.message}")
            return RunSummary(reason=reason, iterations=0, detail=exc.message)
        return await run_loop(
            plan, settings, progress=running.progress, on_event=self.on_event, store=store
        )

    async def _source(self, spec: LoopSpec) -> Path:
        if not spec.repo:
            root = Path(spec.dir)
            # A shared folder may be a slow network mount: look off the event loop.
            if not await trio.to_thread.run_sync(root.is_dir):
                raise SourceError(
                    f"the loop's dir {spec.dir} is not on this host",
                    hint="a dir loop needs its folder at the same path on every host "
                    "(shared storage), or name a repo instead",
                )
            return root
        return await trio.to_thread.run_sync(
            checkout_repo, spec.repo, spec.ref, spec.change, self.cache
        )

    async def _push(self, spec: LoopSpec, summary: RunSummary) -> RunSummary:
        workdir = self.cache / spec.change
        try:
            await trio.to_thread.run_sync(push_branch, workdir, spec.change)
        except SourceError as exc:
            # The morning's result is the branch on the remote: without it the
            # loop's work is not done, whatever the loop decided.
            self.on_event("fleet", spec.change, f"push failed: {exc.message}")
            detail = f"{summary.detail}; " if summary.detail else ""
            return attrs.evolve(
                summary, reason=PUSH_FAILED, detail=f"{detail}push failed: {exc.message}"
            )
        self.on_event("fleet", spec.change, f"pushed forge/{spec.change}")
        return summary

    def _push_after_iteration(self, spec: LoopSpec) -> None:
        """Push the branch after an iteration is recorded (in the store's thread).

        A host that takes the loop over then starts from these commits. A push
        that fails here is retried after the next iteration and at the loop's end.
        """
        try:
            push_branch(self.cache / spec.change, spec.change)
        except SourceError as exc:
            with contextlib.suppress(RuntimeError):
                trio.from_thread.run_sync(
                    self.on_event, "fleet", spec.change, f"push failed: {exc.message}"
                )

    async def _push_given_back(self, spec: LoopSpec) -> None:
        workdir = self.cache / spec.change
        if not await trio.to_thread.run_sync((workdir / ".git").exists):
            return
        try:
            await trio.to_thread.run_sync(
                partial(push_branch, workdir, spec.change, timeout=GIVE_BACK_PUSH_TIMEOUT)
            )
        except SourceError as exc:
            self.on_event("fleet", spec.change, f"push failed: {exc.message}")
        else:
            self.on_event("fleet", spec.change, f"pushed forge/{spec.change}")

    async def _renew_lease(
        self,
        entry_id: str,
        change: str,
        token: int,
        running: Running,
        trusted: Callable[[], bool],
        store: RedisChangeStore,
        scope: trio.CancelScope,
    ) -> None:
        lease_ms = int(self.config.lease * 1000)
        keys = [self.keys.fence(change), self.keys.lease(change), self.keys.loops]
        args = [token, self.host, lease_ms, entry_id, GROUP]
        renewed_at = trio.current_time()
        while True:
            stop_at = renewed_at + stop_after(
                self.config.lease, self.config.heartbeat, running.grace
            )
            await trio.sleep(max(0.0, min(self.config.heartbeat, stop_at - trio.current_time())))
            if not trusted():
                # This host was frozen (or stuck) past the watchdog's deadline: the
                # executor may have been killed, another host may run the loop.
                self._revoke(store, scope)
                return
            if trio.current_time() >= stop_at:
                self._stop_unrenewed(store, scope)
                return
            sent = self.deadline.now()
            try:
                kept = await self._call(lambda _client: self._renew(keys=keys, args=args))
            except FleetUnavailable as exc:
                if not exc.outage:
                    raise
                if trio.current_time() < stop_at:
                    continue
                self._stop_unrenewed(store, scope)
                return
            if int(kept) != 1:
                self._revoke(store, scope)
                return
            self.deadline.renewed(change, sent)
            if not trusted():
                self._revoke(store, scope)
                return
            renewed_at = trio.current_time()

    def _revoke(self, store: RedisChangeStore, scope: trio.CancelScope) -> None:
        # The loop is not this host's any more: no write, and its executor stops now.
        store.revoke()
        scope.cancel()

    def _publish_deadline(self, until: float | None) -> None:
        if self._watchdog is not None:
            self._watchdog.kill_at(until)

    def _stop_unrenewed(self, store: RedisChangeStore, scope: trio.CancelScope) -> None:
        # Not renewed for nearly a lease: stop the executor now, so that it is gone
        # (its grace included) before another host may take the loop over. What
        # the fence still allows is written.
        store.lapse()
        scope.cancel()

    async def _give_back(self, entry_id: str, change: str, token: int) -> None:
        status = status_json(QUEUED, released_by=self.host, since=self.clock.iso())
        keys = [self.keys.fence(change), self.keys.lease(change), self.keys.loops, self.keys.status]
        idle = int(self.config.lease * 1000) + 1
        args = [token, GROUP, entry_id, self.host, idle, change, status]
        # A server that cannot be reached: the lease lapses instead.
        with trio.move_on_after(self.config.command_timeout), contextlib.suppress(FleetUnavailable):
            if int(await self._call(lambda _client: self._release(keys=keys, args=args))):
                self.on_event("fleet", change, f"given back by {self.host}")

    async def _finish_loop(
        self, entry_id: str, change: str, token: int, summary: RunSummary
    ) -> bool:
        state = DONE_STATE if summary.reason == DONE else ESCALATED
        status = status_json(
            state,
            host=self.host,
            reason=summary.reason,
            iterations=summary.iterations,
            detail=summary.detail,
            ended=self.clock.iso(),
        )
        keys = [self.keys.fence(change), self.keys.lease(change), self.keys.loops, self.keys.status]
        args = [token, GROUP, entry_id, change, status]
        finished = await self._call_retrying(lambda _client: self._finish(keys=keys, args=args))
        if int(finished) == 1:
            self.on_event("fleet", change, f"ended {summary.reason} on {self.host}")
            return True
        self.on_event("fleet", change, "lease lost before the ending was recorded")
        return False

    async def _retire(self) -> None:
        """Every loop has ended: export the batch when asked, then let it expire."""
        try:
            folder = await trio.to_thread.run_sync(
                partial(retire_batch, self.connection, self.config.export)
            )
        except OSError as exc:
            self.on_event("fleet", "fleet", f"export failed, the batch is kept: {exc}")
            return
        except FleetUnavailable as exc:
            if not exc.outage:
                raise
            return  # the next host (or control) to see the batch ended sets it
        if folder is not None:
            self.on_event("fleet", "fleet", f"exported the batch to {folder}")

    # -- heartbeat --------------------------------------------------------------

    async def _heartbeat(self) -> None:
        while True:
            try:
                await self._beat()
            except FleetUnavailable as exc:
                if not exc.outage:
                    raise
                self._quiet_until = trio.current_time() + self.config.lease
            await trio.sleep(self.config.heartbeat)

    async def _beat(self, *, finished: bool = False, interrupted: bool = False) -> None:
        """Read the server's clock, and report this host alive (or gone, when finished)."""
        server = await self._call(lambda _client: self.clock.sync())
        report = json.dumps(
            {
                "seen": server,
                "running": sorted(self.running),
                "max_parallel": self.max_parallel,
                "skew": round(host_clock() - server, 3),
                "finished": finished,
                "interrupted": interrupted,
            }
        )
        await self._call(partial(_report_heartbeat, self.keys.hosts, self.host, report))
        config = self.config
        await self._call(
            lambda client: prune_hosts(client, self.keys, server, config.lease, config.forget_hosts)
        )

    # -- calls to the server ----------------------------------------------------

    async def _call(self, call: Callable[[Any], _T]) -> _T:
        """One call in a worker thread (raises FleetUnavailable)."""
        return await trio.to_thread.run_sync(partial(self.connection.once, call))

    async def _call_retrying(self, call: Callable[[Any], _T]) -> _T:
        """A call that waits out an outage (in a worker thread; cancellable between tries)."""
        while True:
            try:
                return await self._call(call)
            except FleetUnavailable as exc:
                if not exc.outage:
                    raise
                await trio.sleep(0.25)


def stop_after(lease: float, heartbeat: float, grace: float) -> float:
    """Seconds without a renewal after which a host stops its copy of a loop.

    A heartbeat plus the executor's grace before the lease runs out, so the
    executor is gone (SIGTERM, grace, SIGKILL) before another host may claim
    the loop; never less than one heartbeat (``[fleet]`` makes sure of
    ``2 × heartbeat + grace < lease`` when a batch is submitted).
    """
    return max(heartbeat, lease - heartbeat - grace)


def _report_heartbeat(key: str, host: str, report: str, client: Any) -> None:
    client.hset(key, host, report)


async def open_worker_batch(connection: Connection) -> BatchInfo | None:
    """The submitted batch (None when nothing is submitted under the fleet's name)."""
    keys = connection.config.keys
    return await trio.to_thread.run_sync(
        partial(connection.once, lambda client: read_batch(client, keys))
    )
