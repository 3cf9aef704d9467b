"""A script of model replies: what a scripted model server says, turn by turn.

A script is provider-neutral. Each :class:`Conversation` is one agent session
as the CLI sees it: a list of :class:`Reply` objects, the model's answers in
order. A reply is some text and the tool calls the model asks for, in terms
that every agent CLI has a tool for (:class:`WriteFile`, :class:`RunShell`)
or in the CLI's own terms (:class:`ToolCall`); each provider's adapter turns
them into its API's shapes and its CLI's tool names. A reply without calls
ends the agent's turn.

A reply may be preceded by :class:`Failure` answers: the server refuses the
first attempts at that reply (a 429 with its headers, a 5xx, a usage limit)
and serves the reply to the attempt after them, as a provider does when the
CLI retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs


@attrs.frozen
class WriteFile:
    """Create or overwrite ``path`` (relative to the agent's working directory)."""

    path: str
    content: str


@attrs.frozen
class RunShell:
    """Run ``command`` in the agent's shell tool."""

    command: str


@attrs.frozen
class ToolCall:
    """A tool call in the CLI's own terms: its tool ``name`` and ``arguments``."""

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


Call = WriteFile | RunShell | ToolCall


@attrs.frozen
class Usage:
    """The tokens the server reports for one reply."""

    input: int = 120
    output: int = 30
    cached: int = 0


@attrs.frozen
class Failure:
    """An HTTP error the server answers with instead of a reply.

    Attributes:
        status: the HTTP status (429, 500, 503, 529 …).
        message: the error's message, in the provider's error body.
        headers: extra response headers (``retry-after``, ``x-ratelimit-*``).
        body: the whole error body, when the provider's usual shape will not do.
        kind: the provider's error type or code (``rate_limit_error``,
            ``usage_limit_reached``, ``RESOURCE_EXHAUSTED``); the adapter's
            default for the status when empty.
        times: how many attempts in a row get this failure.
    """

    status: int
    message: str = "scripted failure"
    headers: Mapping[str, str] = attrs.field(factory=dict)
    body: Mapping[str, Any] | None = None
    kind: str = ""
    times: int = 1


@attrs.frozen
class Reply:
    """One answer of the model: text, then tool calls (none: the turn ends)."""

    text: str = ""
    calls: tuple[Call, ...] = ()
    usage: Usage = Usage()
    failures: tuple[Failure, ...] = ()
    model: str = ""  # the model the answer says it came from; the request's when empty

    @property
    def attempts_refused(self) -> int:
        return sum(failure.times for failure in self.failures)

    def failure_for(self, attempt: int) -> Failure | None:
        """The failure served to the ``attempt``-th try (0-based), or None: the reply."""
        for failure in self.failures:
            if attempt < failure.times:
                return failure
            attempt -= failure.times
        return None


@attrs.frozen
class Conversation:
    """One agent session's replies; ``match`` picks it by a substring of the prompt."""

    replies: tuple[Reply, ...]
    match: str = ""


@attrs.frozen
class Script:
    """The conversations a server plays, each taken once, in order, by its ``match``."""

    conversations: tuple[Conversation, ...]

    @classmethod
    def of(cls, *replies: Reply) -> Script:
        """A script of one conversation."""
        return cls((Conversation(tuple(replies)),))
