"""The timeline's events, one attrs class per kind, and the one converter for them.

Every writer builds one of these classes and every reader decodes through
:func:`decode_event`, so an event's name and fields are spelled in this module
only (an iteration's fields in ``_iteration.py``). On disk an event is one JSON
object: ``ts``, ``seq``, ``event`` (the kind), ``change``, then the class's own
fields in declaration order.

Each known kind's fields are checked by the one strict converter
(``_strict.py``), built from the class's resolved field types: an int stands
for a float, a bool for nothing else, a list's items and a nested object's
fields are checked too.

Decoding never raises. A known kind whose fields do not fit its class, and a
kind this release does not know, decode to :class:`OtherEvent`, which keeps
the raw fields, so a damaged or newer timeline is still shown whole. Keys a
known kind does not declare are kept in ``extra`` and written back as they were.

Kinds:

- ``run.started`` / ``run.stopped``: a loop's beginning and its ending.
- ``iteration.started`` / ``iteration.finished``: one iteration; the finished
  event carries the iteration record the loop judged and what it decided, each
  declared once in ``_iteration.py`` (see also ``orchestra._engine``).
- ``protect.violation``: a protected path was harmed and restored.
- ``breaker.opened`` / ``breaker.half_open`` / ``breaker.closed``: the loop circuit.
- ``breaker.reset``: a human cleared the verify breaker or the loop circuit.
- ``verify``: one verify verdict and the streak after it.
- ``state.corrupt`` / ``state.rebuilt``: a state file moved aside, or rebuilt
  from this timeline.
- ``spend.reset``: a human restarted the spend totals.
- ``recovery.step``: the recovery strategy given to the iterations after an opening.
- ``alert.raised`` / ``alert.cleared``: a monitored figure crossed its threshold, or came back.
- ``forge.*``: the loop contract's events (see ``orchestra._contract``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ._iteration import IterationDecision, IterationFacts, facts_of
from ._strict import Misfit, shape_of

# The loop contract's event names, the only ones a person may also write by hand.
LOOP_STARTED = "forge.loop.started"
ITERATION_BEGUN = "forge.iteration.started"
STRATEGY_CHANGED = "forge.strategy.changed"
BLOCKED = "forge.blocked"
SHIP_READY = "forge.ship.ready"
CHECKPOINT = "forge.checkpoint"
CONTRACT_PREFIX = "forge."

VERIFY_BREAKER = "verify"
LOOP_CIRCUIT = "loop circuit"


@attrs.frozen(kw_only=True)
class Event:
    """What every event carries; ``ts`` and ``seq`` are set when it is appended."""

    kind: ClassVar[str] = ""
    ts: str | None = None
    seq: int | None = None
    change: str | None = None
    extra: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run.started"
    run_id: str
    plan: dict[str, Any] = attrs.field(factory=dict)
    gates: dict[str, Any] = attrs.field(factory=dict)
    supervised: bool = False
    circuit: str | None = None


@attrs.frozen(kw_only=True)
class RunStopped(Event):
    kind: ClassVar[str] = "run.stopped"
    run_id: str
    reason: str
    iterations: int
    gate: str | None = None
    detail: str | None = None


@attrs.frozen(kw_only=True)
class IterationStarted(Event):
    kind: ClassVar[str] = "iteration.started"
    run_id: str
    iteration: int


@attrs.frozen(kw_only=True)
class IterationFinished(IterationDecision, IterationFacts, Event):
    """One judged (or, for a provider's refusal, unjudged) iteration.

    The iteration's record (its :class:`IterationFacts`) and what was decided
    about it (its :class:`IterationDecision`), each declared once in
    ``_iteration.py``; on disk the line is flat, in that order, then the
    signals. The rate window's calls (``calls_remaining``, ``calls_allowed``)
    ride in ``extra``.

    Attributes:
        signals: The record's measured signals as JSON (None: the loop does
            not measure); their class, ``Signals``, lives above this layer.
    """

    kind: ClassVar[str] = "iteration.finished"
    signals: dict[str, Any] | None = None

    @classmethod
    def compose(
        cls,
        facts: IterationFacts,
        decision: IterationDecision,
        *,
        signals: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> IterationFinished:
        """The event of an iteration's facts (the engine's record is some) and its decision."""
        return cls(
            **facts_of(facts),
            **attrs.asdict(decision, recurse=False),
            signals=signals,
            extra=extra or {},
        )


@attrs.frozen(kw_only=True)
class ProtectViolation(Event):
    kind: ClassVar[str] = "protect.violation"
    run_id: str
    iteration: int
    harmed: list[dict[str, Any]] = attrs.field(factory=list)


@attrs.frozen(kw_only=True)
class _CircuitChange(Event):
    run_id: str
    reason: str
    cooldown: float | None = None
    opens: int = 0
    escalated: bool = False
    evidence: dict[str, Any] | None = None


@attrs.frozen(kw_only=True)
class BreakerOpened(_CircuitChange):
    kind: ClassVar[str] = "breaker.opened"


@attrs.frozen(kw_only=True)
class BreakerHalfOpen(_CircuitChange):
    kind: ClassVar[str] = "breaker.half_open"


@attrs.frozen(kw_only=True)
class BreakerClosed(_CircuitChange):
    kind: ClassVar[str] = "breaker.closed"


@attrs.frozen(kw_only=True)
class BreakerReset(Event):
    """A human cleared a breaker: ``breaker`` is ``verify`` or ``loop circuit``."""

    kind: ClassVar[str] = "breaker.reset"
    breaker: str
    # The verify breaker's.
    cleared_consecutive_failures: int | None = None
    was_open: bool | None = None
    # The loop circuit's.
    was: str | None = None
    opens: int | None = None
    iterations_used: int | None = None
    was_blocked: str | None = None
    # Why the person reset it (forge circuit --reset requires one).
    reason: str | None = None


@attrs.frozen(kw_only=True)
class VerifyRecorded(Event):
    kind: ClassVar[str] = "verify"
    verdict: str
    consecutive_failures: int
    max_failures: int | None = None
    open: bool = False
    blocked: str | None = None
    total_attempts: int = 0
    duration: float = 0.0
    checks: list[dict[str, Any]] = attrs.field(factory=list)
    scenarios: dict[str, Any] = attrs.field(factory=dict)
    commit: str | None = None
    tree: str | None = None
    # Set when a loop ran the verify after its iteration (not a hook or a person).
    run_id: str | None = None
    iteration: int | None = None


@attrs.frozen(kw_only=True)
class StateCorrupt(Event):
    kind: ClassVar[str] = "state.corrupt"
    file: str
    moved_to: str
    reason: str = ""


@attrs.frozen(kw_only=True)
class StateRebuilt(Event):
    kind: ClassVar[str] = "state.rebuilt"
    file: str
    consecutive_failures: int = 0
    open: bool = False
    blocked: str | None = None


@attrs.frozen(kw_only=True)
class SpendReset(Event):
    kind: ClassVar[str] = "spend.reset"
    tokens: int = 0
    tool_calls: int = 0
    cost_usd: float = 0.0
    was_blocked: str | None = None


@attrs.frozen(kw_only=True)
class ContractEvent(Event):
    """A loop-contract event (``forge.*``): its name and whatever fields it was given."""

    name: str
    fields: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class RecoveryStep(Event):
    """The strategy the iterations after an opening are given (``step`` of ``steps``)."""

    kind: ClassVar[str] = "recovery.step"
    run_id: str
    iteration: int | None = None
    trip_kind: str
    step: int
    steps: int
    strategy: str
    escalated: bool = False


@attrs.frozen(kw_only=True)
class AlertRaised(Event):
    """A monitored figure crossed its threshold."""

    kind: ClassVar[str] = "alert.raised"
    run_id: str
    iteration: int
    alert: str
    detail: str
    value: float | None = None
    threshold: float | None = None


@attrs.frozen(kw_only=True)
class AlertCleared(Event):
    """A raised alert's figure is back within its threshold."""

    kind: ClassVar[str] = "alert.cleared"
    run_id: str
    iteration: int
    alert: str
    detail: str = ""


@attrs.frozen(kw_only=True)
class OtherEvent(Event):
    """An event this release cannot type: an unknown kind, or fields that do not fit."""

    name: str
    fields: dict[str, Any] = attrs.field(factory=dict)


KINDS: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        RunStopped,
        IterationStarted,
        IterationFinished,
        ProtectViolation,
        BreakerOpened,
        BreakerHalfOpen,
        BreakerClosed,
        BreakerReset,
        VerifyRecorded,
        StateCorrupt,
        StateRebuilt,
        SpendReset,
        RecoveryStep,
        AlertRaised,
        AlertCleared,
    )
}
_HEADER = ("ts", "seq", "change")
# The fields every event carries that a line's body may not set.
_NOT_BODY = frozenset((*_HEADER, "extra"))


def event_name(event: Event) -> str:
    """The name an event is written under (``iteration.finished``, ``forge.blocked`` ...)."""
    if isinstance(event, ContractEvent | OtherEvent):
        return event.name
    return event.kind


def event_record(event: Event) -> dict[str, Any]:
    """The whole event as its timeline line holds it: the header, then its fields."""
    record: dict[str, Any] = {"ts": event.ts, "seq": event.seq, "event": event_name(event)}
    record["change"] = event.change
    record.update(encode_event(event))
    return record


def encode_event(event: Event) -> dict[str, Any]:
    """The event's fields as written after ``ts``, ``seq``, ``event`` and ``change``."""
    if isinstance(event, ContractEvent | OtherEvent):
        return {**event.fields, **event.extra}
    fields = {
        field.name: getattr(event, field.name)
        for field in attrs.fields(type(event))
        if field.name not in _NOT_BODY
    }
    shape_of(type(event)).plain(fields)
    fields.update(event.extra)
    return fields


def decode_event(raw: Mapping[str, Any]) -> Event:
    """An event read from a timeline line; never raises (see the module's docstring)."""
    ts, seq, change = raw.get("ts"), raw.get("seq"), raw.get("change")
    header: dict[str, Any] = {
        "ts": ts if isinstance(ts, str) else None,
        "seq": seq if isinstance(seq, int) else None,
        "change": change if isinstance(change, str) else None,
    }
    name = raw.get("event")
    body = {k: v for k, v in raw.items() if k not in (*_HEADER, "event")}
    cls = KINDS.get(name) if isinstance(name, str) else None
    if cls is None:
        if isinstance(name, str) and name.startswith(CONTRACT_PREFIX):
            return ContractEvent(**header, name=name, fields=body)
        return OtherEvent(**header, name=str(name), fields=body)
    shape = shape_of(cls)
    known = {k: v for k, v in body.items() if k in shape.checks and k not in _NOT_BODY}
    try:
        values = shape.values(known)
    except Misfit:  # a value that does not fit, or a required field missing
        return OtherEvent(**header, name=str(name), fields=body)
    extra = {k: v for k, v in body.items() if k not in known}
    return cls(**header, **values, extra=extra)
