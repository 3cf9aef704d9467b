"""What a person watching a supervised loop sees of it, written as each iteration is judged.

:class:`IterationWatch` records the recovery strategy handed to the
iterations after an opening (``recovery.step``), and renders each judged
iteration into a section of the status log (``status.md``) and, when the loop
stalled, an entry in the lessons file. The alerts raised and cleared, and the
risk they raise, are :func:`decide`'s (``verdict.raised``, ``LoopState.alerts``):
the watch only shows them. Its methods run inside the change store's commit,
under the change's lock and off the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._circuit import CircuitState
from .._redact import Redact
from .._state import (
    ChangePaths,
    Event,
    RecoveryStep,
    atomic_write,
)
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
        # The status log's sections so far (read from the file once).
        self._sections: list[str] | None = None

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
    ) -> None:
        """An iteration was judged: a section of the status log, and a lesson if it stalled."""
        if not self._active or not verdict.judged:
            return
        if self._sections is None:
            self._sections = read_sections(self._paths.folder / STATUS_FILE)
        self._write_status(record, before, after, verdict, now_iso)
        if verdict.opened and _stalled(verdict):
            self._lesson(record, before, after, verdict, now_iso)

    # -- the pieces ----------------------------------------------------------------

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
            calls_remaining=record.calls.remaining if record.calls is not None else None,
            risk=None if verdict.ending is not None and record.done else after.risk,
            recovery=strategy.describe() if strategy is not None else "",
            alerts=tuple(f"{name} ({detail})" for name, detail in after.alerts),
            review=review,
            errors=tuple(self._errors(record)),
        )
        sections = self._sections if self._sections is not None else []
        sections.append(render_section(entry))
        del sections[:-keep]
        self._sections = sections
        text = render_log(self._paths.name, sections, keep)
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
