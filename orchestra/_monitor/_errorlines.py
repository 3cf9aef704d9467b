"""The errors an iteration ended with, as a person reading the status log wants them.

Not a count: the failing tests by name, with the first line of each one's
message (from the JUnit XML report), and the error lines the stagnation probe
fingerprints (the error the agent reported, or the last error lines of a
failed process's output). Bounded (a few entries, each one line of at most
200 characters) and redacted as the output log is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

from .._stagnation import error_lines_of

MAX_ENTRIES = 5
MAX_CHARS = 200
# How much of a log's end is read for its error lines, and how many lines of it.
_TAIL_BYTES = 16 * 1024
_TAIL_LINES = 15


def _one_line(text: str) -> str:
    line = " ".join(text.strip().split())
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"


def failing_tests(report: Path) -> list[str]:
    """``classname::name: first line of the message`` for each failing test of a JUnit report."""
    try:
        root = ElementTree.parse(report).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    found = []
    for case in root.iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                name = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
                message = child.get("message") or (child.text or "").strip()
                first = message.strip().splitlines()[0] if message.strip() else child.tag
                found.append(f"{name}: {first}")
                break
    return found


def log_error_lines(log: Path) -> list[str]:
    """The last error lines of an output log (its last line when none looks like one)."""
    try:
        with log.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = [line for line in tail.splitlines()[-_TAIL_LINES:] if line.strip()]
    errors = error_lines_of(lines)
    return errors[-2:]


def error_lines(
    *,
    reported: str | None,
    log: Path | None,
    failed: bool,
    report: Path | None,
    redact: Callable[[str], str] | None,
) -> list[str]:
    """The iteration's errors: what the agent reported or its output's error lines, then tests."""
    found: list[str] = []
    if reported and reported.strip():
        found.extend(line for line in reported.strip().splitlines()[:2] if line.strip())
    elif failed and log is not None:
        found.extend(log_error_lines(log))
    if report is not None:
        found.extend(failing_tests(report))
    shown = []
    for entry in found:
        text = redact(entry) if redact is not None else entry
        line = _one_line(text)
        if line and line not in shown:
            shown.append(line)
    if len(shown) > MAX_ENTRIES:
        more = len(shown) - (MAX_ENTRIES - 1)
        shown = [*shown[: MAX_ENTRIES - 1], f"and {more} more"]
    return shown
