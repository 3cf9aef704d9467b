"""The commands of a verify (tests, lint) and what their output says went wrong."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from .._capture import CapturedOutput
from .._durations import format_duration
from .._process import ProcessResult, run_process
from .._redact import Redact

_FAILURE_LINE = re.compile(
    r"""
    ^(?:FAILED|ERROR)[ :]                # pytest summary lines
    | ^E[ ]{2,}\S                        # pytest assertion detail
    | \b\w*(?:Error|Exception):[ ]       # Python exceptions, most linters
    | ^\S+:\d+(?::\d+)?:[ ]              # path:line[:col]: message (ruff, gcc, mypy, eslint)
    | ^(?:not[ ]ok)\b                    # TAP
    | ^---[ ]FAIL:                       # go test
    | ^error(?:\[\w+\])?:                # rustc, generic CLIs
    | \bFAIL(?:ED|URE)?\b                # many runners
    | npm[ ]ERR!
    """,
    re.VERBOSE,
)
MAX_FAILURE_LINES = 20
MAX_LAST_LINES = 15
_MAX_LINE_CHARS = 300


@attrs.frozen
class CheckResult:
    """One verify command and how it went."""

    name: str
    command: str
    passed: bool
    outcome: str
    exit_code: int | None
    timed_out: bool
    duration: float
    failure_lines: tuple[str, ...]
    last_lines: tuple[str, ...]
    output_bytes: int
    diagnostics: int = 0


def diagnostic_count(output: CapturedOutput) -> int:
    """How many lines of the kept output report a problem (a lint's error count, roughly)."""
    return sum(1 for line in output.lines() if line.strip() and _FAILURE_LINE.search(line.strip()))


def failure_lines(output: CapturedOutput, limit: int = MAX_FAILURE_LINES) -> list[str]:
    """Lines of the output that look like a reason for failure, at most ``limit``."""
    found = []
    for line in output.lines():
        if _FAILURE_LINE.search(line.strip()) and line.strip():
            found.append(_clip(line.rstrip()))
            if len(found) >= limit:
                break
    return found


async def run_check(
    name: str,
    command: str,
    *,
    cwd: Path,
    time_limit: float,
    grace: float,
    env: Mapping[str, str] | None = None,
    redact: Redact | None = None,
) -> CheckResult:
    """Run one verify command through ``sh -c`` and judge it by its exit code.

    With ``redact``, secrets in its output are redacted before they are kept.
    """
    result: ProcessResult = await run_process(
        ["sh", "-c", command],
        cwd=cwd,
        env=env,
        time_limit=time_limit,
        grace=grace,
        redact=redact,
    )
    passed = result.succeeded
    outcome = (
        f"timed out after {format_duration(time_limit)}" if result.timed_out else result.describe()
    )
    return CheckResult(
        name=name,
        command=command,
        passed=passed,
        outcome=outcome,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration=result.duration,
        failure_lines=() if passed else tuple(failure_lines(result.output)),
        last_lines=()
        if passed
        else tuple(_clip(x) for x in result.output.last_lines(MAX_LAST_LINES)),
        output_bytes=result.output.total_bytes,
        diagnostics=0 if passed else diagnostic_count(result.output),
    )


def _clip(line: str) -> str:
    return line if len(line) <= _MAX_LINE_CHARS else line[: _MAX_LINE_CHARS - 1] + "…"
