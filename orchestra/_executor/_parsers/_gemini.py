"""Gemini CLI's ``-o json`` document (and its error on stderr), read into one Observation."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .._limits import OVERLOADED, detect_limit, limit_from_status
from .._observation import ModelTokens, Observation, RateLimitEvent
from ._common import (
    MAX_DOCUMENT,
    Tail,
    TextParser,
    as_dict,
    as_int,
    as_str,
    clip,
    first_object,
    has_marker_line,
    last_json_object,
)

# The Gemini API's status for an overloaded model ("The model is overloaded.
# Please try again later."), which the CLI reports once its retries are spent.
_UNAVAILABLE = 503


class GeminiParser:
    """Gemini CLI ``-o json``: a single (often pretty-printed) JSON document.

    Tokens are each model's ``total`` (thoughts and tool tokens included);
    errors come as ``{"error": {"type", "message", "code"}}``, on stdout or
    (from the CLIs that write errors apart) on stderr. stderr counts only for
    a run that did not complete: the CLI also logs there each failed attempt
    it then retried (``_ApiError: {"error": …}``), and the JavaScript dumps of
    its errors, before the JSON error it exits with.
    """

    def __init__(self, done_marker: str, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock  # wall-clock epoch seconds: what a relative reset counts from
        self._marker = done_marker.strip()
        self._text = TextParser(done_marker, "gemini-json")
        self._document = bytearray()
        self._too_big = False
        self._stderr = Tail()

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
        parsed = first_object(bytes(self._document))
        stderr_text = self._stderr.text()
        if not _completed(parsed):
            stderr_doc = _last_error(stderr_text)
            if stderr_doc is not None and not (parsed or {}).get("error"):
                # The CLI wrote its error apart, on stderr: it is this run's error.
                parsed = {**stderr_doc, **(parsed or {}), "error": stderr_doc["error"]}
        if parsed is None:
            return Observation(
                format="gemini-json",
                done=text_view.done,
                rate_limit=detect_limit(stderr_text, self._clock()),
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
            message = clip(message or "gemini reported an error")
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
            now = self._clock()
            rate_limit = detect_limit(f"{limit_text} {message}", now)
            if rate_limit is None and isinstance(error, dict):
                rate_limit = _limit_from_error(error, message, now)
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
            summary=clip(response) if response else None,
            models=tuple(models),
            session_id=as_str(parsed.get("session_id")),
        )


def _completed(document: dict[str, Any] | None) -> bool:
    """Whether stdout holds a finished run: a response and no error."""
    return (
        document is not None
        and not document.get("error")
        and isinstance(document.get("response"), str)
    )


def _last_error(stderr: str) -> dict[str, Any] | None:
    """The last JSON object on stderr with an ``error``: the one the CLI exited with."""
    return last_json_object(stderr, lambda found: bool(found.get("error")))


def _limit_from_error(error: dict[str, Any], message: str, now: float) -> RateLimitEvent | None:
    """The limit the API's own error object says: 429 or RESOURCE_EXHAUSTED, 503 overloaded."""
    code = error.get("code")
    if error.get("status") == "RESOURCE_EXHAUSTED":
        code = 429
    if code == _UNAVAILABLE or error.get("status") == "UNAVAILABLE":
        return RateLimitEvent(status=OVERLOADED, kind="overloaded")
    return limit_from_status(code, message, now)
