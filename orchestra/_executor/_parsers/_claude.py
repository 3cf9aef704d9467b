"""Claude Code's ``-p --output-format json|stream-json``, read into one Observation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import attrs

from ..._hook_passing import GUARD_REFUSAL
from .._limits import REJECTED, detect_limit, is_limit_answer, limit_from_status
from .._observation import ModelTokens, Observation, RateLimitEvent
from ._common import (
    MAX_DOCUMENT,
    EventParser,
    as_dict,
    as_float,
    as_int,
    as_str,
    clip,
    document_events,
    finite_amount,
    has_marker_line,
)


class ClaudeParser(EventParser):
    """Claude Code ``--output-format json`` and ``stream-json``.

    ``json`` is one result object, or (with verbose settings) a JSON array of
    every message; ``stream-json`` is one event a line. Tokens are the sum over
    ``modelUsage`` when it is there (it counts every model the run used, a
    subagent's included), else the result's ``usage``.

    A call the CLI retried after a 429 is announced by a ``system/api_retry``
    event with the delay it waits (``retry_delay_ms``, the server's
    ``retry-after`` when it sent one). The last refusal is not announced (no
    retry follows it): when the run ends refused by a 429, the last announced
    delay, counted from when the result was read on ``clock`` (wall-clock
    epoch seconds), is the limit's reset.
    """

    def __init__(
        self, output_format: str, done_marker: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(output_format, done_marker, clock=clock)
        self._retry_delay: float | None = None  # seconds, before the last 429 retried
        self._result_at = 0.0
        self._result: dict[str, Any] | None = None
        # stream-json repeats a message as it grows: count each message's tool_use
        # blocks once, holding only the message being streamed, not every id ever seen.
        self._message_id: str | None = None
        self._message_tools: set[str] = set()
        self._tools_before = 0
        self._rate_limit: RateLimitEvent | None = None
        self._session_id: str | None = None
        # The tool uses Forge's guard denied (their results begin with its words):
        # the result's permission_denials that are a protection signal instead.
        self._guarded: set[str] = set()
        # A JSON array (or a pretty-printed object) spans lines: kept whole, bounded.
        self._document = bytearray()
        self._too_big = False

    def feed(self, chunk: bytes) -> None:
        super().feed(chunk)
        if not self._too_big:
            self._document += chunk
            if len(self._document) > MAX_DOCUMENT:
                self._document.clear()
                self._too_big = True

    def finish(self) -> Observation:
        text_view = self._drain()
        if self._result is None and not self._too_big:
            for event in document_events(bytes(self._document)):
                self._take(event)
        result = self._result
        tools = self._tools_before + len(self._message_tools)
        stderr_limit = detect_limit(self._stderr.text(), self._clock())
        if result is None:
            return Observation(
                format=self._format,
                done=text_view.done,
                tool_calls=tools,
                rate_limit=self._rate_limit or stderr_limit,
                session_id=self._session_id,
                note='no {"type": "result"} object in the output; read as plain text',
            )
        subtype = as_str(result.get("subtype")) or "unknown"
        is_error = result.get("is_error") is True or subtype != "success"
        final = as_str(result.get("result")) or ""
        tokens_in, tokens_out, cached, models = _claude_tokens(result)
        denials, guarded = _split_denials(result.get("permission_denials"), self._guarded)
        denied = _denied(result.get("permission_denials"), self._guarded)
        error = _error_text(result, final, subtype) if is_error else None
        rate_limit = self._limit(result, is_error, error or final, stderr_limit)
        if rate_limit is not None and error is None:
            error = clip(final)
            is_error = True
        return Observation(
            format=self._format,
            done=not is_error and has_marker_line(final, self._marker),
            is_error=is_error,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tokens_cached=cached,
            cost_usd=as_float(result.get("total_cost_usd")),
            cost_reported="total_cost_usd" in result,
            tool_calls=tools,
            permission_denials=denials,
            guard_refusals=guarded,
            denied=denied,
            turns=as_int(result.get("num_turns")) if "num_turns" in result else None,
            error=error,
            rate_limit=rate_limit,
            summary=clip(final) if final else None,
            models=models,
            session_id=as_str(result.get("session_id")) or self._session_id,
        )

    def _limit(
        self,
        result: dict[str, Any],
        is_error: bool,
        text: str,
        stderr_limit: RateLimitEvent | None,
    ) -> RateLimitEvent | None:
        """The provider limit the run ended on, if it did (``text``: its error, or its answer)."""
        if self._rate_limit is not None:
            return self._rate_limit
        # Some releases end a refused run with subtype success and the limit as
        # the whole answer: that answer is read for it too.
        if (is_error or is_limit_answer(text)) and (
            limit := detect_limit(text, self._clock())
        ) is not None:
            return limit
        if not is_error:
            return None  # stderr speaks only for a run that failed: a success stands
        # The API's status for the error (429: a limit, 529: overloaded).
        limit = limit_from_status(result.get("api_error_status"), text, self._clock())
        if limit is not None and limit.status == REJECTED:
            return _with_reset(limit, self._retry_delay, self._result_at)
        return limit if limit is not None else stderr_limit

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self._session_id is None and (session := as_str(event.get("session_id"))):
            self._session_id = session
        if kind == "result":
            self._result = event
            self._result_at = self._clock()
        elif kind == "assistant":
            message = event.get("message")
            if not isinstance(message, dict):
                return
            message_id = as_str(message.get("id"))
            if message_id is None or message_id != self._message_id:
                self._tools_before += len(self._message_tools)
                self._message_id, self._message_tools = message_id, set()
            content = message.get("content")
            for index, block in enumerate(content if isinstance(content, list) else []):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self._message_tools.add(as_str(block.get("id")) or f"#{index}")
        elif kind == "system" and event.get("subtype") == "api_retry":
            delay = finite_amount(event.get("retry_delay_ms"))
            if event.get("error_status") == 429 and delay is not None:
                self._retry_delay = delay / 1000
        elif kind == "user":
            self._guarded.update(_guard_refused(event.get("message")))
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            if isinstance(info, dict) and info.get("status") == "rejected":
                self._rate_limit = RateLimitEvent(
                    status="rejected",
                    resets_at=finite_amount(info.get("resetsAt")),
                    kind=as_str(info.get("rateLimitType")),
                )


def _with_reset(limit: RateLimitEvent, delay: float | None, seen_at: float) -> RateLimitEvent:
    """The limit, its reset the CLI's retry delay after ``seen_at`` when its message gave none."""
    if limit.resets_at is not None or delay is None:
        return limit
    return attrs.evolve(limit, resets_at=round(seen_at + delay, 3))


def _guard_refused(message: Any) -> list[str]:
    """The ids of the tool uses in a user message whose result is Forge's guard's deny."""
    content = message.get("content") if isinstance(message, dict) else None
    found = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        text = block.get("content")
        if isinstance(text, list):  # a result may be a list of text blocks
            text = "".join(str(p.get("text", "")) for p in text if isinstance(p, dict))
        if isinstance(text, str) and text.startswith(GUARD_REFUSAL):
            found.append(as_str(block.get("tool_use_id")) or "")
    return found


def _split_denials(denials: Any, guarded: set[str]) -> tuple[int, int]:
    """(the CLI's own permission denials, those that were Forge's guard refusing)."""
    if not isinstance(denials, list):
        return 0, 0
    ids = [as_str(d.get("tool_use_id")) if isinstance(d, dict) else None for d in denials]
    by_guard = sum(1 for tool_id in ids if tool_id is not None and tool_id in guarded)
    return len(denials) - by_guard, by_guard


# The denied tool uses named in a record: enough to see the pattern, bounded.
_DENIED_SHOWN = 5
_DENIED_WIDTH = 160


def _denied(denials: Any, guarded: set[str]) -> tuple[str, ...]:
    """Each tool use the CLI refused (the guard's refusals apart), in a few words."""
    if not isinstance(denials, list):
        return ()
    named = []
    for denial in denials:
        if not isinstance(denial, dict) or as_str(denial.get("tool_use_id")) in guarded:
            continue
        tool = as_str(denial.get("tool_name")) or "a tool"
        given = denial.get("tool_input")
        what = ""
        if isinstance(given, dict):
            what = next(
                (
                    text
                    for key in ("command", "file_path", "path", "url", "pattern")
                    if (text := as_str(given.get(key)))
                ),
                "",
            )
        words = f"{tool}: {' '.join(what.split())}" if what else tool
        named.append(words if len(words) <= _DENIED_WIDTH else words[: _DENIED_WIDTH - 1] + "…")
    return tuple(named[:_DENIED_SHOWN])


def _error_text(result: dict[str, Any], final: str, subtype: str) -> str:
    """What a failed run says went wrong: its answer, its listed errors, or its subtype."""
    errors = result.get("errors")
    listed = (
        "; ".join(as_str(e) or json.dumps(e) for e in errors) if isinstance(errors, list) else ""
    )
    return clip(final or listed or f"claude ended with subtype {subtype}")


def _claude_tokens(
    result: dict[str, Any],
) -> tuple[int, int, int, tuple[ModelTokens, ...]]:
    """(input incl. cache, output, cache reads, per model) from a Claude result."""
    model_usage = result.get("modelUsage")
    models = []
    if isinstance(model_usage, dict):
        for name, usage in model_usage.items():
            if not isinstance(usage, dict):
                continue
            read = as_int(usage.get("cacheReadInputTokens"))
            fresh = as_int(usage.get("inputTokens")) + as_int(usage.get("cacheCreationInputTokens"))
            models.append(
                ModelTokens(
                    model=str(name),
                    input=fresh,
                    cached=read,
                    output=as_int(usage.get("outputTokens")),
                )
            )
    if any(m.input or m.cached or m.output for m in models):
        return (
            sum(m.input + m.cached for m in models),
            sum(m.output for m in models),
            sum(m.cached for m in models),
            tuple(models),
        )
    usage = as_dict(result.get("usage"))
    cached = as_int(usage.get("cache_read_input_tokens"))
    tokens_in = (
        as_int(usage.get("input_tokens"))
        + as_int(usage.get("cache_creation_input_tokens"))
        + cached
    )
    return tokens_in, as_int(usage.get("output_tokens")), cached, tuple(models)
