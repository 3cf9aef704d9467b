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
- ``gemini-json``: Gemini CLI ``-o json``, one object with ``response`` and ``stats``
  (its errors, as a JSON object, on stderr).

stderr is read apart from stdout (never glued into it): the structured
parsers look there for the error a CLI writes on its way out, a provider's
limit in particular.
"""

from __future__ import annotations

import abc
import json
import math
from typing import Any, Protocol

from ._limits import detect_limit, is_limit_answer, limit_from_status
from ._observation import ModelTokens, Observation, RateLimitEvent

MAX_JSON_LINE = 2 * 1024 * 1024  # a longer line is not parsed (memory stays bounded)
MAX_DOCUMENT = 4 * 1024 * 1024
_SUMMARY_CHARS = 2000
_PARTIAL_LINE_CAP = 4096
_STDERR_TAIL = 64 * 1024  # what is kept of stderr to read a provider's error from
_TOOL_ITEMS = {"command_execution", "mcp_tool_call", "file_change", "web_search"}


class OutputParser(Protocol):
    """Fed every chunk of an iteration's output; then asked for the Observation."""

    def feed(self, chunk: bytes) -> None: ...

    def feed_stderr(self, chunk: bytes) -> None: ...

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

    def feed_stderr(self, chunk: bytes) -> None:
        """Plain output: what an agent writes to stderr is not read."""

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
        self._stderr = _Tail()

    def feed(self, chunk: bytes) -> None:
        self._text.feed(chunk)
        for event in self._lines.feed(chunk):
            self._take(event)

    def feed_stderr(self, chunk: bytes) -> None:
        self._stderr.feed(chunk)

    def _drain(self) -> Observation:
        """Take the last, unterminated line; the output as plain text."""
        for event in self._lines.finish():
            self._take(event)
        return self._text.finish()

    @abc.abstractmethod
    def _take(self, event: dict[str, Any]) -> None: ...


class _Tail:
    """The last bytes of a stream, bounded."""

    def __init__(self, limit: int = _STDERR_TAIL) -> None:
        self._data = bytearray()
        self._limit = limit

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self._limit:
            del self._data[: len(self._data) - self._limit]

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")


class ClaudeParser(_EventParser):
    """Claude Code ``--output-format json`` and ``stream-json``.

    ``json`` is one result object, or (with verbose settings) a JSON array of
    every message; ``stream-json`` is one event a line. Tokens are the sum over
    ``modelUsage`` when it is there (it counts every model the run used, a
    subagent's included), else the result's ``usage``.
    """

    def __init__(self, output_format: str, done_marker: str) -> None:
        super().__init__(output_format, done_marker)
        self._result: dict[str, Any] | None = None
        # stream-json repeats a message as it grows: count each message's tool_use
        # blocks once, holding only the message being streamed, not every id ever seen.
        self._message_id: str | None = None
        self._message_tools: set[str] = set()
        self._tools_before = 0
        self._rate_limit: RateLimitEvent | None = None
        self._session_id: str | None = None
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
            for event in _document_events(bytes(self._document)):
                self._take(event)
        result = self._result
        tools = self._tools_before + len(self._message_tools)
        stderr_limit = detect_limit(self._stderr.text())
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
        if rate_limit is None and (is_error or is_limit_answer(final)):
            # Some releases end a refused run with subtype success and the limit
            # as the whole answer: that answer is read for it too.
            rate_limit = detect_limit(error or final)
        if rate_limit is None and is_error:
            # The API's status for the error (429: a limit, 529: overloaded).
            rate_limit = limit_from_status(result.get("api_error_status"), error or final)
        if rate_limit is None and is_error:
            # stderr speaks only for a run that failed: a success stands.
            rate_limit = stderr_limit
        if rate_limit is not None and error is None:
            error = _clip(final)
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
            permission_denials=len(denials) if isinstance(denials, list) else 0,
            turns=as_int(result.get("num_turns")) if "num_turns" in result else None,
            error=error,
            rate_limit=rate_limit,
            summary=_clip(final) if final else None,
            models=models,
            session_id=as_str(result.get("session_id")) or self._session_id,
        )

    def _take(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self._session_id is None and (session := as_str(event.get("session_id"))):
            self._session_id = session
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


def _document_events(data: bytes) -> list[dict[str, Any]]:
    """The objects of a whole JSON document: an array of messages, or one object."""
    stripped = data.strip()
    if not stripped.startswith((b"[", b"{")):
        return []
    try:
        value = json.loads(stripped)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return []
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, dict)]
    return []


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


class CodexParser(_EventParser):
    """Codex ``exec --json``: one event a line.

    ``{"type": "error", "message": "Reconnecting... 1/5 …"}`` is Codex retrying
    a dropped stream: when a turn then completes, the error was recovered from
    and is no error of the iteration.
    """

    def __init__(self, done_marker: str) -> None:
        super().__init__("codex-json", done_marker)
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
        stderr_limit = detect_limit(self._stderr.text())
        if not self._events:
            return Observation(
                format="codex-json",
                done=text_view.done,
                rate_limit=stderr_limit,
                note="no Codex JSON events in the output; read as plain text",
            )
        error = self._error
        rate_limit = detect_limit(error) if error else None
        if rate_limit is None and not self._completed:
            # stderr speaks only for a turn that did not complete: a completed one stands.
            rate_limit = stderr_limit
        if rate_limit is not None and error is None:
            error = _clip(self._stderr.text().strip()) or "codex reported a provider limit"
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
            summary=_clip(self._last_message) if self._last_message else None,
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
            self._error = _clip(message or "the turn failed")
        elif kind == "error":
            message = as_str(event.get("message")) or json.dumps(event.get("error"))
            self._error = _clip(message or "codex reported an error")
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
    """Gemini CLI ``-o json``: a single (often pretty-printed) JSON document.

    Tokens are each model's ``total`` (thoughts and tool tokens included);
    errors come as ``{"error": {"type", "message", "code"}}``, on stdout or
    (from the CLIs that write errors apart) on stderr.
    """

    def __init__(self, done_marker: str) -> None:
        self._marker = done_marker.strip()
        self._text = TextParser(done_marker, "gemini-json")
        self._document = bytearray()
        self._too_big = False
        self._stderr = _Tail()

    def feed(self, chunk: bytes) -> None:
        self._text.feed(chunk)
        if self._too_big:
            return
        self._document += chunk
        if len(self._document) > MAX_DOCUMENT:
            self._document.clear()
            self._too_big = True

    def feed_stderr(self, chunk: bytes) -> None:
        self._stderr.feed(chunk)

    def finish(self) -> Observation:
        text_view = self._text.finish()
        parsed = _first_object(bytes(self._document))
        stderr_text = self._stderr.text()
        stderr_doc = _first_object(stderr_text.encode())
        if stderr_doc is not None and stderr_doc.get("error") and not (parsed or {}).get("error"):
            # The CLI wrote its error apart, on stderr: it is this run's error.
            parsed = {**(parsed or {}), "error": stderr_doc["error"]}
        if parsed is None:
            return Observation(
                format="gemini-json",
                done=text_view.done,
                rate_limit=detect_limit(stderr_text),
                note="no Gemini JSON document in the output; read as plain text",
            )
        response = as_str(parsed.get("response")) or ""
        error = parsed.get("error")
        message = None
        limit_text = ""
        if error:
            if isinstance(error, dict):
                message = as_str(error.get("message"))
                limit_text = " ".join(
                    str(error.get(key, "")) for key in ("type", "message", "code", "status")
                )
            else:
                message = as_str(error)
                limit_text = message or ""
            message = _clip(message or "gemini reported an error")
        stats = as_dict(parsed.get("stats"))
        tokens_in = tokens_out = cached_total = 0
        models: list[ModelTokens] = []
        per_model = stats.get("models")
        for name, model in per_model.items() if isinstance(per_model, dict) else []:
            tokens = model.get("tokens") if isinstance(model, dict) else None
            if not isinstance(tokens, dict):
                continue
            prompt = as_int(tokens.get("prompt")) or as_int(tokens.get("input"))
            cached = min(as_int(tokens.get("cached")), prompt)
            produced = sum(as_int(tokens.get(key)) for key in ("candidates", "thoughts", "tool"))
            total = as_int(tokens.get("total"))
            # The total is the whole bill (thoughts and tool tokens too); the
            # parts fill in for an older CLI that printed none.
            output = max(total - prompt, produced) if total else produced
            tokens_in += prompt
            tokens_out += output
            cached_total += cached
            models.append(
                ModelTokens(model=str(name), input=prompt - cached, cached=cached, output=output)
            )
        tools = as_dict(stats.get("tools"))
        rate_limit = None
        if message is not None:
            rate_limit = detect_limit(f"{limit_text} {message}")
            if rate_limit is None and isinstance(error, dict):
                # The API's own error object: code 429 or status RESOURCE_EXHAUSTED.
                code = 429 if error.get("status") == "RESOURCE_EXHAUSTED" else error.get("code")
                rate_limit = limit_from_status(code, message)
        return Observation(
            format="gemini-json",
            done=message is None and has_marker_line(response, self._marker),
            is_error=message is not None,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            tokens_cached=cached_total,
            tool_calls=as_int(tools.get("totalCalls")),
            error=message,
            rate_limit=rate_limit,
            summary=_clip(response) if response else None,
            models=tuple(models),
            session_id=as_str(parsed.get("session_id")),
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
