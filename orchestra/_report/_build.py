"""Folding a run's summary and its loops' timelines into a :class:`BatchReport` (pure).

The timeline is the log of record: the report reads each loop's events from
the ``run.started`` of the run asked for up to the next run's start. The
summary, when there is one, adds what only the supervisor knew (its exit code,
the limiter's waits, loops that never started); when there is none (the
supervisor was killed) the report says so and is built from the timelines alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._state import FORGE_LINES, FORGE_WRITES, Event, OtherEvent, RunStarted, iso_epoch, land_state
from ._fold import Fold, number
from ._model import BatchReport, LoopReport, Spend, Trip

DONE = "done"
INTERRUPTED = "interrupted"
UNFINISHED = "unfinished"
STOPPED = "stopped"  # a person stopped the loop (forge stop)
# Endings that ask no person to look: the loop goes on when the batch runs again.
NOT_ESCALATED = frozenset({DONE, INTERRUPTED, UNFINISHED, STOPPED})
# Endings after which the loop goes on by itself when the batch is run again.
_RERUN_ONLY = frozenset({INTERRUPTED, UNFINISHED, STOPPED, "provider-limit", "executor-failed"})


@attrs.frozen
class LoopFacts:
    """What the I/O side gathered about one loop, for the builder.

    Attributes:
        change: The change's name.
        root: The repository whose ``.forge`` holds its state.
        events: The change's whole timeline, decoded.
        where: Its branch or worktree, in words.
        files_changed: Paths changed in its working tree now (Forge's own left out).
        output_tail: The last lines of its last iteration's log.
        output_source: The log they come from.
    """

    change: str
    root: str
    events: Sequence[Event]
    where: str | None = None
    files_changed: Sequence[str] = ()
    output_tail: Sequence[str] = ()
    output_source: str | None = None
    forge_files: Sequence[str] = ()


def run_segment(events: Sequence[Event], run_id: str) -> list[Event]:
    """The events of one run: from its ``run.started`` up to another run's start."""
    segment: list[Event] = []
    inside = False
    for event in events:
        if isinstance(event, RunStarted):
            inside = event.run_id == run_id
        if not inside:
            continue
        other_run = getattr(event, "run_id", None)
        if isinstance(other_run, str) and other_run != run_id:
            continue  # a concurrent run's event (a person's forge run)
        segment.append(event)
    return segment


def build_report(
    run_id: str,
    summary: Mapping[str, Any] | None,
    facts: Sequence[LoopFacts],
    *,
    root: str,
    notes: Sequence[str] = (),
    max_files: int = 40,
    whole: bool = False,
) -> BatchReport:
    """The report of run ``run_id``.

    Args:
        run_id: The run.
        summary: Its ``summary.json``, or None when it left none.
        facts: Every loop that took part (and any other change: a change
            whose timeline has no start of this run and no summary entry is left out).
        root: The project's root.
        notes: Problems met while reading, shown in the report.
        max_files: How many changed files a loop lists before "and N more".
        whole: Every event of each timeline belongs to the run: a fleet batch,
            where each host that claims a loop starts a run of its own.
    """
    segments = {
        (f.root, f.change): list(f.events) if whole else run_segment(f.events, run_id)
        for f in facts
    }
    summary_loops = _summary_loops(summary)
    started_at = _started_at(summary, segments.values())
    loops = _loops(
        facts, segments, summary_loops, started_at or 0.0, root=root, max_files=max_files
    )
    finished_at = _finished_at(summary, segments.values())
    recorded = summary or {}
    limiter = recorded.get("limiter")
    waits = limiter.get("waits") if isinstance(limiter, dict) else None
    exit_code = recorded.get("exit_code")
    supervised = any(
        isinstance(event, RunStarted) and event.supervised
        for events in segments.values()
        for event in events[:1]
    )
    report = BatchReport(
        run_id=run_id,
        supervised=supervised or summary is not None,
        root=root,
        outcome="",
        from_summary=summary is not None,
        started_at=started_at,
        finished_at=finished_at,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        interrupted=bool(recorded.get("interrupted")),
        span=_span(loops, started_at, finished_at),
        loops=tuple(attrs.evolve(loop, position=index) for index, loop in enumerate(loops)),
        limiter=limiter if isinstance(limiter, dict) else None,
        limiter_waits=waits if isinstance(waits, int) else None,
        notes=tuple(notes),
        warnings=_warnings(recorded),
    )
    return attrs.evolve(report, outcome=_outcome(report))


def _warnings(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """The warnings the batch started with (none from a summary older than them)."""
    warnings = summary.get("warnings")
    if not isinstance(warnings, list):
        return ()
    return tuple(warning for warning in warnings if isinstance(warning, str))


def _started_at(
    summary: Mapping[str, Any] | None, segments: Iterable[Sequence[Event]]
) -> float | None:
    """When the batch started: the summary says, or else its first loop's start."""
    started_at = number(summary.get("started_at")) if summary else None
    if started_at is not None:
        return started_at
    starts = [
        t
        for events in segments
        for t in (iso_epoch(e.ts) for e in events[:1] if isinstance(e, RunStarted))
        if t is not None
    ]
    return min(starts) if starts else None


def _finished_at(
    summary: Mapping[str, Any] | None, segments: Iterable[Sequence[Event]]
) -> float | None:
    """When the batch ended: the summary says, or else its last event."""
    finished_at = number(summary.get("finished_at")) if summary else None
    if finished_at is not None:
        return finished_at
    ends = [t for events in segments for t in (iso_epoch(e.ts) for e in events[-1:]) if t]
    return max(ends) if ends else None


def _span(
    loops: Sequence[LoopReport], started_at: float | None, finished_at: float | None
) -> float:
    """The seconds the timeline strips cover."""
    if started_at is not None and finished_at is not None and finished_at > started_at:
        # The strip covers the batch as it ran, not a cooldown planned past its end.
        return finished_at - started_at
    return max([1.0] + [m.start + m.duration for loop in loops for m in loop.marks])


def _loops(
    facts: Sequence[LoopFacts],
    segments: Mapping[tuple[str, str], Sequence[Event]],
    summary_loops: Mapping[tuple[str, str], dict[str, Any]],
    base: float,
    *,
    root: str,
    max_files: int,
) -> list[LoopReport]:
    """Each loop of the run, in the summary's (the declared) order, then by start."""
    loops: list[LoopReport] = []
    for fact in facts:
        segment = segments[(fact.root, fact.change)]
        entry = summary_loops.get((fact.root, fact.change)) or summary_loops.get(("", fact.change))
        if not segment and entry is None:
            continue
        loops.append(_loop(fact, segment, entry, base, root=root, max_files=max_files))
    known = {(loop.root, loop.change) for loop in loops}
    for (where, change), entry in summary_loops.items():
        if where and (where, change) not in known:
            fact = LoopFacts(change=change, root=where, events=())
            loops.append(_loop(fact, [], entry, base, root=root, max_files=max_files))
    declared = {key: index for index, key in enumerate(summary_loops)}
    loops.sort(
        key=lambda loop: (
            declared.get((loop.root, loop.change), declared.get(("", loop.change), len(declared))),
            loop.marks[0].start if loop.marks else 0.0,
            loop.change,
        )
    )
    return loops


def _outcome(report: BatchReport) -> str:
    total = len(report.loops)
    done = sum(1 for loop in report.loops if loop.ending == DONE)
    escalated = len(report.escalations)
    if not report.from_summary and not report.supervised:
        running = sum(1 for loop in report.loops if loop.ending == UNFINISHED)
        still = f", {running} without an ending (still running, or killed)" if running else ""
        return (
            f"A forge run, not a supervised batch — {done} of {total} loop(s) done, "
            f"{escalated} escalated{still}"
        )
    if not report.from_summary:
        return (
            f"UNFINISHED — the supervisor left no summary (killed?); {done} of {total} "
            f"loop(s) done, {escalated} escalated, as the timelines tell"
        )
    if report.interrupted:
        return f"INTERRUPTED — {done} of {total} loop(s) done, {escalated} escalated"
    recovered = report.recovered
    after = f", {recovered} of them recovered after a trip" if recovered else ""
    if total and done == total:
        return f"ALL DONE — every one of {total} loop(s) finished{after}"
    return f"NEEDS A PERSON — {escalated} of {total} loop(s) escalated, {done} done{after}"


def _summary_loops(summary: Mapping[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    loops = summary.get("loops") if summary else None
    for entry in loops if isinstance(loops, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("change"), str):
            where = entry.get("dir") if isinstance(entry.get("dir"), str) else ""
            found[(str(where), entry["change"])] = entry
    return found


def _loop(
    fact: LoopFacts,
    segment: Sequence[Event],
    entry: Mapping[str, Any] | None,
    base: float,
    *,
    root: str,
    max_files: int,
) -> LoopReport:
    fold = Fold(base)
    fold.walk(segment)
    ending, gate, detail, iterations, max_iterations = _ending(fold, segment, entry)
    spend = fold.spend
    if not segment and entry is not None:
        spend = _summary_spend(entry)
    # Every ending but done asks a person to look, except an interruption, a
    # person's stop or a killed batch: those go on when the batch runs again.
    escalated = ending not in NOT_ESCALATED
    files = tuple(fact.files_changed)
    loop_files = tuple(f for f in fold.files if not is_forge_file(f, fact.forge_files))
    return LoopReport(
        change=fact.change,
        root=fact.root,
        ending=ending,
        escalated=escalated,
        iterations=iterations,
        max_iterations=max_iterations,
        gate=gate,
        detail=detail,
        trips=tuple(fold.trips),
        notices=tuple(fold.notices),
        marks=tuple(fold.marks),
        rows=tuple(fold.rows),
        spend=spend,
        circuit=fold.circuit if entry is None else (entry.get("circuit") or fold.circuit),
        verify=fold.last_verify,
        resume=resume_commands(fact.change, ending, gate, fold.trips, fact.root, root),
        where=fact.where,
        files_changed=files[:max_files],
        files_more=max(0, len(files) - max_files),
        files_loop=loop_files[:max_files],
        files_loop_more=max(0, len(loop_files) - max_files),
        files_loop_partial=fold.files_partial,
        output_tail=tuple(fact.output_tail),
        output_source=fact.output_source,
        verify_checks=tuple(fold.verify_checks),
        limiter_wait=round(fold.limiter_wait, 3),
        paused=round(fold.paused, 3),
        cooldown=round(fold.cooldown, 3),
        # The whole timeline: a change lands after the run that made it.
        land=land_state(_land_records(fact.events)),
    )


def _land_records(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The ``land.*`` events as records: this release decodes them as generic events."""
    return [
        {**event.fields, "event": event.name}
        for event in events
        if isinstance(event, OtherEvent) and event.name.startswith("land.")
    ]


FORGE_FILES = (FORGE_WRITES, FORGE_LINES)


def _ending(
    fold: Fold, segment: Sequence[Event], entry: Mapping[str, Any] | None
) -> tuple[str, str | None, str | None, int, int | None]:
    """The loop's ending, gate, detail, iterations and planned iterations.

    The timeline's ``run.stopped`` says, and the summary's entry, when there is
    one, has the last word.
    """
    stopped = fold.stopped
    ending = UNFINISHED
    gate = detail = None
    iterations = max((row.number for row in fold.rows), default=0)
    max_iterations = None
    started = next((e for e in segment if isinstance(e, RunStarted)), None)
    if started is not None:
        planned = started.plan.get("max_iterations")
        max_iterations = planned if isinstance(planned, int) else None
    if stopped is not None:
        ending, gate, detail, iterations = (
            stopped.reason,
            stopped.gate,
            stopped.detail,
            stopped.iterations,
        )
    if entry is None:
        return ending, gate, detail, iterations, max_iterations
    reason = entry.get("reason")
    ending = reason if isinstance(reason, str) else ending
    detail = entry.get("detail") if isinstance(entry.get("detail"), str) else detail
    if isinstance(entry.get("iterations"), int):
        iterations = entry["iterations"]
    if isinstance(entry.get("max_iterations"), int):
        max_iterations = entry["max_iterations"]
    return ending, gate, detail, iterations, max_iterations


def _summary_spend(entry: Mapping[str, Any]) -> Spend:
    """A loop's spend as the summary recorded it (a loop with no events in the run)."""
    recorded = entry.get("spend")
    money: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    cost = float(money.get("cost_usd") or 0.0)
    return Spend(int(money.get("tokens") or 0), 0, cost, reported=cost > 0)


def is_forge_file(path: str, own: Sequence[str] = ()) -> bool:
    """Whether ``path`` is one Forge writes itself (a forge-writes journal, the lessons file)."""
    name = path.rsplit("/", 1)[-1]
    return name in FORGE_FILES or path in own or path.startswith(".forge/")


def resume_commands(
    change: str, ending: str, gate: str | None, trips: Sequence[Trip], where: str, root: str
) -> tuple[str, ...]:
    """The commands that clear what stopped a loop and run it again, in order."""
    if ending == DONE:
        return ()
    prefix = "" if where in ("", root) else f"cd {where} && "
    rerun = f"forge supervise --only {change}"
    if ending in _RERUN_ONLY or ending == "worktree-failed":
        return (rerun,)
    if gate == "verify circuit-breaker":
        clear = [
            f"{prefix}forge verify --change {change}",
            f"{prefix}forge verify --change {change} --reset-breaker",
        ]
    elif gate == "spend budget":
        clear = [f"{prefix}forge spend {change}", f"{prefix}forge spend {change} --reset"]
    elif gate == "secscan":
        clear = [f"{prefix}forge secscan", f"{prefix}forge secscan waive FINGERPRINT --reason WHY"]
    elif gate == "forge state":
        clear = [f"{prefix}forge status", f"{prefix}forge timeline {change}"]
    else:  # the loop circuit (any trip), its iterations used up, a gate's error
        # The circuit's reset clears the verify breaker with it; a spent budget
        # is a decision of its own and is granted first.
        spent = bool(trips) and trips[-1].condition == "budget"
        clear = [
            f"{prefix}forge timeline {change}",
            *([f"{prefix}forge spend {change} --reset"] if spent else []),
            f"{prefix}forge circuit {change} --reset --reason WHY",
        ]
    return (*clear, rerun)
