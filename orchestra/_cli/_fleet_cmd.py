"""``forge fleet``: submit a batch to a Redis server, work it from several hosts, watch it."""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from .._durations import format_duration
from .._engine import DONE, new_run_id
from .._errors import EXIT_ESCALATE, EXIT_INTERRUPTED, EXIT_OK, ConfigError, UsageError
from .._fleet import (
    BatchInfo,
    Connection,
    FleetConfig,
    FleetStatus,
    LoopSpec,
    Worker,
    batch_record,
    default_host,
    export_state,
    export_summary,
    fleet_status,
    host_clock,
    open_worker_batch,
    submit,
)
from .._policy import LoadedPolicy, policy_as_dict
from .._ratelimit import LimiterStatistics
from .._report import fleet_run_id
from .._state import STATE_DIR, LoopControls, Request, atomic_write
from .._supervise import Dashboard, LoopSetup, limiter_line, prepare, resolve_loops
from ._common import policy_from, project_from
from ._console import Output
from ._fleet_notify import notify_batch_end, watch_lost_hosts
from ._trio_run import run_interruptible

# A git URL (scheme://… or user@host:…) is kept as it is; anything else is a path.
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/\s]+@[^/\s]+:")


def _config(loaded: LoadedPolicy) -> FleetConfig:
    return FleetConfig.from_policy(loaded.policy.fleet)


# -- forge fleet submit ---------------------------------------------------------


def submit_cmd(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    batch_path = Path(args.batch).resolve()
    if not batch_path.is_file():
        raise UsageError(f"--batch {args.batch}: no such file")
    loaded = policy_from(project, args=args, overlays=[batch_path])
    setups = resolve_loops(loaded, project.root)
    if not setups:
        raise UsageError(
            "no loops to submit", hint=f"declare [[loop]] tables in {args.batch} or forge.toml"
        )
    seen: set[str] = set()
    for setup in setups:
        if setup.change in seen:
            raise UsageError(
                f'two loops of the batch work change "{setup.change}"',
                hint="a fleet keeps one state per change name: give each loop its own change",
            )
        seen.add(setup.change)
    # Every executor and rules file must resolve before anything is enqueued.
    prepare([s for s in setups if not s.repo], new_run_id())
    config = _config(loaded)
    _check_grace_fits(config, setups, batch_path)
    specs = [
        LoopSpec(
            change=setup.change,
            policy=policy_as_dict(setup.policy),
            dir="" if setup.repo else str(setup.root),
            repo=_repo_url(setup.repo, batch_path.parent),
            ref=setup.ref,
            push=setup.push,
            worktree=setup.worktree,
            base=setup.base,
        )
        for setup in setups
    ]
    connection = Connection(config)
    try:
        server_time = connection.server_time()
        rate = loaded.policy.rate_limit
        batch = BatchInfo(
            loops=len(specs),
            calls=rate.calls,
            window=rate.window.seconds,
            warn_at=rate.warn_at,
            submitted_at=server_time,
            source=str(batch_path),
        )
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(server_time))
        connection.once(
            lambda client: submit(
                client, config.keys, batch, specs, stamp, replace=bool(args.replace)
            )
        )
    finally:
        connection.close()
    out.line(
        f'fleet "{config.name}": submitted {len(specs)} loop(s) — '
        f"rate limit {batch.calls} per {batch.window:g}s for the whole fleet"
    )
    out.line("next: forge fleet work   (on each host)   ·   forge fleet status", style="dim")
    if out.json_mode:
        out.document(
            {"name": config.name, "loops": [s.change for s in specs], "batch": batch.to_json()}
        )
    return EXIT_OK


def _check_grace_fits(config: FleetConfig, setups: list[LoopSetup], batch: Path) -> None:
    """``2 × heartbeat + grace < lease`` for every loop, or the fleet cannot fence it.

    A host that cannot renew a lease stops its executor a heartbeat plus the
    executor's grace before the lease runs out, and must have renewed at least
    once a heartbeat before that.
    """
    problems = [
        f'loop "{setup.change}": run.grace {setup.policy.run.grace.seconds:g}s + '
        f"2 × fleet.heartbeat {config.heartbeat:g}s is not shorter than "
        f"fleet.lease {config.lease:g}s"
        for setup in setups
        if 2 * config.heartbeat + setup.policy.run.grace.seconds >= config.lease
    ]
    if problems:
        raise ConfigError(
            f"{batch}: the fleet's lease is too short for its loops",
            problems=problems,
            hint="lengthen [fleet] lease, or shorten [fleet] heartbeat or [run] grace: a "
            "host that cannot reach the server must stop its executor (grace included) "
            "before another host may take the loop over",
        )


def _repo_url(repo: str, base: Path) -> str:
    if not repo or _URL.match(repo) or Path(repo).is_absolute():
        return repo
    return str((base / repo).resolve())


# -- forge fleet work -----------------------------------------------------------


def work_cmd(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    loaded = policy_from(project, args=args)
    config = _config(loaded)
    export = getattr(args, "export", None) or config.export
    if export:
        # Written before the ended batch expires; a relative folder is the project's.
        folder = (project.root / Path(export).expanduser()).resolve()
        config = attrs.evolve(config, export=str(folder))
    host = getattr(args, "host", None) or default_host()
    max_parallel = (
        getattr(args, "max_parallel", None)
        or loaded.policy.supervise.max_parallel
        or os.cpu_count()
        or 1
    )
    cache_flag = getattr(args, "cache", None)
    cache = Path(cache_flag).resolve() if cache_flag else _default_cache()
    printing = threading.Lock()
    dashboard: list[Dashboard] = []  # set once the worker exists, on a terminal

    def say(text: str, change: str | None = None, kind: str = "fleet") -> None:
        if dashboard:
            dashboard[0].event(kind, change or "fleet", text)
            return
        with printing:
            out.line(text if change is None else f"{change}: {text}")

    def on_outage(reason: str | None) -> None:
        if reason is None:
            say("fleet: the Redis server answers again")
        else:
            say(f"fleet: the Redis server cannot be reached ({reason}); no executor starts")

    def on_limiter(kind: str, stats: LimiterStatistics) -> None:
        if kind in ("warn", "wait", "pause", "unavailable"):
            # The pause's end is on the limiter's wall clock: the server's.
            now = workers[0].clock() if workers else host_clock()
            say(f"{kind}: {limiter_line(stats, now)}", "limiter", "limiter")

    def on_event(kind: str, change: str, text: str) -> None:
        say(text, change, kind)

    connection = Connection(config, on_outage=on_outage)
    started = host_clock()
    workers: list[Worker] = []
    interrupted = False
    try:
        batch = run_interruptible(open_worker_batch, connection)
        if batch is None:
            raise UsageError(
                f'nothing is submitted under the fleet name "{config.name}"',
                hint="run forge fleet submit --batch FILE first (same [fleet] name and server)",
            )
        say(
            f'fleet "{config.name}": {host} works up to {max_parallel} loop(s) at once '
            f"(lease {config.lease:g}s, heartbeat {config.heartbeat:g}s)"
        )
        worker = Worker(
            config,
            batch,
            connection=connection,
            host=host,
            max_parallel=max_parallel,
            cache=cache,
            on_event=on_event,
            on_limiter=on_limiter,
        )
        workers.append(worker)
        if out.live and not out.json_mode:
            dashboard.append(Dashboard(out.console, worker.shown, worker.limiter))
        # A surviving host tells of a lost one (the first to see it: once per host).
        watch = partial(
            watch_lost_hosts,
            connection,
            project.root,
            loaded.policy,
            fleet_run_id(config.name, batch.submitted_at),
            host,
            say,
        )
        try:
            run_interruptible(_work, worker, dashboard[0] if dashboard else None, watch)
        except KeyboardInterrupt:
            interrupted = True
        dashboard.clear()
        if interrupted:
            out.line(
                "fleet work: INTERRUPTED — this host's loops were given back to the fleet "
                "(their state is on the server; another host goes on with them)"
            )
            return EXIT_INTERRUPTED
        status = fleet_status(connection)
        # The batch has ended: the first host to see it writes its report and tells [notify].
        notify_batch_end(connection, project.root, loaded.policy, lambda text: out.note(text))
    finally:
        connection.close()
    summary = _summary(status, host, worker.result.lost, started)
    path = project.root / STATE_DIR / "runs" / new_run_id() / "summary.json"
    atomic_write(path, (json.dumps(summary, indent=2) + "\n").encode())
    _print_loops(status, out)
    out.line(f"summary: {path}", style="dim")
    if out.json_mode:
        out.document(summary)
    all_done = all(loop.get("reason") == DONE for loop in status.loops.values())
    return EXIT_OK if all_done else EXIT_ESCALATE


async def _work(
    worker: Worker, dashboard: Dashboard | None, watch: Callable[[], Awaitable[None]]
) -> None:
    async with trio.open_nursery() as nursery:
        if dashboard is not None:
            nursery.start_soon(dashboard.run)
        nursery.start_soon(watch)
        await worker.run()
        nursery.cancel_scope.cancel()


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "forge" / "fleet"


def _summary(status: FleetStatus, host: str, lost: list[str], started: float) -> dict[str, Any]:
    return {
        "fleet": status.name,
        "host": host,
        "started_at": started,
        "finished_at": host_clock(),
        "lost_here": lost,
        **status.as_json(),
    }


def _print_loops(status: FleetStatus, out: Output) -> None:
    if not status.loops:
        return
    out.line()
    width = max(len(change) for change in status.loops)
    for change, loop in sorted(status.loops.items()):
        state = str(loop.get("state"))
        reason = loop.get("reason") or state
        where = f"on {loop['host']}" if loop.get("host") else ""
        if state == "waiting":
            reason = "waiting for takeover"
            where = f"its host {loop['host']} was lost" if loop.get("host") else ""
        iterations = loop.get("iterations")
        count = f"{iterations} iteration(s)" if iterations is not None else ""
        said = " ".join(part for part in (count, where) if part)
        detail = f" — {loop['detail']}" if loop.get("detail") else ""
        style = "green" if reason == DONE else ("red" if state == "escalated" else None)
        out.styled(
            (f"{change.ljust(width)}  ", "bold"),
            (f"{reason:<22}", style),
            (f"{said}{detail}", None),
        )
        if loop.get("held"):
            out.line(f"  {' ' * width}{_held_line(change, loop)}", style="yellow")


def _held_line(change: str, loop: dict[str, Any]) -> str:
    """``paused by a person (alice@laptop, since …): why — forge resume C --fleet …``."""
    paused = loop.get("paused")
    if paused is None:
        return f"held: {loop['held']} — forge resume {change} --fleet lets it go on"
    controls = LoopControls(paused=Request(**paused))
    return controls.held_line(f"forge resume {change} --fleet") or ""


# -- forge fleet status ---------------------------------------------------------


def status_cmd(args: argparse.Namespace, out: Output) -> int:
    count = getattr(args, "count", None)
    if count is not None and not getattr(args, "watch", False):
        raise UsageError("--count: only with --watch", hint="forge fleet status --watch --count N")
    if count is not None and count < 1:
        raise UsageError(f"--count {count}: expected a number of frames, 1 or more")
    project = project_from(args)
    config = _config(policy_from(project, args=args))
    connection = Connection(config)
    try:
        if getattr(args, "watch", False):
            from ._fleet_watch import watch

            run_interruptible(partial(watch, connection, out, count=args.count or 0))
            return EXIT_OK
        status = fleet_status(connection)
    finally:
        connection.close()
    if out.json_mode:
        out.document(status.as_json())
        return EXIT_OK
    if status.batch is None:
        out.line(f'fleet "{config.name}": nothing submitted')
        return EXIT_OK
    counts = status.counts()
    out.line(
        f'fleet "{config.name}": {len(status.loops)} loop(s) — '
        + ", ".join(f"{counts[state]} {state}" for state in counts)
    )
    limiter = status.limiter
    if limiter is not None:
        if limiter["unavailable"]:
            out.line(f"rate limit: UNAVAILABLE — {limiter['unavailable']}")
        else:
            line = (
                f"rate limit: {limiter['used']}/{limiter['calls']} calls in the last "
                f"{limiter['window']:g}s (the whole fleet)"
            )
            if limiter["next_free_in"] > 0:
                line += f" · next permit in {limiter['next_free_in']:.1f}s"
            out.line(line)
    out.line("hosts:")
    if not status.hosts:
        out.line("  (none has reported yet)")
    for host, info in sorted(status.hosts.items()):
        state = info.get("state")
        if state == "working":
            running = ", ".join(info["running"]) or "idle"
        elif state == "lost":
            running = "LOST (no heartbeat for longer than a lease)"
        else:
            running = str(state)
        skew = info.get("clock_skew")
        clock = f" · clock {skew:+.0f}s from the server's" if skew and abs(skew) >= 1 else ""
        out.line(
            f"  {host}: last heartbeat {info['last_heartbeat_ago']:.1f}s ago · {running}{clock}"
        )
    _print_loops(status, out)
    for change, loop in sorted(status.loops.items()):
        if loop.get("state") == "running" and loop.get("lease") != "held":
            out.line(f"note: {change}: lease {loop.get('lease')}", style="yellow")
    if status.expires_in is not None:
        out.line(
            f"the batch has ended: its keys expire in {format_duration(status.expires_in)} "
            "([fleet] keep; forge fleet export --to DIR keeps it as files)"
        )
    return EXIT_OK


# -- forge fleet export ---------------------------------------------------------


def export_cmd(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    config = _config(policy_from(project, args=args))
    target = Path(args.to).resolve() if args.to else project.root
    connection = Connection(config)
    try:
        changes = export_state(connection, target)
        record = batch_record(connection)
    finally:
        connection.close()
    folder = target / STATE_DIR / "changes"
    out.line(f'fleet "{config.name}": exported {len(changes)} change(s) to {folder}')
    # The batch's summary beside them: forge report run there finds the batch.
    summary = None if record is None else export_summary(record, target)
    if summary is not None:
        out.line(f"summary: {summary}   (forge report --from {target})", style="dim")
    if out.json_mode:
        out.document(
            {
                "name": config.name,
                "folder": str(folder),
                "changes": changes,
                "summary": None if summary is None else str(summary),
            }
        )
    return EXIT_OK
