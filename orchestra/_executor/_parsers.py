"""Streaming parsers: what known agent CLIs print, turned into one Observation.

Each parser is fed the output chunk by chunk as it arrives, keeps bounded
state, and never raises on bad input: truncated or invalid JSON falls back to
reading the output as plain text. Formats:

- ``text``: anything; done is a line that is exactly the done marker.
- ``claude-json`` / ``claude-stream-json``: Claude Code ``-p --output-format
  json|stream-json``; the final ``{"type": "result"}`` object carries subtype,
  is_error, num_turns, total_cost_usd, usage and permission_denials.
- ``codex-json``: Codex ``exec --json`` events (``turn.completed``,
  ``item.completed``, ``turn.failed``, ``error``).
- ``gemini-json``: Gemini CLI ``-o json``, one object with ``response`` and ``stats``.
"""

from __future__ import annotations

import abc
import json
import math
import re
from typing import Any, Protocol

from ._observation import Observation, RateLimitEvent

MAX_JSON_LINE = 2 * 1024 * 1024  # a longer line is not parsed (memory stays bounded)
MAX_DOCUMENT = 4 * 1024 * 1024
_SUMMARY_CHARS = 2000
_PARTIAL_LINE_CAP = 4096
_USAGE_LIMIT = re.compile(
    r"usage limit|hit your limit|rate limit (?:reached|exceeded)|limit reached|"
    r"quota exceeded|too many requests|\b429\b",
    re.IGNORECASE,
)
_TOOL_ITEMS = {"command_execution", "mcp_tool_call", "file_change", "web_search"}


class OutputParser(Protocol):
    """Fed every chunk of an iteration's output; then asked for the Observation."""

    def feed(self, chunk: bytes) -> None: ...

    def finish(self) -> Observation: ...


def make_parser(output_format: str, done_marker: str) -> OutputParser:
    """The parser for one of ``OUTPUT_FORMATS``."""
    if output_format in ("claude-json", "claude-stream-json"):
        return ClaudeParser(output_format, done_marker)
    if output_format == "codex-json":
        return CodexParser(done_marker)
    if output_format == "gemini-json":
        return GeminiParser(done_marker)
    return TextParser(done_marker)


def has_marker_line(text: str, marker: str) -> bool:
    """Whether some line of ``text`` is exactly ``marker`` once trimmed."""
    return any(line.strip() == marker for line in text.splitlines())


class TextParser:
    """Plain output: done when a whole line, trimmed, is the done marker.

    Only chunks that contain the marker are split into lines, so gigabytes of
    output cost a substring search, not a Python loop per line.
    """

    def __init__(self, done_marker: str, output_format: str = "text") -> None:
        self._marker = done_marker.strip()
        self._marker_bytes = self._marker.encode()
        self._format = output_format
        self._partial = b""  # the current unfinished line, while it could still be the marker
        self._partial_too_long = False
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        if self.seen or not chunk:
            return
        first = chunk.find(b"\n")
        if first == -1:
            self._grow_partial(chunk)
            return
        if not self._partial_too_long:
            self._check(self._partial + chunk[:first])  # the pending line ends here
        last = chunk.rfind(b"\n")
        middle = chunk[first + 1 : last]
        if self._marker_bytes and self._marker_bytes in middle:
            for line in middle.split(b"\n"):
                self._check(line)
        self._partial, self._partial_too_long = b"", False
        self._grow_partial(chunk[last + 1 :])

    def finish(self) -> Observation:
        if not self._partial_too_long:
            self._check(self._partial)
        return Observation(format=self._format, done=self.seen)

    def _grow_partial(self, data: bytes) -> None:
        if self._partial_too_long:
            return
        self._partial += data
        if len(self._partial) > _PARTIAL_LINE_CAP:
            # Too long to be the marker, however much whitespace surrounds it.
            self._partial, self._partial_too_long = b"", True

    def _check(self, line: bytes) -> None:
        if self._marker_bytes and line.strip() == self._marker_bytes:
            self.seen = True


class _JsonLines:
    """Splits output into lines, each at most MAX_JSON_LINE bytes, and parses JSON objects."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._skipping = False  # inside a line that grew past the cap
        self.skipped_lines = 0

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        objects = []
        self._buffer += chunk
        while (newline := self._buffer.find(b"\n")) != -1:
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            if self._skipping:
                self._skipping = False
                continue
            if (parsed := parse_object(line)) is not None:
                objects.append(parsed)
        if len(self._buffer) > MAX_JSON_LINE:
            self._buffer.clear()
            self._skipping = True
            self.skipped_lines += 1
        return objects

    def finish(self) -> list[dict[str, Any]]:
        rest = bytes(self._buffer)
        self._buffer.clear()
        if self._skipping:
            return []
        parsed = parse_object(rest)
        return [parsed] if parsed is not None else []


def parse_object(raw: bytes) -> dict[str, Any] | None:
    """A JSON object from one line, or None for anything else (never raises)."""
    stripped = raw.strip()
    if not stripped.startswith(b"{"):
        return None
    try:
        value = json.loads(stripped)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class _EventParser(abc.ABC):
    """A line-oriented JSON format: each object to :meth:`_take`, every chunk to a text view.

    The text view is the fallback when no event parses: the output is then read
    as plain text, the done marker included.
    """

    def __init__(self, output_format: str, done_marker: str) -> None:
        self._format = output_format
        self._marker = done_marker.strip()
        self._lines = _JsonLines()
        self._text = TextParser(done_marker, output_format)

    def feed(self, chunk: bytes) -> None:
        self._text.feed(chunk)
        for event in self._lines.feed(chunk):
            self._take(event)

    def _drain(self) -> Observation:
        """Take the last, unterminated line; the output as plain text."""
        for event in self._lines.finish():
            self._take(event)
        return self._text.finish()

    @abc.abstractmethod
    def _take(self, event: dict[str, Any]) -> None: ...


class ClaudeParser(_EventParser):
    """Claude Code ``--output-format json`` and ``stream-json``."""

    def __init__(self, output_format: str, done_marker: str) -> None:
        super().__init__(output_format, done_marker)
        self._result: dict[str, Any] | None = None
        # stream-json repeats a message as it grows: count each message's tool_use
        # blocks once, holding only the message being streamed, not every id ever seen.
        self._message_id: str | None = None
        self._message_tools: set[str] = set()
        self._tools_before = 0
        self._rate_limit: RateLimitEvent | None = None

    def finish(self) -> Observation:
        text_view = self._drain()
        result = self._result
        if result is None:
            return Observation(
                format=self._format,
                done=text_view.done,
                tool_calls=self._tools_before + len(self._message_tools),
                rate_limit=self._rate_limit,
                note='no {"type": "result"} object in the output; read as plain text',
            )
        subtype = as_str(result.get("subtype")) or "unknown"
        is_error = result.get("is_error") is True or subtype != "success"
        final = as_str(result.get("result")) or ""
        usage = as_dict(result.get("usage"))
        tokens_in = sum(
            as_int(usage.get(key))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        denials = result.get("permission_denials")
        error = None
        if is_error:
            errors = result.get("errors")
            listed = (
                "; ".join(as_str(e) or json.dumps(e) for e in errors)
                if isinstance(errors, list)
                else ""
            )
            error = _clip(final or listed or f"claude ended with subtype {subtype}")
        rate_limit = self._rate_limit
        if rate_limit is None and is_error and error and _USAGE_LIMIT.search(error):
            rate_limit = RateLimitEvent(status="rejected")
        return Observation(
            format=self._format,
            done=not is_error and has_marker_line(final, self._marker),
            is_error=is_error,
            tokens_in=tokens_in,
            tokens_out=as_int(usage.get("output_tokens")),
            cost_usd=as_float(result.get("total_cost_usd")),
            tool_calls=self._tools_before + len(self._message_tools),
            permission_denials=len(denials) if isinstance(denials, list) else 0,
            turns=as_int(result.get("num_turns")) if "num_turns" in result else None,
            error=error,
            rate_limit=rate_limit,
            summary=_clip(final) if final else None,
        )

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "result":
            self._result = event
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
        elif kind == "rate_limit_event":
            info = event.get("rate_limit_info")
            if isinstance(info, dict) and info.get("status") == "rejected":
                self._rate_limit = RateLimitEvent(
                    status="rejected",
                    resets_at=finite_amount(info.get("resetsAt")),
                    kind=as_str(info.get("rateLimitType")),
                )


class CodexParser(_EventParser):
    """Codex ``exec --json``: one event a line."""

    def __init__(self, done_marker: str) -> None:
        super().__init__("codex-json", done_marker)
        self._events = 0
        self._tokens_in = 0
        self._tokens_out = 0
        self._tool_calls = 0
        self._last_message = ""
        self._error: str | None = None
        self._turns = 0

    def finish(self) -> Observation:
        text_view = self._drain()
        if not self._events:
            return Observation(
                format="codex-json",
                done=text_view.done,
                note="no Codex JSON events in the output; read as plain text",
            )
        is_error = self._error is not None
        rate_limit = (
            RateLimitEvent(status="rejected")
            if self._error and _USAGE_LIMIT.search(self._error)
            else None
        )
        return Observation(
            format="codex-json",
            done=not is_error and has_marker_line(self._last_message, self._marker),
            is_error=is_error,
            tokens_in=self._tokens_in,
            tokens_out=self._tokens_out,
            tool_calls=self._tool_calls,
            turns=self._turns or None,
            error=self._error,
            rate_limit=rate_limit,
            summary=_clip(self._last_message) if self._last_message else None,
        )

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if not isinstance(kind, str):
            return
        self._events += 1
        if kind in ("turn.completed", "turn.failed"):
            self._turns += 1
            usage = event.get("usage")
            if isinstance(usage, dict):
                self._tokens_in += as_int(usage.get("input_tokens"))
                self._tokens_out += as_int(usage.get("output_tokens"))
        if kind == "turn.failed":
            error = event.get("error")
            message = as_str(error.get("message")) if isinstance(error, dict) else None
            self._error = _clip(message or "the turn failed")
        elif kind == "error":
            self._error = _clip(as_str(event.get("message")) or "codex reported an error")
        elif kind == "item.completed":
            item = event.get("item")
            if not isinstance(item, dict):
                return
            item_type = item.get("type") or item.get("item_type")
            if item_type in _TOOL_ITEMS:
                self._tool_calls += 1
            elif item_type == "agent_message":
                self._last_message = as_str(item.get("text")) or ""


class GeminiParser:
    """Gemini CLI ``-o json``: a single (often pretty-printed) JSON document."""

    def __init__(self, done_marker: str) -> None:
        self._marker = done_marker.strip()
        self._text = TextParser(done_marker, "gemini-json")
        self._document = bytearray()
        self._too_big = False

    def feed(self, chunk: bytes) -> None:
        self._text.feed(chunk)
        if self._too_big:
            return
        self._document += chunk
        if len(self._document) > MAX_DOCUMENT:
            self._document.clear()
            self._too_big = True

    def finish(self) -> Observation:
        text_view = self._text.finish()
        parsed = _first_object(bytes(self._document))
        if parsed is None:
            return Observation(
                format="gemini-json",
                done=text_view.done,
                note="no Gemini JSON document in the output; read as plain text",
            )
        response = as_str(parsed.get("response")) or ""
        error = parsed.get("error")
        message = None
        if error:
            message = as_str(error.get("message")) if isinstance(error, dict) else as_str(error)
            message = _clip(message or "gemini reported an error")
        stats = as_dict(parsed.get("stats"))
        tokens_in = tokens_out = 0
        models = stats.get("models")
        for model in models.values() if isinstance(models, dict) else []:
            tokens = model.get("tokens") if isinstance(model, dict) else None
            if isinstance(tokens, dict):
                tokens_in += as_int(tokens.get("prompt"))
                tokens_out += as_int(tokens.get("candidates"))
        tools = as_dict(stats.get("tools"))
        return Observation(
            format="gemini-json",
            done=message is None and has_marker_line(response, self._marker),
            is_error=message is not None,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tool_calls=as_int(tools.get("totalCalls")),
            error=message,
            rate_limit=(
                RateLimitEvent(status="rejected")
                if message and _USAGE_LIMIT.search(message)
                else None
            ),
            summary=_clip(response) if response else None,
        )


def _first_object(data: bytes) -> dict[str, Any] | None:
    """The first JSON object in ``data``, whatever text comes before or after it."""
    start = data.find(b"{")
    if start == -1:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(data[start:].decode("utf-8", errors="replace"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def as_int(value: object) -> int:
    """A non-negative count from untrusted JSON (anything else, huge ones too, counts as 0)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**53:
        return 0
    return value


def as_float(value: object) -> float:
    """A finite, non-negative amount from untrusted JSON (anything else counts as 0)."""
    return finite_amount(value) or 0.0


def finite_amount(value: object) -> float | None:
    """``value`` as a finite float >= 0, or None (huge integers and Infinity included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        amount = float(value)
    except OverflowError:
        return None
    return amount if math.isfinite(amount) and amount >= 0 else None


def as_dict(value: object) -> dict[str, Any]:
    """A JSON object from untrusted JSON, or an empty one."""
    return value if isinstance(value, dict) else {}


def as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _clip(text: str) -> str:
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 1] + "…"
