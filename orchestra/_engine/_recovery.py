"""Recovery after an opening: the strategy the next iterations are given, and the watch.

When a supervised loop's circuit opens, the iterations after it (the
half-open probe first) are handed the next strategy not yet tried for that
kind of trip, from ``[recovery]``: in the executor's environment
(``FORGE_RECOVERY_TYPE``, ``FORGE_RECOVERY_STRATEGY``, ``FORGE_RECOVERY_STEP``)
and in a named executor's prompt. Each kind's list ends with escalation to a
person: an opening that reaches it escalates.

After a probe closes the circuit, the next ``[recovery] watch`` iterations are
watched: a stagnation trip inside them escalates at once, since the recovery
did not hold.

Pure: everything here is a function of the circuit's state and the policy, so
``forge policy simulate`` replays it as the live loop ran it. What was tried
is kept in the circuit's state (``breaker.yaml``), so a restarted supervisor
goes on with the next strategy rather than the first.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from .._circuit import CLOSED, CircuitState
from .._policy import Policy, RecoveryPolicy
from .._state import Guidance

# The kinds of trip a strategy list exists for, as the environment names them.
NO_PROGRESS = "no-progress"
IDENTICAL_ERRORS = "identical-errors"
TEST_FIX_LOOP = "test-fix-loop"
CIRCULAR = "circular"
PERMISSION_DENIALS = "permission-denials"
VERIFY = "verify"
BUDGET = "budget"

# A stagnation detector (or a promoted alert) -> the kind of trip it is.
_DETECTOR_KINDS = {
    "no-progress": NO_PROGRESS,
    "score": NO_PROGRESS,
    "output-decline": NO_PROGRESS,
    "identical-errors": IDENTICAL_ERRORS,
    "test-fix-loop": TEST_FIX_LOOP,
    "circular": CIRCULAR,
    "permission-denials": PERMISSION_DENIALS,
    # The guard's refusals: the same advice (work without the refused calls).
    "protected-paths": PERMISSION_DENIALS,
    "loop-count": NO_PROGRESS,
    "no-tasks": NO_PROGRESS,
    "no-files": NO_PROGRESS,
    "negative-score": NO_PROGRESS,
    "output-volume": NO_PROGRESS,
    "calls-remaining": NO_PROGRESS,
    "error-frequency": IDENTICAL_ERRORS,
    "pass-rate": TEST_FIX_LOOP,
}

# The placeholder a prompt may hold for the strategy; without it the strategy is appended.
PLACEHOLDER = "{recovery}"


@attrs.frozen
class Strategy:
    """The strategy in force: ``step`` of ``steps`` for trips of kind ``kind``."""

    kind: str
    step: int
    steps: int
    text: str

    @property
    def escalates(self) -> bool:
        return self.step >= self.steps

    def environment(self) -> tuple[tuple[str, str], ...]:
        """What the executor's environment carries about it."""
        return (
            ("FORGE_RECOVERY_TYPE", self.kind),
            ("FORGE_RECOVERY_STRATEGY", self.text),
            ("FORGE_RECOVERY_STEP", str(self.step)),
        )

    def instruction(self) -> str:
        """The words a prompt gets."""
        return (
            f"Forge recovery: this loop stalled ({self.kind}). "
            f"Strategy {self.step} of {self.steps}: {self.text}"
        )

    def describe(self) -> str:
        """One line for the dashboard and ``forge status``."""
        return f"{self.kind} {self.step}/{self.steps}: {self.text}"


def trip_kind(condition: str, detector: str | None) -> str | None:
    """The kind of trip a condition is, for its strategy list (None: no list for it)."""
    if condition == "verify":
        return VERIFY
    if condition == "budget":
        return BUDGET
    if condition in ("stagnation", "alert") and detector is not None:
        return _DETECTOR_KINDS.get(detector, NO_PROGRESS)
    return None


def strategies(kind: str, policy: RecoveryPolicy) -> tuple[str, ...]:
    """The ordered strategies for a kind of trip."""
    return tuple(getattr(policy, kind.replace("-", "_")))


def in_force(circuit: CircuitState, policy: Policy) -> Strategy | None:
    """The strategy the next iteration is given, if one is in force."""
    kind, step = circuit.recovery_type, circuit.recovery_step
    if kind is None or step <= 0 or not policy.recovery.enabled:
        return None
    try:
        steps = strategies(kind, policy.recovery)
    except AttributeError:
        return None  # a kind this release does not know (a newer breaker.yaml)
    step = min(step, len(steps))
    return Strategy(kind, step, len(steps), steps[step - 1])


def tried(circuit: CircuitState) -> dict[str, int]:
    """The last step tried for each kind of trip."""
    found: dict[str, int] = {}
    for word in circuit.recovery_tried.split():
        kind, _, step = word.partition(":")
        if step.isdigit():
            found[kind] = int(step)
    return found


def on_open(
    before: CircuitState,
    opened: CircuitState,
    kind: str | None,
    policy: Policy,
    *,
    stagnation: bool,
) -> CircuitState:
    """The circuit went from ``before`` to ``opened``: the watch, then the next strategy.

    A stagnation trip while the circuit is watched (closed by a probe less
    than ``[recovery] watch`` iterations ago) escalates at once. Otherwise the
    next untried strategy of ``kind`` is put in force; the last one of a list
    escalates. A failed probe (``kind`` None) moves on in the list in force.
    """
    if stagnation and before.state == CLOSED and before.watch_left > 0:
        reason = (
            f"stagnation recurred within {policy.recovery.watch} iteration(s) after "
            f"recovery: {opened.reason}"
        )
        return attrs.evolve(opened, reason=reason, escalated=True, watch_left=0)
    if kind is None:
        kind = before.recovery_type
    if kind is None or not policy.recovery.enabled:
        return attrs.evolve(opened, watch_left=0)
    steps = strategies(kind, policy.recovery)
    done = tried(before)
    step = min(done.get(kind, 0) + 1, len(steps))
    done[kind] = step
    circuit = attrs.evolve(
        opened,
        recovery_type=kind,
        recovery_step=step,
        recovery_tried=" ".join(f"{k}:{v}" for k, v in sorted(done.items())),
        watch_left=0,
    )
    if step >= len(steps) and not circuit.escalated:
        reason = f"{opened.reason} (no recovery strategy left for {kind})"
        circuit = attrs.evolve(circuit, escalated=True, reason=reason)
    return circuit


def on_close(circuit: CircuitState, policy: Policy) -> CircuitState:
    """A probe closed the circuit: watch the next iterations, the strategy still in force."""
    if policy.recovery.watch == 0:
        return attrs.evolve(circuit, recovery_type=None, recovery_step=0, watch_left=0)
    return attrs.evolve(circuit, watch_left=policy.recovery.watch)


def on_quiet(circuit: CircuitState) -> CircuitState:
    """An iteration that neither opened nor closed the circuit: one fewer to watch.

    When the watch is over the recovery held: no strategy is in force any more
    (what was tried is kept, for the next opening of the same kind).
    """
    if circuit.state != CLOSED or circuit.watch_left == 0:
        return circuit
    left = circuit.watch_left - 1
    if left == 0:
        return attrs.evolve(circuit, watch_left=0, recovery_type=None, recovery_step=0)
    return attrs.evolve(circuit, watch_left=left)


def with_strategy(prompt: str, strategy: Strategy | None) -> str:
    """A prompt with the strategy in force: at ``{recovery}``, or appended."""
    text = strategy.instruction() if strategy is not None else ""
    if PLACEHOLDER in prompt:
        return prompt.replace(PLACEHOLDER, text)
    if not text:
        return prompt
    return f"{prompt}\n\n{text}" if prompt else text


def with_brief(prompt: str, brief: str) -> str:
    """A prompt with the run's brief (what the run is for beyond it), appended."""
    if not brief:
        return prompt
    return f"{prompt}\n\n{brief}" if prompt else brief


def with_question(prompt: str, question: str | None) -> str:
    """A prompt with guidance to decide, after an iteration that asked instead of acting.

    Nobody answers during a run: the agent is told to choose, say what it
    chose and why, and go on.
    """
    if not question:
        return prompt
    text = (
        f"Forge: your last iteration ended on a question ({question}). Nobody answers "
        "during this run: decide yourself, say in one line what you chose and why, and go on."
    )
    return f"{prompt}\n\n{text}" if prompt else text


# The placeholder a prompt may hold for a person's guidance; without it the guidance is appended.
GUIDANCE_PLACEHOLDER = "{guidance}"


def steering_text(guidance: Sequence[Guidance]) -> str:
    """The words an iteration gets of a person's guidance (``forge steer``), one line each."""
    return "\n".join(f"Guidance from a person ({given.by}): {given.text}" for given in guidance)


def with_steering(prompt: str, guidance: Sequence[Guidance]) -> str:
    """A prompt with a person's guidance: at ``{guidance}``, or appended."""
    text = steering_text(guidance)
    if GUIDANCE_PLACEHOLDER in prompt:
        return prompt.replace(GUIDANCE_PLACEHOLDER, text)
    if not text:
        return prompt
    return f"{prompt}\n\n{text}" if prompt else text


# The kinds a strategy list exists for, in the order the plan names them.
KINDS = (NO_PROGRESS, IDENTICAL_ERRORS, TEST_FIX_LOOP, CIRCULAR, PERMISSION_DENIALS, VERIFY)


def openings_before_escalation(policy: Policy) -> dict[str, int]:
    """Per kind of trip: how many openings cool down before the next one escalates.

    The first of two limits: ``[breaker] max_opens`` (all openings count) and
    the kind's strategy list, whose last step escalates (openings of that kind
    count). A budget opening escalates at once and is not listed.
    """
    if policy.breaker.on_open == "escalate":
        return dict.fromkeys(KINDS, 0)
    limit = policy.breaker.max_opens
    if not policy.recovery.enabled:
        return dict.fromkeys(KINDS, limit)
    return {kind: min(limit, len(strategies(kind, policy.recovery)) - 1) for kind in KINDS}


def escalation_text(policy: Policy) -> str:
    """The plan's words for when a cooling-down circuit escalates."""
    counts = openings_before_escalation(policy)
    most = max(counts.values())
    sooner = [f"{kind}: {count}" for kind, count in counts.items() if count < most]
    text = f"after {most} opening(s), escalate"
    return f"{text} ({', '.join(sooner)})" if sooner else text


def recovery_text(policy: Policy) -> str:
    """The plan's ``recovery:`` line: the strategies, the watch, the alerts."""
    recovery_policy = policy.recovery
    if recovery_policy.enabled:
        counts = ", ".join(f"{kind} {len(strategies(kind, recovery_policy))}" for kind in KINDS)
        parts = [
            f"strategies per kind: {counts}",
            f"watch {recovery_policy.watch} iteration(s) after a probe closes the circuit",
        ]
    else:
        parts = ["off (a probe runs as the iterations before it)"]
    alerts = policy.alerts
    if not alerts.enabled:
        parts.append("alerts off")
    elif alerts.trip_on:
        parts.append(f"alerts on (trip on: {', '.join(alerts.trip_on)})")
    else:
        parts.append("alerts on")
    return "; ".join(parts)
