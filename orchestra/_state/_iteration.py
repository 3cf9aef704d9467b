"""One iteration's shape, declared once: its recorded facts and what was decided.

The engine's ``IterationRecord`` (what the decision function reads) and the
timeline's ``iteration.finished`` event (what a replay reads back) are both
built on these classes, so a field of an iteration is spelled here only:

- :class:`IterationFacts`: the facts the record and its event hold alike
  (numbers, words, flags, the provider's refusal as a :class:`RateLimitEvent`).
- :class:`IterationDecision`: what the loop decided about the iteration, which
  the event adds to the record.

Two facts are not here. The signals' class lives above this layer (in
``orchestra._stagnation``): the engine's record holds them typed, the event as
JSON (``IterationFinished.signals``), and the engine converts them. The rate
window's calls ride in the event's ``extra`` (``calls_remaining``,
``calls_allowed``), as they always have.

The timeline's strict converter (``_strict.py``) decodes them by their
resolved field types.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class RateLimitEvent:
    """The provider refused for now: all loops should wait rather than count failures.

    Attributes:
        status: The provider's word (``rejected`` for Claude's rate_limit_event).
        resets_at: Wall-clock epoch seconds when the limit resets, when known.
        kind: Which limit (``five_hour`` ...), when known.
    """

    status: str
    resets_at: float | None = None
    kind: str | None = None


# The facts are a declaration, not a value: build an IterationRecord or an
# IterationFinished, which generate their own __init__, __eq__ and __repr__ over
# every field; the bases skip generating theirs (forge timeline's start-up pays
# for every class built). Not slotted: the event is built on these and on
# ``Event``, and only one base of a class may lay out slots.
@attrs.frozen(kw_only=True, slots=False, init=False, repr=False, eq=False)
class IterationFacts:
    """The facts of one iteration that its record and its event hold alike.

    Attributes:
        failure: Why the iteration failed, in a few words: the process's
            ending (exit 1, timed out ...) or the error the agent reported in
            its own output. None when it did not fail.
        cannot_start: The executor could not run at all (not found, not executable).
        done: The executor signalled done (report or marker) and did not fail.
        rate_limit: The provider's refusal its output reported (None: none).
        report_problems: What was wrong with the executor's report, if anything.
        integrity: Protected paths the iteration harmed (restored since), as
            recorded; empty when nothing was harmed, None when no integrity
            check ran.
        integrity_detail: What the integrity check restored, in words (None: nothing).
        verify: The verdict of the verify the loop ran after it (None: none ran).
        verify_by_hook: That verdict is the one the executor's Stop hook
            recorded in the breaker during the iteration (the loop ran none
            of its own, and the breaker already counts it).
    """

    run_id: str
    iteration: int
    duration: float = 0.0
    exit: int | None = None
    timed_out: bool = False
    signal: int | None = None
    start_error: str | None = None
    output_bytes: int = 0
    output_lines: int = 0
    tokens: int = 0
    tool_calls: int = 0
    cost_usd: float = 0.0
    permission_denials: int = 0
    done: bool = False
    failure: str | None = None
    error: str | None = None
    rate_limit: RateLimitEvent | None = None
    parse_note: str | None = None
    cost_note: str | None = None
    report_problems: tuple[str, ...] = ()
    log: str | None = None
    integrity: tuple[dict[str, Any], ...] | None = None
    verify: str | None = None
    cannot_start: bool = False
    integrity_detail: str | None = None
    cost_estimated: bool = False
    tokens_cached: int = 0
    session: str | None = None
    guard_refusals: int = 0
    verify_by_hook: bool = False


@attrs.frozen(kw_only=True, slots=False)
class IterationDecision:
    """What the loop decided about one iteration.

    Attributes:
        gates: Each gate's reading after it (``state`` and ``detail``), by name.
        judged: The decision counted it (a provider's refusal is not judged).
        trip: The trip it caused, if any (``stagnation``, ``gate-open`` ...).
        score: The stagnation score of this iteration (None: not measured).
        window_score: The stagnation score over the detectors' window.
        risk: The risk the alerts read (``low``, ``high`` ...).
        circuit: The loop circuit's state after it.
        pause: Seconds the loop paused for a provider's limit after it.
    """

    gates: dict[str, Any] = attrs.field(factory=dict)
    judged: bool = True
    trip: str | None = None
    score: int | None = None
    window_score: int | None = None
    risk: str | None = None
    circuit: str | None = None
    pause: float | None = None


FACTS = tuple(field.name for field in attrs.fields(IterationFacts))
DECISION = tuple(field.name for field in attrs.fields(IterationDecision))


def facts_of(iteration: IterationFacts) -> dict[str, Any]:
    """The shared facts of a record or an event, by name (to build the other from)."""
    return {name: getattr(iteration, name) for name in FACTS}


def decision_of(iteration: IterationDecision) -> IterationDecision:
    """The decision an event holds, on its own."""
    return IterationDecision(**{name: getattr(iteration, name) for name in DECISION})
