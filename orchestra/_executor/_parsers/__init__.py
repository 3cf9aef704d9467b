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

import time
from collections.abc import Callable
from typing import Protocol

from .._observation import Observation
from ._claude import ClaudeParser
from ._codex import CodexParser
from ._common import TextParser, finite_amount, has_marker_line
from ._gemini import GeminiParser

__all__ = [
    "ClaudeParser",
    "CodexParser",
    "GeminiParser",
    "OutputParser",
    "TextParser",
    "finite_amount",
    "has_marker_line",
    "make_parser",
]


class OutputParser(Protocol):
    """Fed every chunk of an iteration's output; then asked for the Observation."""

    def feed(self, chunk: bytes) -> None: ...

    def feed_stderr(self, chunk: bytes) -> None: ...

    def finish(self) -> Observation: ...


def make_parser(
    output_format: str, done_marker: str, *, clock: Callable[[], float] = time.time
) -> OutputParser:
    """The parser for one of ``OUTPUT_FORMATS``.

    ``clock`` (wall-clock epoch seconds) turns a provider's relative reset
    ("try again in 30 seconds") into a time: the loop's wall clock, which in a
    fleet is the server's, so that a host whose own clock is off pauses as long
    as the provider said.
    """
    if output_format in ("claude-json", "claude-stream-json"):
        return ClaudeParser(output_format, done_marker, clock=clock)
    if output_format == "codex-json":
        return CodexParser(done_marker, clock=clock)
    if output_format == "gemini-json":
        return GeminiParser(done_marker, clock=clock)
    return TextParser(done_marker)
