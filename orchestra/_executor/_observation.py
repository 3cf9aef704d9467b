"""What one iteration of an agent said about itself, in one record."""

from __future__ import annotations

import attrs

# Recorded as the timeline holds it, so declared with the iteration's facts.
from .._state import RateLimitEvent as RateLimitEvent


@attrs.frozen
class ModelTokens:
    """One model's share of an iteration's tokens, for pricing.

    ``input`` excludes ``cached`` input (cache reads), which is priced apart.
    """

    model: str
    input: int = 0
    cached: int = 0
    output: int = 0


@attrs.frozen
class Observation:
    """One iteration's output, parsed.

    Attributes:
        format: The output format it was read as.
        done: The agent signalled done (the done marker, in its final message
            for JSON formats) and reported no error.
        is_error: The agent's own output says the iteration failed.
        tokens_in: Input tokens (cache reads and writes included).
        tokens_out: Output tokens.
        cost_usd: Cost the agent reported.
        tool_calls: Tool calls made (0 when the format does not say).
        permission_denials: Tool uses the agent was refused (Forge's guard apart).
        guard_refusals: Tool uses Forge's guard refused, for harming a protected path.
        turns: Turns the agent took, when reported.
        error: The error the agent reported, if any.
        rate_limit: A provider limit that refused the agent, if any.
        summary: The agent's final message, if any (bounded).
        note: Why the structured output could not be read, if it could not
            (the output was then read as plain text, and is unreadable).
        tokens_cached: Of ``tokens_in``, the input read from the provider's cache.
        cost_reported: The agent reported its cost (else it may be estimated).
        models: Tokens per model, when the output says (for pricing).
        session_id: The agent session this iteration ran in, when reported.
    """

    format: str
    done: bool = False
    is_error: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    tool_calls: int = 0
    permission_denials: int = 0
    turns: int | None = None
    error: str | None = None
    rate_limit: RateLimitEvent | None = None
    summary: str | None = None
    note: str | None = None
    tokens_cached: int = 0
    cost_reported: bool = False
    models: tuple[ModelTokens, ...] = ()
    session_id: str | None = None
    guard_refusals: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def unreadable(self) -> bool:
        """A structured format whose output could not be read."""
        return self.note is not None
