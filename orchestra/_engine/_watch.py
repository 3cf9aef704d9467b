"""What a person watching a supervised loop reads of it: the status log and the lessons file.

:class:`IterationWatch` renders each committed iteration into a section of
the status log (``status.md``) and, when the loop stalled, an entry in the
lessons file. It decides nothing: the alerts raised and cleared, the risk
they raise and the recovery strategy are :func:`decide`'s, read from the
committed state and verdict. The loop calls it after the commit, outside the
change's lock, in the same worker thread (off the event loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._monitor import (
    Lesson,
    StatusEntry,
    StatusLog,
    append_lesson,
    error_lines,
    render_section,
)
from .._policy import Policy
from .._redact import Redact
from .._state import STATUS_FILE, ChangePaths
from ._decide import LoopState, Verdict
from ._progress import LoopProgress
from ._record import IterationRecord
from ._recovery import in_force

if TYPE_CHECKING:
    from pathlib import Path


class IterationWatch:
    """The status log and the lessons file of one loop, rendered from what it committed.

    Args:
        paths: The change's folder (the status log lives there).
        workdir: The loop's working tree (the lessons file lives there).
        policy: The loop's policy (``[alerts] status_log``, ``[recovery] lessons``).
        active: The loop is supervised; an unsupervised one keeps neither file.
        progress: The loop's live progress (output to review is noted there).
        redact: Redaction for the error lines quoted from the iteration's log.
    """

    def __init__(
        self,
        paths: ChangePaths,
        workdir: Path,
        policy: Policy,
        *,
        active: bool,
        progress: LoopProgress,
        redact: Redact | None = None,
    ) -> None:
        self._paths = paths
        self._redact = redact
        # The lessons file lives in the loop's working tree: its agent reads it there.
        self._workdir = workdir
        self._policy = policy
        self._active = active
        self._progress = progress
        # Appended to, rewritten only past its bound: never the whole log per iteration.
        self._status = StatusLog(paths.folder / STATUS_FILE, paths.name, policy.alerts.status_log)

    def render(
        self,
        record: IterationRecord,
        before: LoopState,
        after: LoopState,
        verdict: Verdict,
        now_iso: str,
    ) -> None:
        """A committed iteration: a section of the status log, and a lesson if it stalled.

        Args:
            record: The iteration's record.
            before: The state the iteration ran in.
            after: The committed state after it.
            verdict: What :func:`decide` made of it.
            now_iso: When it was judged, as the state files write it.
        """
        if not self._active or not verdict.judged:
            return
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
            denied=record.denied,
            question=record.question,
        )
        self._status.add(render_section(entry))

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
