"""Walking one loop's events of a run into the marks of its timeline strip (pure).

Each event becomes what a person sees on the strip: an iteration's bar, a
cooldown's band, a circuit's moment, an integrity restoration, an alert. What
the timeline does not record directly is inferred from the gaps between
events: a second or more idle before an iteration, with the circuit closed,
was a wait for a rate-limit permit, or for the provider's reset when the
provider had just refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._durations import brief_seconds
from .._state import (
    AlertCleared,
    AlertRaised,
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
    RecoveryStep,
    RunStarted,
    RunStopped,
    SpendReset,
    StateCorrupt,
    StateRebuilt,
    VerifyRecorded,
    event_name,
    iso_epoch,
)
from ._lines import (
    NOT_TRIED,
    event_words,
    fields_text,
    harm_words,
    iteration_label,
    refusal_words,
)
from ._model import (
    ALERT,
    BAD,
    BATCH_WIDE_ALERTS,
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
    IterationRow,
    Mark,
    Notice,
    Spend,
    Trip,
)

# A gap this long between one iteration and the next, with the circuit closed,
# was spent waiting for a rate-limit permit (the loop's own work between two
# iterations takes milliseconds).
LIMITER_GAP = 1.0
# How each event a person or a damaged file made reads on the strip.
_STATE_TONES: dict[type, str] = {
    BreakerReset: NEUTRAL,
    SpendReset: NEUTRAL,
    StateCorrupt: BAD,
    StateRebuilt: WARN,
}


def number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


class Fold:
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
        self.verify_checks: list[dict[str, Any]] = []  # the last verify's checks
        self.limiter_wait = 0.0
        self.paused = 0.0
        self.cooldown = 0.0
        self.last = 0.0  # the latest event's moment
        self.files: dict[str, None] = {}  # the paths the iterations changed, in order
        self.files_partial = False  # an iteration changed more files than it named

    def at(self, event: Event) -> float:
        moment = iso_epoch(event.ts)
        return max(0.0, (moment if moment is not None else self.base) - self.base)

    def mark(
        self, kind: str, start: float, duration: float, label: str, tone: str, it: int | None = None
    ) -> None:
        self.marks.append(
            Mark(kind, round(start, 3), round(max(0.0, duration), 3), label, tone, it)
        )

    def walk(self, events: Sequence[Event]) -> None:
        for event in events:
            self.last = max(self.last, self.at(event))
            self.one(event)
        # A timeline that ends inside a cooldown (the batch was killed): the
        # cooldown lasted at least until the last event, and no longer than planned.
        self.close_cooldown(None)

    def close_cooldown(self, until: float | None, *, stopped: bool = False) -> None:
        """End the pending cooldown at ``until`` (None: its planned end, or the last event)."""
        if self.pending_cooldown is None:
            return
        start, planned, reason = self.pending_cooldown
        if until is None:
            until = min(start + planned, max(self.last, start))
            stopped = until < start + planned
        end = max(start, until)
        label = f"cooldown {brief_seconds(end - start)} after: {reason}"
        if stopped and end - start < planned:
            label = (
                f"cooldown {brief_seconds(end - start)} of a planned "
                f"{brief_seconds(planned)} (the loop stopped) after: {reason}"
            )
        self.mark(COOLDOWN, start, end - start, label, WARN)
        self.cooldown += end - start
        self.pending_cooldown = None

    def one(self, event: Event) -> None:
        now = self.at(event)
        # Each family of events folds in its own method; the first that knows it wins.
        for fold in (self._loop_event, self._circuit_event, self._state_event):
            if fold(event, now):
                return
        self._notice_event(event, now)

    def _loop_event(self, event: Event, now: float) -> bool:
        """The loop's own course: its start, iterations, verifies and stop."""
        if isinstance(event, RunStarted):
            self.ready = now
            self.circuit = event.circuit
        elif isinstance(event, IterationStarted):
            self.started[event.iteration] = now
            self.gap(now, event.iteration)
        elif isinstance(event, IterationFinished):
            self.iteration(event, now)
        elif isinstance(event, VerifyRecorded):
            self.verified(event, now)
        elif isinstance(event, RunStopped):
            # The loop ended inside its cooldown: the cooldown ended with it.
            self.close_cooldown(now, stopped=True)
            self.stopped = event
        else:
            return False
        return True

    def verified(self, event: VerifyRecorded, now: float) -> None:
        self.last_verify = event.verdict
        self.verify_checks = [c for c in event.checks if isinstance(c, dict)]
        if event.iteration is None:  # a hook's or a person's verify, not the loop's
            tone = GOOD if event.verdict == "PASS" else BAD
            label = f"verify {event.verdict} ({event.consecutive_failures} consecutive failures)"
            self.mark(VERIFY, now, event.duration, label, tone)

    def _circuit_event(self, event: Event, now: float) -> bool:
        """The loop circuit's moves, and the integrity check's trips."""
        if isinstance(event, BreakerOpened):
            self.opened(event, now)
        elif isinstance(event, BreakerHalfOpen):
            self.close_cooldown(now)
            self.open_since = None
            self.circuit = "half-open"
            self.ready = now
            self.mark(CIRCUIT, now, 0, event_words(event), WARN)
        elif isinstance(event, BreakerClosed):
            self.close_cooldown(now)
            self.circuit = "closed"
            self.mark(CIRCUIT, now, 0, event_words(event), GOOD)
        elif isinstance(event, ProtectViolation):
            self.mark(INTEGRITY, now, 0, event_words(event), BAD, event.iteration)
        else:
            return False
        return True

    def _state_event(self, event: Event, now: float) -> bool:
        """What a person or a damaged file did to the change's state."""
        tone = _STATE_TONES.get(type(event))
        if tone is None:
            return False
        self.mark(OTHER, now, 0, event_words(event), tone)
        return True

    def _notice_event(self, event: Event, now: float) -> None:
        """Alerts, recovery steps, and the events this release shows by their name."""
        if isinstance(event, AlertRaised):
            text = event_words(event)
            self.notice(ALERT, event.kind, text, event, now, BAD, event.alert, event.iteration)
        elif isinstance(event, AlertCleared):
            text = event_words(event)
            self.notice(ALERT, event.kind, text, event, now, GOOD, event.alert, event.iteration)
        elif isinstance(event, RecoveryStep):
            # Handed out at the moment the loop escalated (its openings used up).
            tried = not event.escalated or event.step >= event.steps
            label = event_words(event)
            # The notice lists it among the steps tried, or apart, without the mark's note.
            text = label if tried else label.removesuffix(NOT_TRIED)
            self.notices.append(Notice(event.kind, text, event.ts, tried=tried))
            self.mark(RECOVERY, now, 0, label, WARN)
        elif isinstance(event, ContractEvent | OtherEvent):
            self.named(event, now)

    def notice(
        self,
        kind: str,
        name: str,
        text: str,
        event: Event,
        now: float,
        tone: str,
        alert: str | None = None,
        iteration: int | None = None,
    ) -> None:
        self.notices.append(Notice(name, text, event.ts, alert, iteration))
        if alert in BATCH_WIDE_ALERTS:
            return  # the batch's, not this loop's: the report says it once, for the batch
        self.mark(kind, now, 0, text, tone)

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
                f"waited {brief_seconds(waited)} for the provider's reset",
                WARN,
                number,
            )
            self.paused += waited
        else:
            label = (
                f"waited {brief_seconds(waited)} for a rate-limit permit before iteration {number}"
            )
            self.mark(LIMITER_WAIT, self.ready, waited, label, NEUTRAL, number)
            self.limiter_wait += waited

    def iteration(self, event: IterationFinished, now: float) -> None:
        start = self.started.get(event.iteration, max(0.0, now - event.duration))
        reported = event.cost_usd > 0 or event.cost_estimated
        spend = Spend(
            event.tokens, event.tool_calls, event.cost_usd, event.cost_estimated, reported
        )
        self.changed(event.signals or {})
        self.spend = self.spend + spend
        note = refusal_words(event)
        if note is not None:
            self.refused = True
        verify = event.verify
        label = iteration_label(event)
        self.mark(ITERATION, start, now - start, label, _iteration_tone(event), event.iteration)
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
                done=event.done,
            )
        )
        if event.circuit:
            self.circuit = event.circuit
        self.ready = now

    def changed(self, signals: Mapping[str, Any]) -> None:
        """The files an iteration changed, as its signals recorded them (the first 50)."""
        named = [f for f in signals.get("files") or () if isinstance(f, str)]
        self.files.update(dict.fromkeys(named))
        counted = signals.get("files_modified")
        if isinstance(counted, int) and counted > len(named):
            self.files_partial = True

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
        self.mark(CIRCUIT, now, 0, event_words(event), BAD)
        if event.escalated:
            return
        self.pending_cooldown = (now, event.cooldown or 0.0, event.reason)
        self.open_since = now

    def named(self, event: ContractEvent | OtherEvent, now: float) -> None:
        name = event_name(event)
        # Its own words where the release has them (a person's guidance, pause,
        # stop), else its name and plain fields.
        label = event_words(event)
        self.notices.append(Notice(name, label, event.ts))
        if name.startswith("alert."):
            tone = GOOD if name.endswith(("cleared", "resolved")) else BAD
            self.mark(ALERT, now, 0, label, tone)
        elif name.startswith("recovery"):
            self.mark(RECOVERY, now, 0, label, WARN)
        else:
            self.mark(OTHER, now, 0, label, NEUTRAL)


def in_time_order(marks: Sequence[Mark]) -> list[Mark]:
    """Marks by when they began (a wait is placed where it began, after the iteration)."""
    return sorted(marks, key=lambda mark: mark.start)


def trip_words(trip: Trip) -> str:
    """A trip in words, its condition said once: ``verify: 4 consecutive failures (opening 2)``."""
    return f"{_trip_head(trip)} (opening {trip.opens}{', escalated' if trip.escalated else ''})"


def _trip_head(trip: Trip) -> str:
    if trip.reason.startswith(f"{trip.condition}:"):
        return trip.reason
    return f"{trip.condition} — {trip.reason}"


def stop_words(trip: Trip, detail: str | None) -> str:
    """The last trip and the loop's ending detail as one line, nothing said twice.

    The ending's detail most often repeats the trip's reason and adds how many
    times the circuit opened: ``verify: 4 consecutive failures (opened 3 times;
    max_opens is exhausted; escalated)``. A detail of its own (a gate's) follows
    the trip.
    """
    escalated = "; escalated" if trip.escalated else ""
    if not detail or detail == trip.reason:
        return trip_words(trip)
    if detail.startswith(trip.reason):
        rest = detail[len(trip.reason) :].strip().removeprefix("(").removesuffix(")").strip()
        if rest:
            return f"{_trip_head(trip)} ({rest}{escalated})"
        return trip_words(trip)
    return f"{trip_words(trip)}; {detail}"


def unsaid_evidence(evidence: Mapping[str, Any] | None, said: str) -> list[str]:
    """A trip's evidence lines that ``said`` (its row) does not already hold."""
    return [line for line in evidence_lines(evidence) if line.split(": ", 1)[-1] not in said]


def batch_alert_lines(raised: Sequence[tuple[str, Notice]]) -> list[str]:
    """The batch-wide alerts in words, one line per alert, the loops that raised it named.

    ``calls-remaining: raised 3× (by a, b, c), still holding (0 of 6 calls left)``.
    ``raised`` holds each loop's name and its notice, in time order.
    """
    order: dict[str, list[tuple[str, Notice]]] = {}
    for change, notice in raised:
        if notice.alert is not None:
            order.setdefault(notice.alert, []).append((change, notice))
    lines = []
    for name, seen in order.items():
        raises = [n for _, n in seen if n.name == AlertRaised.kind]
        loops = list(dict.fromkeys(change for change, n in seen if n.name == AlertRaised.kind))
        count = f"raised {len(raises)}×" if len(raises) != 1 else "raised"
        shown = ", ".join(loops[:5]) + (f" and {len(loops) - 5} more" if len(loops) > 5 else "")
        cleared = seen[-1][1].name == AlertCleared.kind
        line = f"{name}: {count} (by {shown}), {'cleared' if cleared else 'still holding'}"
        last = raises[-1].text.split(": ", 1) if raises else []
        lines.append(f"{line} ({last[1]})" if len(last) == 2 and not cleared else line)
    return lines


def verify_evidence(checks: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """The last verify's checks in words, and the failing checks' lines.

    Returns ``("tests: exit 1 (failed); lint: exit 0", [lines])``: the lines are
    each failing check's failure lines, or the tail of its output when none
    looked like a failure, under a ``check:`` heading.
    """
    words = []
    lines: list[str] = []
    for check in checks:
        name = str(check.get("name", "?"))
        passed = check.get("passed")
        outcome = str(check.get("outcome") or ("passed" if passed else "failed"))
        words.append(f"{name}: {outcome}{' (failed)' if passed is False else ''}")
        shown = check.get("failures") or check.get("tail") or []
        if passed is False and isinstance(shown, list) and shown:
            lines.append(f"{name}:")
            lines += [f"  {line}" for line in shown if isinstance(line, str)]
    return "; ".join(words), lines


def alert_lines(notices: Sequence[Notice]) -> list[str]:
    """A loop's alerts, one line per alert: how often raised, when last, whether cleared.

    ``calls-remaining: raised 2×, last at iteration 3, cleared``. Alerts this
    release does not know by name keep their own line each.
    """
    order: dict[str, list[Notice]] = {}
    lines: list[str] = []
    for notice in notices:
        if notice.alert is None:
            lines.append(notice.text)
            continue
        order.setdefault(notice.alert, []).append(notice)
    for name, seen in order.items():
        raised = [n for n in seen if n.name == AlertRaised.kind]
        words = [f"raised {len(raised)}×" if len(raised) != 1 else "raised"]
        if raised and raised[-1].iteration is not None:
            words.append(f"{'last ' if len(raised) > 1 else ''}at iteration {raised[-1].iteration}")
        words.append("cleared" if seen[-1].name == AlertCleared.kind else "still holding")
        detail = raised[-1].text.split(": ", 1)[1] if raised and ": " in raised[-1].text else ""
        line = f"{name}: {', '.join(words)}"
        lines.append(
            f"{line} ({detail})" if detail and seen[-1].name != AlertCleared.kind else line
        )
    return lines


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
            shown = "; ".join(harm_words(v) if "path" in v else fields_text(v) for v in value)
        elif isinstance(value, dict):
            shown = fields_text(value)
        else:
            shown = str(value)
        lines.append(f"{key.replace('_', ' ')}: {shown}")
    return lines


def _iteration_tone(event: IterationFinished) -> str:
    verify = event.verify
    if event.trip or verify == "FAIL" or (event.exit not in (0, None)) or event.timed_out:
        return BAD
    if event.done or verify == "PASS":
        return GOOD
    return NEUTRAL
