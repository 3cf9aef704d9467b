"""What one iteration did, measured by Forge (never taken from the agent's word)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

# What varies between two runs of the same failure: stripped before hashing.
_ERROR_NOISE = [
    (
        re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
        "<ts>",
    ),
    # Absolute paths only: a "/" at the start or after a space, quote or bracket.
    (re.compile(r"(?<![^\s'\"(\[=])(?:/[^\s/:'\"()]+)+"), "<path>"),
    (re.compile(r"\b[A-Za-z]:\\[^\s:'\"]+"), "<path>"),  # Windows paths
    (re.compile(r"\b[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    # Commit ids and hashes: hex runs with a letter in them (all digits is a number).
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{7,64}\b"), "<hex>"),
    (re.compile(r"\bline \d+\b|:\d+(?::\d+)?\b"), "<line>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
]


# A line that reads as an error, among a failed process's last lines.
_ERROR_LINE = re.compile(
    r"(error|exception|traceback|fatal|failed|panic|denied|not found|no such)", re.IGNORECASE
)


def error_lines_of(lines: list[str]) -> list[str]:
    """Of a failed process's last output lines, those that read as errors (else all of them).

    The output interleaves stdout and stderr in whatever order the pipes were
    read; the error lines alone are the same from one failing iteration to the
    next, and they are what a person wants to see.
    """
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    return errors or [line for line in lines if line.strip()]


def error_fingerprint(text: str | None) -> str | None:
    """A short hash of an error with numbers, ids, timestamps, paths and line numbers stripped.

    Two iterations failing the same way get the same fingerprint even when the
    line numbers, temporary paths or timings in their messages differ.
    """
    if not text or not text.strip():
        return None
    normalized = text.strip()
    for pattern, replacement in _ERROR_NOISE:
        normalized = pattern.sub(replacement, normalized)
    return hashlib.sha256(normalized.strip().encode()).hexdigest()[:16]


@attrs.frozen
class Signals:
    """One iteration's signals, as recorded in its ``iteration.finished`` event.

    Attributes:
        files_modified: Files whose content changed (created and deleted included).
        meaningful_files: Of those, files whose change is more than whitespace.
        tasks_completed: Checkboxes newly checked in the tasks files.
        tests_newly_passing: Tests failing in the previous report and passing now.
        tests_newly_failing: Tests passing in the previous report and failing now.
        lint_errors: Error count of the lint command (None when no lint ran).
        lint_resolved: Lint/build errors fewer than the previous iteration's.
        error_fingerprint: The iteration's error, normalized and hashed (None: no error).
        output_bytes: Bytes the executor printed.
        output_lines: Lines the executor printed.
        permission_denials: Tool uses the agent was refused (Forge's guard apart).
        guard_refusals: Tool uses Forge's guard refused: the agent reached for a
            protected path.
        test_files_modified: Modified files matching the test globs.
        meaningful_tests: Of those, files whose change is more than whitespace.
        failing_tests: A hash of the failing tests' names in the JUnit report
            after it (None: none failing, or no report).
        reverts: Files whose content returned to what it was after an earlier iteration.
        diff_fingerprint: A hash of the iteration's change set (None: no change).
        done: The executor signalled done.
        tests_passed, tests_failed, tests_skipped: The JUnit report's totals
            after the iteration (all 0: no report).
        files: The modified files' paths (the first 50, sorted).
        tasks_measured: Whether a tasks file exists to count completed tasks in
            (without one, ``tasks_completed`` is 0 for want of a measure).
    """

    files_modified: int = 0
    meaningful_files: int = 0
    tasks_completed: int = 0
    tests_newly_passing: int = 0
    tests_newly_failing: int = 0
    lint_errors: int | None = None
    lint_resolved: int = 0
    error_fingerprint: str | None = None
    output_bytes: int = 0
    output_lines: int = 0
    permission_denials: int = 0
    test_files_modified: int = 0
    reverts: int = 0
    diff_fingerprint: str | None = None
    done: bool = False
    tests_passed: int = 0
    tests_failed: int = 0
    tests_skipped: int = 0
    files: tuple[str, ...] = ()
    tasks_measured: bool = True
    guard_refusals: int = 0
    meaningful_tests: int = 0
    failing_tests: str | None = None

    @property
    def work_files(self) -> int:
        """Meaningfully changed files that are not tests: the work a test-only iteration lacks."""
        return max(0, self.meaningful_files - self.meaningful_tests)

    @property
    def errors(self) -> int:
        """Errors this iteration ended with: failed tests, lint errors, its own error."""
        own = 1 if self.error_fingerprint is not None else 0
        return self.tests_failed + (self.lint_errors or 0) + own

    @property
    def pass_rate(self) -> float | None:
        """Tests passed of those that ran (None: no report)."""
        ran = self.tests_passed + self.tests_failed
        return self.tests_passed / ran if ran else None

    def as_record(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Signals:
        """Signals from a timeline record; unknown keys are ignored, bad values refused.

        Raises:
            ValueError: when a known key has a value of the wrong type.
        """
        values: dict[str, Any] = {}
        for field in attrs.fields(cls):
            if field.name not in data:
                continue
            value = data[field.name]
            if field.name in ("error_fingerprint", "diff_fingerprint", "failing_tests"):
                if value is not None and not isinstance(value, str):
                    raise ValueError(f"{field.name}: {value!r}")
            elif field.name == "files":
                if not isinstance(value, list | tuple) or not all(
                    isinstance(v, str) for v in value
                ):
                    raise ValueError(f"files: {value!r}")
                value = tuple(value)
            elif field.name in ("done", "tasks_measured"):
                if not isinstance(value, bool):
                    raise ValueError(f"done: {value!r}")
            elif field.name == "lint_errors" and value is None:
                pass
            elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{field.name}: {value!r}")
            values[field.name] = value
        return cls(**values)


def trailing_streak(history: Sequence[Signals], holds: Callable[[Signals], bool]) -> int:
    """How many iterations at the end of ``history`` in a row ``holds`` is true of."""
    count = 0
    for signals in reversed(history):
        if not holds(signals):
            break
        count += 1
    return count
