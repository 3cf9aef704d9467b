"""Folding a run's summary and its loops' timelines into a :class:`BatchReport` (pure).

The timeline is the log of record: the report reads each loop's events from
the ``run.started`` of the run asked for up to the next run's start. The
summary, when there is one, adds what only the supervisor knew (its exit code,
the limiter's waits, loops that never started); when there is none (the
supervisor was killed) the report says so and is built from the timelines alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from .._state import (
    BreakerClosed,
    BreakerHalfOpen,
    BreakerOpened,
    BreakerReset,
    ContractEvent,
    Event,
    IterationFinished,
    IterationStarted,
    OtherEvent,
    ProtectViolation,
    RunStarted,
    RunStopped,
    SpendReset,
    StateCorrupt,
    StateRebuilt,
    VerifyRecorded,
    event_name,
)
from ._model import (
    ALERT,
    BAD,
    CIRCUIT,
    COOLDOWN,
    GOOD,
    INTEGRITY,
    ITERATION,
    LIMITER_WAIT,
    NEUTRAL,
    OTHER,
    PROVIDER_PAUSE,
    RECOVERY,
    VERIFY,
    WARN,
    BatchReport,
    IterationRow,
    LoopReport,
    Mark,
    Notice,
    Spend,
    Trip,
)

DONE = "done"
INTERRUPTED = "interrupted"
UNFINISHED = "unfinished"
# Endings after which the loop goes on by itself when the batch is run again.
_RERUN_ONLY = frozenset({INTERRUPTED, UNFINISHED, "provider-limit", "executor-failed"})
# A gap this long between one iteration and the next, with the circuit closed,
# was spent waiting for a rate-limit permit (the loop's own work between two
# iterations takes milliseconds).
LIMITER_GAP = 1.0


@attrs.frozen
class LoopFacts:
    """What the I/O side gathered about one loop, for the builder.

    Attributes:
        change: The change's name.
        root: The repository whose ``.forge`` holds its state.
        events: The change's whole timeline, decoded.
        where: Its branch or worktree, in words.
        files_changed: Paths changed in its working tree.
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


def epoch(ts: str | None) -> float | None:
    """A timeline's ``ts`` (ISO-8601 UTC) as epoch seconds, None when unreadable."""
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


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
    """
    segments = {(f.root, f.change): run_segment(f.events, run_id) for f in facts}
    summary_loops = _summary_loops(summary)
    starts = [
        t
        for events in segments.values()
        for t in (epoch(e.ts) for e in events[:1] if isinstance(e, RunStarted))
        if t is not None
    ]
    started_at = _number(summary.get("started_at")) if summary else None
    if started_at is None and starts:
        started_at = min(starts)
    base = started_at or 0.0
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
    # The summary's order is the declared one; loops it does not list follow by start.
    declared = {key: index for index, key in enumerate(summary_loops)}
    loops.sort(
        key=lambda loop: (
            declared.get((loop.root, loop.change), declared.get(("", loop.change), len(declared))),
            loop.marks[0].start if loop.marks else 0.0,
            loop.change,
        )
    )
    finished_at = _number(summary.get("finished_at")) if summary else None
    if finished_at is None:
        ends = [t for events in segments.values() for t in (epoch(e.ts) for e in events[-1:]) if t]
        finished_at = max(ends) if ends else None
    span = max([1.0] + [m.start + m.duration for loop in loops for m in loop.marks])
    if started_at is not None and finished_at is not None:
        span = max(span, finished_at - started_at)
    interrupted = bool(summary.get("interrupted")) if summary else False
    exit_code = summary.get("exit_code") if summary else None
    limiter = summary.get("limiter") if summary else None
    waits = limiter.get("waits") if isinstance(limiter, dict) else None
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
        interrupted=interrupted,
        span=span,
        loops=tuple(attrs.evolve(loop, position=index) for index, loop in enumerate(loops)),
        limiter=limiter if isinstance(limiter, dict) else None,
        limiter_waits=waits if isinstance(waits, int) else None,
        notes=tuple(notes),
    )
    return attrs.evolve(report, outcome=_outcome(report))


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
    if total and done == total:
        return f"ALL DONE — every one of {total} loop(s) finished"
    return f"NEEDS A PERSON — {escalated} of {total} loop(s) escalated, {done} done"


def _summary_loops(summary: Mapping[str, Any] | None) -> dict[tuple[str, str], dict[str, Any]]:
    found: dict[tuple[str, str], dict[str, Any]] = {}
    loops = summary.get("loops") if summary else None
    for entry in loops if isinstance(loops, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("change"), str):
            where = entry.get("dir") if isinstance(entry.get("dir"), str) else ""
            found[(str(where), entry["change"])] = entry
    return found


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class _Fold:
    """The walk over one loop's segment of the timeline."""

    def __init__(self, base: float) -> None:
        self.base = base
        self.marks: list[Mark] = []
        self.rows: list[IterationRow] = []
        self.trips: list[Trip] = []
        self.notices: list[Notice] = []
        self.spend = Spend()
        self.started: dict[int, float] = {}
        self.ready: float | None = None  # when the loop could have started its next iteration
        self.open_since: float | None = None  # the circuit opened, not yet half-open
        self.pending_cooldown: tuple[float, float, str] | None = None
        self.refused = False  # the provider refused: the next wait is its pause
        self.stopped: RunStopped | None = None
        self.circuit: str | None = None
        self.last_verify: str | None = None
        self.limiter_wait = 0.0
        self.paused = 0.0
        self.cooldown = 0.0

    def at(self, event: Event) -> float:
        moment = epoch(event.ts)
        return max(0.0, (moment if moment is not None else self.base) - self.base)

    def mark(
        self, kind: str, start: float, duration: float, label: str, tone: str, it: int | None = None
    ) -> None:
        self.marks.append(
            Mark(kind, round(start, 3), round(max(0.0, duration), 3), label, tone, it)
        )

    def walk(self, events: Sequence[Event]) -> None:
        for event in events:
            self.one(event)
        self.close_cooldown(None)

    def close_cooldown(self, until: float | None) -> None:
        if self.pending_cooldown is None:
            return
        start, planned, reason = self.pending_cooldown
        end = until if until is not None else start + planned
        self.mark(
            COOLDOWN, start, end - start, f"cooldown {_secs(end - start)} after: {reason}", WARN
        )
        self.cooldown += max(0.0, end - start)
        self.pending_cooldown = None

    def one(self, event: Event) -> None:
        now = self.at(event)
        if isinstance(event, RunStarted):
            self.ready = now
            self.circuit = event.circuit
        elif isinstance(event, IterationStarted):
            self.started[event.iteration] = now
            self.gap(now, event.iteration)
        elif isinstance(event, IterationFinished):
            self.iteration(event, now)
        elif isinstance(event, VerifyRecorded):
            self.last_verify = event.verdict
            if event.iteration is None:  # a hook's or a person's verify, not the loop's
                tone = GOOD if event.verdict == "PASS" else BAD
                label = (
                    f"verify {event.verdict} ({event.consecutive_failures} consecutive failures)"
                )
                self.mark(VERIFY, now, event.duration, label, tone)
        elif isinstance(event, BreakerOpened):
            self.opened(event, now)
        elif isinstance(event, BreakerHalfOpen):
            self.close_cooldown(now)
            self.open_since = None
            self.circuit = "half-open"
            self.ready = now
            self.mark(CIRCUIT, now, 0, "circuit HALF-OPEN: one probe iteration", WARN)
        elif isinstance(event, BreakerClosed):
            self.close_cooldown(now)
            self.circuit = "closed"
            self.mark(CIRCUIT, now, 0, f"circuit CLOSED: {event.reason}", GOOD)
        elif isinstance(event, ProtectViolation):
            harmed = "; ".join(_harm(h) for h in event.harmed) or "a protected path"
            self.mark(INTEGRITY, now, 0, f"integrity: {harmed}", BAD, event.iteration)
        elif isinstance(event, RunStopped):
            self.stopped = event
        elif isinstance(event, BreakerReset):
            self.mark(OTHER, now, 0, f"a person reset the {event.breaker}", NEUTRAL)
        elif isinstance(event, SpendReset):
            self.mark(OTHER, now, 0, "a person reset the spend totals", NEUTRAL)
        elif isinstance(event, StateCorrupt):
            self.mark(OTHER, now, 0, f"state file {event.file} was unreadable: moved aside", BAD)
        elif isinstance(event, StateRebuilt):
            self.mark(OTHER, now, 0, f"state file {event.file} rebuilt from the timeline", WARN)
        elif isinstance(event, ContractEvent | OtherEvent):
            self.named(event, now)

    def gap(self, now: float, number: int) -> None:
        refused, self.refused = self.refused, False
        if self.ready is None or self.open_since is not None:
            return
        waited = now - self.ready
        if waited < LIMITER_GAP:
            return
        if refused:
            self.mark(
                PROVIDER_PAUSE,
                self.ready,
                waited,
                f"waited {_secs(waited)} for the provider's reset",
                WARN,
                number,
            )
            self.paused += waited
        else:
            label = f"waited {_secs(waited)} for a rate-limit permit before iteration {number}"
            self.mark(LIMITER_WAIT, self.ready, waited, label, NEUTRAL, number)
            self.limiter_wait += waited

    def iteration(self, event: IterationFinished, now: float) -> None:
        start = self.started.get(event.iteration, max(0.0, now - event.duration))
        estimated = bool(event.extra.get("cost_estimated") or event.extra.get("estimated"))
        spend = Spend(event.tokens, event.tool_calls, event.cost_usd, estimated)
        self.spend = self.spend + spend
        note = None
        if event.rate_limit is not None or not event.judged:
            limit = event.rate_limit or {}
            which = f"{limit.get('status', 'limit')} {limit.get('kind') or ''}".strip()
            note = f"the provider refused: {which}"
            self.refused = True
        verify = event.verify
        parts = [f"iteration {event.iteration}", _exit_words(event)]
        if verify:
            parts.append(f"verify {verify}")
        if event.score is not None:
            parts.append(f"score {event.score:+d}")
        if event.done:
            parts.append("done")
        if event.trip:
            parts.append(f"tripped: {event.trip}")
        if event.trip or verify == "FAIL" or (event.exit not in (0, None)) or event.timed_out:
            tone = BAD
        elif event.done or verify == "PASS":
            tone = GOOD
        else:
            tone = NEUTRAL
        self.mark(ITERATION, start, now - start, ", ".join(parts), tone, event.iteration)
        if note is not None:
            label = f"iteration {event.iteration}: {note}"
            self.mark(PROVIDER_PAUSE, now, 0, label, WARN, event.iteration)
        self.rows.append(
            IterationRow(
                number=event.iteration,
                start=round(start, 3),
                duration=event.duration,
                exit=event.exit,
                verify=verify,
                score=event.score,
                window_score=event.window_score,
                risk=event.risk,
                trip=event.trip,
                spend=spend,
                judged=event.judged,
                note=note or event.error or event.failure or event.start_error,
            )
        )
        if event.circuit:
            self.circuit = event.circuit
        self.ready = now

    def opened(self, event: BreakerOpened, now: float) -> None:
        condition = str((event.evidence or {}).get("condition") or _condition(event.reason))
        if condition == "probe" and self.trips:
            # A failed probe repeats the trip that opened the circuit: name that one.
            condition = self.trips[-1].condition
        self.trips.append(
            Trip(
                condition,
                event.reason,
                event.opens,
                event.cooldown,
                event.escalated,
                event.evidence,
                event.ts,
            )
        )
        self.circuit = "open"
        if event.escalated:
            label = f"circuit OPEN for good (opening {event.opens}): {event.reason}; escalated"
            self.mark(CIRCUIT, now, 0, label, BAD)
            return
        label = f"circuit OPEN (opening {event.opens}): {event.reason}"
        self.mark(CIRCUIT, now, 0, label, BAD)
        self.pending_cooldown = (now, event.cooldown or 0.0, event.reason)
        self.open_since = now

    def named(self, event: ContractEvent | OtherEvent, now: float) -> None:
        name = event_name(event)
        text = _fields_text(event.fields)
        label = f"{name}: {text}" if text else name
        self.notices.append(Notice(name, text, event.ts))
        if name.startswith("alert."):
            tone = GOOD if name.endswith(("cleared", "resolved")) else BAD
            self.mark(ALERT, now, 0, label, tone)
        elif name.startswith("recovery"):
            self.mark(RECOVERY, now, 0, label, WARN)
        elif "pause" in name or name.startswith("provider"):
            length = next(
                (
                    float(v)
                    for k in ("seconds", "duration", "wait", "paused_for")
                    if isinstance(v := event.fields.get(k), int | float) and not isinstance(v, bool)
                ),
                0.0,
            )
            self.paused += length
            self.mark(PROVIDER_PAUSE, now, length, label, WARN)
            # The pause is on the strip: the idle time it covers is not a wait of its own.
            self.refused = False
            if self.ready is not None:
                self.ready = max(self.ready, now + length)
        else:
            self.mark(OTHER, now, 0, label, NEUTRAL)


def _loop(
    fact: LoopFacts,
    segment: Sequence[Event],
    entry: Mapping[str, Any] | None,
    base: float,
    *,
    root: str,
    max_files: int,
) -> LoopReport:
    fold = _Fold(base)
    fold.walk(segment)
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
    if entry is not None:
        reason = entry.get("reason")
        ending = reason if isinstance(reason, str) else ending
        detail = entry.get("detail") if isinstance(entry.get("detail"), str) else detail
        if isinstance(entry.get("iterations"), int):
            iterations = entry["iterations"]
        if isinstance(entry.get("max_iterations"), int):
            max_iterations = entry["max_iterations"]
    spend = fold.spend
    if not segment and entry is not None:
        recorded = entry.get("spend")
        money: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        spend = Spend(int(money.get("tokens") or 0), 0, float(money.get("cost_usd") or 0.0))
    # Every ending but done asks a person to look, except an interruption or a
    # killed batch: those go on when the batch runs again.
    escalated = ending not in (DONE, INTERRUPTED, UNFINISHED)
    files = tuple(fact.files_changed)
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
        output_tail=tuple(fact.output_tail),
        output_source=fact.output_source,
        limiter_wait=round(fold.limiter_wait, 3),
        paused=round(fold.paused, 3),
        cooldown=round(fold.cooldown, 3),
    )


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
        clear = [f"{prefix}forge timeline {change}", f"{prefix}forge circuit {change} --reset"]
    return (*clear, rerun)


def _condition(reason: str) -> str:
    head = reason.split(":", 1)[0].strip()
    return head if head in ("integrity", "verify", "budget", "stagnation") else "probe"


def evidence_lines(evidence: Mapping[str, Any] | None) -> list[str]:
    """A trip's evidence in words, one line a figure (the condition is said elsewhere)."""
    lines = []
    for key, value in (evidence or {}).items():
        if key == "condition":
            continue
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            shown = "; ".join(_harm(v) if "path" in v else _fields_text(v) for v in value)
        elif isinstance(value, dict):
            shown = _fields_text(value)
        else:
            shown = str(value)
        lines.append(f"{key.replace('_', ' ')}: {shown}")
    return lines


def _harm(harmed: Mapping[str, Any]) -> str:
    path = harmed.get("path", "?")
    words = f"{path} {harmed.get('harm', 'harmed')}"
    if harmed.get("protection"):
        words += f" (protected: {harmed['protection']})"
    if harmed.get("action"):
        words += f" — {harmed['action']}"
    return words


def _exit_words(event: IterationFinished) -> str:
    if event.start_error:
        return f"could not start: {event.start_error}"
    if event.timed_out:
        return "timed out"
    if event.signal is not None:
        return f"killed by signal {event.signal}"
    return f"exit {event.exit}" if event.exit is not None else "no exit code"


def _fields_text(fields: Mapping[str, Any], limit: int = 160) -> str:
    """A generic event's scalar fields, ``key=value`` (for kinds the report does not know)."""
    parts = []
    for key, value in fields.items():
        if key in ("run_id",) or isinstance(value, dict | list) or value is None:
            continue
        parts.append(f"{key}={value}")
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _secs(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def format_seconds(seconds: float) -> str:
    """Seconds as a person reads them: ``4.2s``, ``12m05s``, ``3h10m``."""
    return _secs(seconds)
