"""What a person watching a supervised loop sees of it, written as each iteration is judged.

:class:`IterationWatch` turns each judged iteration into the alerts raised and
cleared (``alert.raised`` / ``alert.cleared``), the recovery strategy handed to
the iterations after an opening (``recovery.step``), a section of the status
log (``status.md``) and, when the loop stalled, an entry in the lessons file.
Its methods run inside the change store's commit, under the change's lock
and off the event loop; the events they return go into the same timeline
append as the iteration's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._circuit import CircuitState
from .._redact import Redact
from .._stagnation import Signals
from .._state import (
    LOOP_CIRCUIT,
    AlertCleared,
    AlertRaised,
    BreakerReset,
    ChangePaths,
    Event,
    IterationFinished,
    RecoveryStep,
    atomic_write,
    read_timeline,
)
from ._alerts import CallsLeft, evaluate, risk_with_alerts
from ._decide import LoopState, Verdict
from ._errorlines import error_lines
from ._lessons import Lesson, append_lesson
from ._progress import LoopProgress
from ._record import IterationRecord
from ._recovery import in_force
from ._statuslog import STATUS_FILE, StatusEntry, read_sections, render_log, render_section

if TYPE_CHECKING:
    from pathlib import Path

    from ._loop import LoopSettings

# Iterations the alerts look back on (the longest threshold is far shorter).
_KEPT = 200


class IterationWatch:
    """Alerts, recovery steps, the status log and lessons for one supervised loop."""

    def __init__(
        self,
        paths: ChangePaths,
        workdir: Path,
        settings: LoopSettings,
        run_id: str,
        progress: LoopProgress,
        redact: Redact | None = None,
    ) -> None:
        self._paths = paths
        self._redact = redact
        # The lessons file lives in the loop's working tree: its agent reads it there.
        self._workdir = workdir
        self._policy = settings.policy
        self._active = settings.rules.supervised
        self._run_id = run_id
        self._progress = progress
        self._history: list[Signals] | None = None
        self._raised: dict[str, str] = {}
        self._sections: list[str] = []
        # The last judged iteration's stagnation risk, raised by the alerts holding.
        self.risk: str | None = None
        # The rate window's calls, read on the event loop just before the commit.
        self.calls: CallsLeft | None = None

    def opened(self, circuit: CircuitState, iteration: int | None) -> list[Event]:
        """The circuit just opened: the strategy the iterations after it are given."""
        strategy = in_force(circuit, self._policy) if self._active else None
        if strategy is None:
            return []
        self._progress.recovery = "" if circuit.escalated else strategy.describe()
        return [
            RecoveryStep(
                run_id=self._run_id,
                iteration=iteration,
                trip_kind=strategy.kind,
                step=strategy.step,
                steps=strategy.steps,
                strategy=strategy.text,
                escalated=circuit.escalated,
            )
        ]

    def judged(
        self,
        record: IterationRecord,
        before: LoopState,
        after: LoopState,
        verdict: Verdict,
        now_iso: str,
    ) -> list[Event]:
        """An iteration was judged: alerts, a status section, maybe a lesson."""
        self._progress.raised = []
        self.risk = None
        if not self._active or not verdict.judged:
            return []
        history = self._seeded()
        if record.signals is not None:
            history.append(record.signals)
            del history[:-_KEPT]
        holding = evaluate(history, self._policy, calls=self.calls)
        events: list[Event] = []
        for name, alert in sorted(holding.items()):
            if name not in self._raised:
                events.append(
                    AlertRaised(
                        run_id=self._run_id,
                        iteration=record.iteration,
                        alert=name,
                        detail=alert.detail,
                        value=alert.value,
                        threshold=alert.threshold,
                    )
                )
        for name in sorted(set(self._raised) - set(holding)):
            events.append(AlertCleared(run_id=self._run_id, iteration=record.iteration, alert=name))
        self._progress.raised = [
            (name, alert.detail)
            for name, alert in sorted(holding.items())
            if name not in self._raised
        ]
        self._raised = {name: alert.detail for name, alert in holding.items()}
        self._progress.alerts = sorted(holding)
        assessment = verdict.assessment
        self.risk = risk_with_alerts(assessment.risk if assessment else None, holding)
        self._write_status(record, before, after, verdict, now_iso)
        if verdict.opened and _stalled(verdict):
            self._lesson(record, before, after, verdict, now_iso)
        return events

    # -- the pieces ----------------------------------------------------------------

    def _seeded(self) -> list[Signals]:
        """The iterations so far, and the alerts raised, from the timeline (read once)."""
        if self._history is not None:
            return self._history
        history: list[Signals] = []
        raised: dict[str, str] = {}
        for event in read_timeline(self._paths.timeline).typed():
            if isinstance(event, BreakerReset) and event.breaker == LOOP_CIRCUIT:
                history = []
            elif isinstance(event, IterationFinished) and event.signals and event.judged:
                try:
                    history.append(Signals.from_record(event.signals))
                except ValueError:
                    continue
            elif isinstance(event, AlertRaised):
                raised[event.alert] = event.detail
            elif isinstance(event, AlertCleared):
                raised.pop(event.alert, None)
        self._history = history[-_KEPT:]
        self._raised = raised
        self._sections = read_sections(self._paths.folder / STATUS_FILE)
        return self._history

    def _write_status(
        self,
        record: IterationRecord,
        before: LoopState,
        after: LoopState,
        verdict: Verdict,
        now_iso: str,
    ) -> None:
        keep = self._policy.alerts.status_log
        if keep == 0:
            return
        assessment = verdict.assessment
        strategy = in_force(before.circuit, self._policy)  # the one this iteration ran with
        review = None
        if record.parse_note:
            review = f"the output fell back to plain text ({record.parse_note}); see {record.log}"
            self._progress.review.append(f"iteration {record.iteration}: {review}")
        entry = StatusEntry(
            iteration=record.iteration,
            when=now_iso,
            circuit=_circuit_text(before, after, verdict),
            signals=record.signals,
            error=record.failure or record.error,
            score=assessment.score if assessment else None,
            calls_remaining=self.calls.remaining if self.calls is not None else None,
            risk=None if verdict.ending is not None and record.done else self.risk,
            recovery=strategy.describe() if strategy is not None else "",
            alerts=tuple(f"{name} ({detail})" for name, detail in sorted(self._raised.items())),
            review=review,
            errors=tuple(self._errors(record)),
        )
        self._sections.append(render_section(entry))
        del self._sections[:-keep]
        text = render_log(self._paths.name, self._sections, keep)
        atomic_write(self._paths.folder / STATUS_FILE, text.encode("utf-8"), ordinary=True)

    def _errors(self, record: IterationRecord) -> list[str]:
        signals = record.signals
        report = None
        if signals is not None and signals.tests_failed:
            report = self._workdir / self._policy.stagnation.junit_xml
        return error_lines(
            reported=record.error,
            log=self._paths.folder / record.log if record.log else None,
            failed=record.failed,
            report=report,
            redact=self._redact,
        )

    def _probe_evidence(self, record: IterationRecord, verdict: Verdict) -> dict[str, object]:
        """What a failed probe measured: its score, files, tasks, tests and error."""
        evidence: dict[str, object] = {}
        if verdict.assessment is not None:
            evidence["score"] = verdict.assessment.score
        signals = record.signals
        if signals is not None:
            evidence["files_modified"] = signals.files_modified
            if signals.tasks_measured:
                evidence["tasks_completed"] = signals.tasks_completed
            if signals.tests_passed or signals.tests_failed:
                evidence["tests_failed"] = signals.tests_failed
        if record.failure:
            evidence["ended"] = record.failure
        errors = self._errors(record)
        if errors:
            evidence["error"] = errors[0]
        return evidence

    def _lesson(
        self,
        record: IterationRecord,
        before: LoopState,
        after: LoopState,
        verdict: Verdict,
        now_iso: str,
    ) -> None:
        target = self._policy.recovery.lessons
        if not target:
            return
        circuit = after.circuit
        tried = in_force(before.circuit, self._policy)
        following = in_force(circuit, self._policy)
        if circuit.escalated:
            outcome = f"escalated to a person: {circuit.reason}"
        elif following is not None:
            outcome = f"circuit opened; next strategy: {following.describe()}"
        else:
            outcome = "circuit opened; cooling down"
        found = verdict.trip
        kind = circuit.recovery_type or (
            str(found.evidence.get("detector")) if found else "no-progress"
        )
        lesson = Lesson(
            when=now_iso,
            change=self._paths.name,
            iteration=record.iteration,
            kind=kind,
            reason=circuit.reason or "",
            evidence=dict(found.evidence) if found else self._probe_evidence(record, verdict),
            tried=tried.describe() if tried is not None else "none (the loop's own approach)",
            outcome=outcome,
        )
        append_lesson(self._paths.root, self._workdir, target, lesson)


def _circuit_text(before: LoopState, after: LoopState, verdict: Verdict) -> str:
    """The state the iteration ran in, and what its judgement did to the circuit."""
    ran_in = before.circuit.state.upper()
    if verdict.opened and after.circuit.escalated:
        return f"{ran_in} (then opened for good: {after.circuit.reason})"
    if verdict.opened:
        return f"{ran_in} (then opened: {after.circuit.reason})"
    if verdict.closed:
        return f"{ran_in} (the probe closed it)"
    return ran_in


def _stalled(verdict: Verdict) -> bool:
    """Whether an opening was for stagnation (a failed probe counts: it made no progress)."""
    found = verdict.trip
    return found is None or found.condition in ("stagnation", "alert")
