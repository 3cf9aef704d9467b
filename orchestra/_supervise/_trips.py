"""Trip conditions: what opens a supervised loop's circuit after an iteration.

A registry, not a hard-coded list: each condition is a function of what the
iteration left behind, and later controls (stagnation, integrity) register
their own. The first condition that holds names the reason.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from .._executor import IterationOutcome
from .._policy import Policy
from .._protect._check import INTEGRITY, IntegrityReport
from .._spend import budget_exceeded, read_spend
from .._stagnation import Assessment
from .._state import ChangePaths
from .._verify import VerifyReport, read_breaker


@attrs.frozen
class TripContext:
    """What a condition may look at after one iteration."""

    paths: ChangePaths
    policy: Policy
    outcome: IterationOutcome
    verify: VerifyReport | None
    stagnation: Assessment | None = None
    integrity: IntegrityReport | None = None


@attrs.frozen
class Trip:
    """A condition that holds: the reason the circuit opens.

    ``curable`` is False for what no cooldown can mend (a spent budget): the
    loop then escalates at once instead of cooling down.
    """

    condition: str
    reason: str
    curable: bool = True
    evidence: dict[str, object] = attrs.field(factory=dict)


TripCondition = Callable[[TripContext], Trip | None]
_REGISTRY: list[tuple[str, TripCondition]] = []


def trip_condition(name: str) -> Callable[[TripCondition], TripCondition]:
    """Register a trip condition under ``name`` (evaluated in registration order)."""

    def register(condition: TripCondition) -> TripCondition:
        _REGISTRY.append((name, condition))
        return condition

    return register


def registered() -> list[str]:
    return [name for name, _ in _REGISTRY]


def judge(context: TripContext) -> Trip | None:
    """The first registered condition that holds after this iteration, if any."""
    for _name, condition in _REGISTRY:
        if (trip := condition(context)) is not None:
            return trip
    return None


@trip_condition(INTEGRITY)
def integrity(context: TripContext) -> Trip | None:
    """The iteration harmed a protected path (restored since): a human must look.

    Not curable: an agent that deletes what it was told to keep is not
    waited out and retried, it is escalated (seed 003: halt immediately).
    """
    report = context.integrity
    if report is None or not report.harmed:
        return None
    return Trip(
        INTEGRITY,
        f"integrity: {report.detail()}",
        curable=False,
        evidence={"harmed": report.as_record()},
    )


@trip_condition("verify")
def verify_streak(context: TripContext) -> Trip | None:
    """The change's verify breaker reached ``max_failures`` (or cannot be read)."""
    if context.verify is None and not context.policy.verify.command.strip():
        return None
    state = read_breaker(context.paths).after
    if state.blocked is not None:
        return Trip("verify", f"verify: state unreadable ({state.blocked})", curable=False)
    if state.open:
        return Trip("verify", f"verify: {state.consecutive_failures} consecutive failures")
    return None


@trip_condition("budget")
def budget(context: TripContext) -> Trip | None:
    """A spend ceiling is reached: no cooldown brings the money back."""
    if not context.policy.budget.has_ceiling:
        return None
    reading = read_spend(context.paths)
    if reading.totals.blocked is not None:
        return Trip("budget", f"budget: spend state unreadable ({reading.totals.blocked})", False)
    exceeded = budget_exceeded(reading.totals, context.policy.budget)
    return Trip("budget", f"budget: {exceeded}", curable=False) if exceeded else None


@trip_condition("stagnation")
def stagnation(context: TripContext) -> Trip | None:
    """A stagnation detector holds: no progress, identical errors, the score ... (seed 003)."""
    found = context.stagnation
    if found is None or found.reason is None:
        return None
    return Trip("stagnation", found.reason, evidence=dict(found.evidence))
