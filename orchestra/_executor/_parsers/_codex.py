"""Codex's ``exec --json`` event stream, read into one Observation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .._limits import detect_limit
from .._observation import ModelTokens, Observation
from ._common import EventParser, as_int, as_str, clip, has_marker_line

_TOOL_ITEMS = {"command_execution", "mcp_tool_call", "file_change", "web_search"}


class CodexParser(EventParser):
    """Codex ``exec --json``: one event a line.

    ``{"type": "error", "message": "Reconnecting... 1/5 …"}`` is Codex retrying
    a dropped stream: when a turn then completes, the error was recovered from
    and is no error of the iteration.
    """

    def __init__(self, done_marker: str, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__("codex-json", done_marker, clock=clock)
        self._events = 0
        self._tokens_in = 0
        self._tokens_cached = 0
        self._tokens_out = 0
        self._tool_calls = 0
        self._last_message = ""
        self._error: str | None = None
        self._turns = 0
        self._thread_id: str | None = None
        self._completed = False  # the last turn event was turn.completed

    def finish(self) -> Observation:
        text_view = self._drain()
        stderr_limit = detect_limit(self._stderr.text(), self._clock())
        if not self._events:
            return Observation(
                format="codex-json",
                done=text_view.done,
                rate_limit=stderr_limit,
                note="no Codex JSON events in the output; read as plain text",
            )
        error = self._error
        rate_limit = detect_limit(error, self._clock()) if error else None
        if rate_limit is None and not self._completed:
            # stderr speaks only for a turn that did not complete: a completed one stands.
            rate_limit = stderr_limit
        if rate_limit is not None and error is None:
            error = clip(self._stderr.text().strip()) or "codex reported a provider limit"
        is_error = error is not None
        return Observation(
            format="codex-json",
            done=not is_error and has_marker_line(self._last_message, self._marker),
            is_error=is_error,
            tokens_in=self._tokens_in,
            tokens_out=self._tokens_out,
            tokens_cached=self._tokens_cached,
            tool_calls=self._tool_calls,
            turns=self._turns or None,
            error=error,
            rate_limit=rate_limit,
            summary=clip(self._last_message) if self._last_message else None,
            models=(
                (
                    ModelTokens(
                        model="",
                        input=self._tokens_in - self._tokens_cached,
                        cached=self._tokens_cached,
                        output=self._tokens_out,
                    ),
                )
                if self._tokens_in or self._tokens_out
                else ()
            ),
            session_id=self._thread_id,
        )

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if not isinstance(kind, str):
            return
        self._events += 1
        if kind == "thread.started":
            self._thread_id = as_str(event.get("thread_id")) or self._thread_id
        if kind in ("turn.completed", "turn.failed"):
            self._turns += 1
            usage = event.get("usage")
            if isinstance(usage, dict):
                cached = min(
                    as_int(usage.get("cached_input_tokens")), as_int(usage.get("input_tokens"))
                )
                self._tokens_in += as_int(usage.get("input_tokens"))
                self._tokens_cached += cached
                self._tokens_out += as_int(usage.get("output_tokens"))
        if kind in ("turn.completed", "turn.failed", "error"):
            self._completed = kind == "turn.completed"
        if kind == "turn.completed":
            self._error = None  # the turn recovered from whatever came before it
        elif kind == "turn.failed":
            error = event.get("error")
            message = as_str(error.get("message")) if isinstance(error, dict) else None
            self._error = clip(message or "the turn failed")
        elif kind == "error":
            message = as_str(event.get("message")) or json.dumps(event.get("error"))
            self._error = clip(message or "codex reported an error")
        elif kind == "item.completed":
            item = event.get("item")
            if not isinstance(item, dict):
                return
            item_type = item.get("type") or item.get("item_type")
            if item_type in _TOOL_ITEMS:
                self._tool_calls += 1
            elif item_type == "agent_message":
                self._last_message = as_str(item.get("text")) or ""
