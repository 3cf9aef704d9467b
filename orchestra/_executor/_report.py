"""The report an executor may write to ``$FORGE_REPORT``.

``{"done": bool, "tokens": int, "tool_calls": int, "cost_usd": float,
"summary": str}``, every key optional. A key of the wrong type is ignored and
noted; a report that is not a JSON object is ignored and noted. Never fatal:
the report is the agent's word, and the loop goes on without it.

The file is removed once read: it lies beside the iteration's log, in Forge's
state, and holds the agent's words unredacted (a secret included); what Forge
takes from it is recorded, redacted, in the timeline.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from ._parsers import finite_amount

_MAX_REPORT_BYTES = 1024 * 1024
_MAX_SUMMARY_CHARS = 2000
_MAX_COUNT = 2**53  # beyond this, a "count" is noise that would only break arithmetic


@attrs.frozen
class ExecutorReport:
    """What the executor said about its iteration (None: it did not say)."""

    done: bool | None = None
    tokens: int | None = None
    tool_calls: int | None = None
    cost_usd: float | None = None
    summary: str | None = None


def read_report(
    path: Path, redact: Callable[[str], str] | None = None
) -> tuple[ExecutorReport | None, list[str]]:
    """The report at ``path`` (None when absent) and the problems found in it.

    The file is removed once read (whatever it held), so the agent's words are
    not kept unredacted. ``redact`` is applied to the summary before it is
    cut to its length: a secret across the cut would otherwise leave a piece
    no rule recognises.
    """
    try:
        raw = _read_regular_file(path, _MAX_REPORT_BYTES + 1)
    except FileNotFoundError:
        return None, []
    except OSError as exc:
        _remove(path)
        return None, [f"report unreadable: {exc.strerror or exc}"]
    _remove(path)
    if raw is None:
        return None, ["report is not a regular file; ignored"]
    if len(raw) > _MAX_REPORT_BYTES:
        return None, [f"report larger than {_MAX_REPORT_BYTES} bytes; ignored"]
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, [f"report is not valid JSON ({exc}); ignored"]
    if not isinstance(data, dict):
        return None, ["report is not a JSON object; ignored"]
    problems: list[str] = []
    report = ExecutorReport(
        done=_checked(data, "done", problems, _is_flag),
        tokens=_checked(data, "tokens", problems, _is_count),
        tool_calls=_checked(data, "tool_calls", problems, _is_count),
        cost_usd=_as_float(_checked(data, "cost_usd", problems, _is_amount)),
        summary=_clip(_checked(data, "summary", problems, _is_text), redact),
    )
    return report, problems


def _remove(path: Path) -> None:
    # Removing is the point, not reading: a file that cannot be removed (its
    # folder made read-only by the agent) is left, and the run goes on.
    with contextlib.suppress(OSError):
        path.unlink()


def _checked(
    data: dict[str, Any], key: str, problems: list[str], accept: Callable[[object], bool]
) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if not accept(value):
        # The type, never the value: a report may hold anything, a secret included.
        problems.append(f"report key {key!r}: unexpected {type(value).__name__}; ignored")
        return None
    return value


def _is_flag(value: object) -> bool:
    return isinstance(value, bool)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT


def _is_amount(value: object) -> bool:
    return finite_amount(value) is not None


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _as_float(value: int | float | None) -> float | None:
    return None if value is None else finite_amount(value)


def _clip(value: str | None, redact: Callable[[str], str] | None) -> str | None:
    if value is None:
        return None
    return (redact(value) if redact is not None else value)[:_MAX_SUMMARY_CHARS]


def _read_regular_file(path: Path, limit: int) -> bytes | None:
    """Up to ``limit`` bytes of a regular file; None for a FIFO, a device or a folder.

    Opened without blocking: an agent that leaves a FIFO at ``$FORGE_REPORT``
    must not hang Forge.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        remaining = limit
        while remaining > 0 and (chunk := os.read(fd, min(remaining, 65536))):
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
