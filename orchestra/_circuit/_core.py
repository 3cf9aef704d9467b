"""The loop circuit of a supervised loop: CLOSED -> OPEN -> (cooldown) -> HALF_OPEN -> probe.

Pure: states are frozen records and transitions are functions of the state,
the policy and the time they are given. Times are wall-clock epoch seconds,
because the state is persisted and a restarted supervisor must honour a
cooldown that began before it; the loop converts what remains into a sleep on
trio's monotonic clock, so a clock jump during the wait changes nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    # Only named in annotations: reading a circuit (forge status) needs no policy model.
    from .._policy import BreakerPolicy

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half-open"


def _finite(_instance: object, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, got {value!r}")


@attrs.frozen
class CircuitState:
    """What ``.forge/changes/<c>/breaker.yaml`` holds.

    Attributes:
        state: ``closed``, ``open`` or ``half-open``.
        reason: Why it last opened.
        opened_at: Wall-clock epoch seconds of the last opening.
        cooldown: Seconds of the current cooldown (doubles after a failed probe).
        opens: How many times it has opened in this loop's life.
        escalated: It opened for good: a human must review and reset it.
        iterations_used: Iterations the loop has run, so a rerun continues.
        finished: How the loop last ended (``done``, ``iterations-exhausted`` ...), if it did.
        blocked: Set when the file was unreadable and moved aside.
        recovery_type: The kind of trip whose recovery strategy is in force, if one is.
        recovery_step: That strategy's place in its list (1 = the first).
        recovery_tried: The last step tried per kind, as ``kind:step`` words.
        watch_left: Iterations still watched after a probe closed the circuit.
        recovery_error: The error fingerprint the iteration that opened it ended
            with, so a probe failing on the same error is known for it.
        recovery_alert: The alert whose promotion opened it: a probe must also
            clear that alert's condition to close it.
        recovery_detector: The stagnation detector whose pattern opened it: a
            probe that repeats the pattern fails, however much else it did.
    """

    state: str = attrs.field(
        default=CLOSED, validator=attrs.validators.in_((CLOSED, OPEN, HALF_OPEN))
    )
    reason: str | None = None
    opened_at: float | None = attrs.field(default=None, validator=_finite)
    # A cooldown read from disk must be a real span: .inf would wait forever.
    cooldown: float | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(attrs.validators.and_(attrs.validators.ge(0), _finite)),
    )
    opens: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    escalated: bool = False
    iterations_used: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    finished: str | None = None
    blocked: str | None = None
    recovery_type: str | None = None
    recovery_step: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    recovery_tried: str = ""
    watch_left: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    recovery_error: str | None = None
    recovery_alert: str | None = None
    recovery_detector: str | None = None


CLOSED_CIRCUIT = CircuitState()


def trip(
    circuit: CircuitState, reason: str, *, now: float, policy: BreakerPolicy, curable: bool = True
) -> CircuitState:
    """Open the circuit (from CLOSED, or from HALF_OPEN after a failed probe).

    The first opening cools down for ``policy.cooldown``; each failed probe
    doubles the cooldown up to ``policy.cooldown_max``. The circuit escalates
    instead when the policy says so, when it has already opened ``max_opens``
    times, or when the reason is not one time can cure (a spent budget).
    """
    opens = circuit.opens + 1
    if circuit.state == HALF_OPEN and circuit.cooldown:
        cooldown = min(circuit.cooldown * 2, policy.cooldown_max.seconds)
    else:
        cooldown = policy.cooldown.seconds
    escalated = not curable or policy.on_open == "escalate" or opens > policy.max_opens
    return attrs.evolve(
        circuit,
        state=OPEN,
        reason=reason,
        opened_at=now,
        cooldown=cooldown,
        opens=opens,
        escalated=escalated,
    )


def half_open(circuit: CircuitState) -> CircuitState:
    """The cooldown has elapsed: admit exactly one probe iteration."""
    return attrs.evolve(circuit, state=HALF_OPEN)


def close(circuit: CircuitState) -> CircuitState:
    """The probe made progress: close the circuit and reset the cooldown."""
    return attrs.evolve(circuit, state=CLOSED, reason=None, opened_at=None, cooldown=None)


def cooldown_remaining(circuit: CircuitState, now: float) -> float:
    """Seconds until an open circuit may probe (0 when it is not open).

    An ``opened_at`` in the future (the clock went back, or the file came from
    a machine whose clock runs ahead) keeps the whole cooldown ahead rather
    than closing early or waiting forever.
    """
    if circuit.state != OPEN or circuit.cooldown is None:
        return 0.0
    if circuit.opened_at is None or circuit.opened_at > now:
        return circuit.cooldown
    return max(0.0, min(circuit.cooldown, circuit.opened_at + circuit.cooldown - now))
