"""The loop contract on disk: checkpoint.json, forge.* timeline events, the plan's Loop Trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cattrs.errors import BaseValidationError

from .._errors import CorruptStateError
from .._state import (
    BLOCKED,
    ITERATION_BEGUN,
    LOOP_STARTED,
    SHIP_READY,
    STATE_CONVERTER,
    STRATEGY_CHANGED,
    ChangePaths,
    ContractEvent,
    append_event,
    atomic_write,
    exclusive_lock,
    move_aside,
    read_state_bytes,
)
from ._model import Checkpoint

TRACE_HEADING = "## Loop Trace"
EVENTS = (LOOP_STARTED, ITERATION_BEGUN, STRATEGY_CHANGED, BLOCKED, SHIP_READY)


def checkpoint_path(paths: ChangePaths) -> Path:
    return paths.folder / "checkpoint.json"


def render(checkpoint: Checkpoint) -> bytes:
    """The checkpoint as written: its schema's keys, remaining fix iterations included."""
    data: dict[str, Any] = STATE_CONVERTER.unstructure(checkpoint)
    data["budget"]["remaining_fix_iterations"] = checkpoint.budget.remaining_fix_iterations
    for optional in ("route", "autonomy_policy", "max_goal_steps", "plan"):
        if data.get(optional) is None:
            data.pop(optional, None)  # the Goal route's fields appear only on that route
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def load_checkpoint(paths: ChangePaths) -> Checkpoint | None:
    """The change's checkpoint, None when no loop was started.

    Raises:
        CorruptStateError: the file did not parse; it was moved aside.
    """
    path = checkpoint_path(paths)
    raw = read_state_bytes(path)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        if isinstance(data.get("budget"), dict):
            data["budget"] = {
                k: v for k, v in data["budget"].items() if k != "remaining_fix_iterations"
            }
        return STATE_CONVERTER.structure(data, Checkpoint)
    except (ValueError, TypeError, RecursionError, BaseValidationError) as exc:
        moved = move_aside(path)
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise CorruptStateError(
            f"checkpoint.json is corrupt ({reason})",
            path=str(path),
            moved_to=str(moved),
            hint="its content is kept in the moved file; start again with forge loop start",
        ) from exc


def save_checkpoint(paths: ChangePaths, checkpoint: Checkpoint) -> bytes:
    data = render(checkpoint)
    atomic_write(checkpoint_path(paths), data)
    return data


def record(paths: ChangePaths, event: str, fields: dict[str, Any]) -> None:
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, paths.name, ContractEvent(name=event, fields=fields))


def add_trace(plan: Path, line: str) -> str | None:
    """Append ``line`` under the plan's ``## Loop Trace`` heading (added when missing).

    Returns:
        None when written, or why not (a missing or read-only plan file): the
        trace is a courtesy to humans and never stops the loop.
    """
    try:
        text = plan.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"plan file {plan} not found: no Loop Trace line written"
    except UnicodeDecodeError:
        return f"plan file {plan} is not UTF-8 text: no Loop Trace line written"
    except OSError as exc:
        return f"plan file {plan} unreadable ({exc.strerror or exc}): no Loop Trace line written"
    line = " ".join(line.split())  # one line, whatever newlines a goal or a stage carried
    lines = text.splitlines()
    try:
        start = next(i for i, existing in enumerate(lines) if existing.strip() == TRACE_HEADING)
    except StopIteration:
        lines.extend(["", TRACE_HEADING, ""] if lines else [TRACE_HEADING, ""])
        start = len(lines) - 2
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].startswith("#")),
        len(lines),
    )
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # after the section's last line, not after the blank ones
    lines.insert(end, line)
    try:
        plan.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError as exc:
        return f"plan file {plan} is read-only ({exc.strerror or exc}): no Loop Trace line written"
    return None
