"""The status log: ``.forge/changes/<c>/status.md``, one section per iteration.

Written for a person reading along: each judged iteration of a supervised
loop adds a section (its number and time, the circuit's state, tasks
completed, the files modified, the test totals, the errors, the progress
score, the rate window's calls remaining, the stagnation risk, and any
recovery strategy, alert or output to review). At least the last ``[alerts]
status_log`` iterations are kept, fewer than twice as many (``_statusfile``:
sections are appended, and the file rewritten atomically, down to the last
``status_log``, only when it reaches twice that).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._stagnation import Signals


@attrs.frozen
class StatusEntry:
    """What one iteration's section shows."""

    iteration: int
    when: str
    circuit: str
    signals: Signals | None
    error: str | None
    score: int | None
    calls_remaining: int | None
    risk: str | None
    recovery: str = ""
    alerts: tuple[str, ...] = ()
    review: str | None = None
    # The errors themselves (failing tests, error lines), when they were read.
    errors: tuple[str, ...] = ()
    # The tool uses the agent was refused, in a few words each.
    denied: tuple[str, ...] = ()
    # The question it ended on instead of acting.
    question: str | None = None


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "none"


def render_section(entry: StatusEntry) -> str:
    """One iteration's section, in Markdown."""
    errors = _errors(entry)
    score = "not measured" if entry.score is None else f"{entry.score:+d}"
    calls = "unlimited" if entry.calls_remaining is None else str(entry.calls_remaining)
    lines = [
        f"## Iteration {entry.iteration} — {entry.when}",
        f"- Circuit state: {entry.circuit}",
        f"- Tasks completed: {_tasks(entry.signals)}",
        f"- Files modified: {_files(entry.signals)}",
        f"- Tests: {_tests(entry.signals)}",
        f"- Errors encountered: {'; '.join(errors) if errors else 'none'}",
        f"- Progress score: {score}",
        f"- API calls remaining: {calls}",
        f"- Stagnation risk: {(entry.risk or 'not measured').upper()}",
    ]
    optional = (
        ("Recovery strategy", entry.recovery),
        ("Alerts", "; ".join(entry.alerts)),
        ("Denied", "; ".join(entry.denied)),
        ("Question", entry.question),
        ("Review", entry.review),
    )
    lines.extend(f"- {label}: {value}" for label, value in optional if value)
    return "\n".join(lines) + "\n"


def _tasks(signals: Signals | None) -> str:
    if signals is None or not signals.tasks_measured:
        return "not measured"
    return str(signals.tasks_completed)


def _files(signals: Signals | None) -> str:
    if signals is None:
        return "not measured"
    files = _listed(signals.files)
    if signals.files_modified > len(signals.files):
        files += f" (and {signals.files_modified - len(signals.files)} more)"
    return files


def _tests(signals: Signals | None) -> str:
    if signals is None or signals.tests_passed + signals.tests_failed + signals.tests_skipped == 0:
        return "no report"
    return (
        f"{signals.tests_passed} passed, {signals.tests_failed} failed, "
        f"{signals.tests_skipped} skipped"
    )


def _errors(entry: StatusEntry) -> list[str]:
    """The errors the iteration met: its own lines, else its error, and the failing checks."""
    signals = entry.signals
    errors = list(entry.errors)
    if not errors and entry.error:
        errors.append(entry.error.strip().splitlines()[0][:200])
    if signals is not None and signals.tests_failed and not any("::" in e for e in errors):
        errors.append(f"{signals.tests_failed} failing test(s)")
    if signals is not None and signals.lint_errors:
        errors.append(f"{signals.lint_errors} lint error(s)")
    return errors


def render_log(change: str, sections: Sequence[str], keep: int) -> str:
    """The whole file: a heading, then the last ``keep`` sections."""
    kept = list(sections)[-keep:] if keep else []
    head = (
        f"# Status of {change}\n\n"
        f"One section per iteration, the latest last; at least the last {keep} are kept.\n"
    )
    return head + "".join(f"\n{section}" for section in kept)
