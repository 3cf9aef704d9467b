"""Where a loop stands for the person reading ``forge status``, and what it waits on (pure).

A loop *needs you* when its last run ended any way but done (as the morning
report counts an escalation), or when a decision only a person may take holds
it: a verify breaker open, a circuit escalated, an integrity trip, a budget
spent. It is *running* while its last run has no ending recorded (or it was
killed before it could record one), *done* when that ending was done, and
*interrupted* when a person stopped it. A change no run has worked on, with
nothing to decide, is *idle*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._state import BLOCKED, CHECKPOINT, RunStarted, RunStopped

if TYPE_CHECKING:
    from .._circuit import CircuitState
    from .._verify import VerifyAttempts

NEEDS_YOU = "needs you"
RUNNING = "running"
INTERRUPTED = "interrupted"
STOPPED = "stopped"  # the ending of a loop a person stopped (forge stop)
IDLE = "idle"
DONE = "done"
# The headline's order: what asks for a person first, what is settled last.
ORDER = (NEEDS_YOU, RUNNING, INTERRUPTED, IDLE, DONE)
# Endings after which nothing is wrong: the loop is done, or a person stopped it.
_SETTLED = {DONE: DONE, INTERRUPTED: INTERRUPTED, STOPPED: INTERRUPTED}


@attrs.frozen
class Decision:
    """A decision only a person may take, and the command that takes it.

    Attributes:
        what: The decision in words (``verify breaker OPEN: 3/3 consecutive failures``).
        command: The command that clears it.
    """

    what: str
    command: str


@attrs.frozen
class Blocker:
    """What stopped a loop: the gate (or the ending, when no gate did) and why, in one line."""

    gate: str
    reason: str


@attrs.frozen
class Standing:
    """Where one loop stands.

    Attributes:
        state: One of :data:`ORDER`.
        blocker: What stopped it, when it needs you because of how its run ended.
        decisions: The decisions that hold it, each with its command.
        then: The commands that run it again once cleared, in order.
    """

    state: str
    blocker: Blocker | None = None
    decisions: tuple[Decision, ...] = ()
    then: tuple[str, ...] = ()


@attrs.frozen
class Held:
    """The gates' state as status reads it, for :func:`standing`."""

    circuit_escalated: bool = False
    circuit_reason: str | None = None
    circuit_blocked: str | None = None
    verify_open: bool = False
    verify_blocked: str | None = None
    verify_failures: int = 0
    verify_max: int | None = None

    @classmethod
    def of(cls, circuit: CircuitState, verify: VerifyAttempts) -> Held:
        """The gates' state from a loop's circuit and verify streak (its files, or the server's)."""
        return cls(
            circuit_escalated=circuit.escalated,
            circuit_reason=circuit.reason,
            circuit_blocked=circuit.blocked,
            verify_open=verify.open,
            verify_blocked=verify.blocked,
            verify_failures=verify.consecutive_failures,
            verify_max=verify.max_failures,
        )


def standing(
    change: str, records: Sequence[Mapping[str, Any]], held: Held, *, where: str, root: str
) -> Standing:
    """Where ``change`` stands, from its timeline's records and its gates' state.

    Args:
        change: The change's name, for the commands.
        records: Its timeline's events, oldest first.
        held: Its gates' state now.
        where: The folder it lives in ("" for the project's own).
        root: The project's folder.
    """
    prefix = f"cd {where} && " if where else ""
    decisions = (*_decisions(change, held, prefix), *_contract(change, records, prefix))
    started, stopped = _last_run(records)
    if started is None:
        return Standing(NEEDS_YOU if decisions else IDLE, decisions=decisions)
    if stopped is None:
        # A supervised loop waits out a cooldown by itself: only a decision stops it.
        return Standing(NEEDS_YOU if decisions else RUNNING, decisions=decisions)
    ending = str(stopped.get("reason") or "?")
    if ending in _SETTLED and not decisions:
        return Standing(_SETTLED[ending])
    gate, detail = stopped.get("gate"), stopped.get("detail")
    blocker = None
    if ending not in _SETTLED:
        blocker = Blocker(str(gate or ending), _one_line(str(detail or ending)))
    decisions = (*decisions, *_budget(change, gate, detail, prefix, decisions))
    then: tuple[str, ...] = ()
    if bool(started.get("supervised")) and ending != DONE:
        # Here, not at the top: the report's model is a quarter of status's
        # start, and only a supervised loop that needs a person uses it.
        from .._report import resume_commands

        taken = {decision.command for decision in decisions}
        commands = resume_commands(change, ending, _str(gate), (), where, root)
        then = tuple(command for command in commands if command not in taken)
    return Standing(NEEDS_YOU, blocker, decisions, then)


def headline(states: Sequence[str]) -> str:
    """``4 loops: 2 need you · 1 running · 1 done``; ``no loops yet`` for none."""
    if not states:
        return "no loops yet"
    counts = {state: states.count(state) for state in ORDER if state in states}
    parts = [
        f"{count} {'need you' if state == NEEDS_YOU and count > 1 else state}"
        for state, count in counts.items()
    ]
    return f"{len(states)} loop{'' if len(states) == 1 else 's'}: {' · '.join(parts)}"


def _decisions(change: str, held: Held, prefix: str) -> tuple[Decision, ...]:
    decisions = []
    reason = held.circuit_reason or "no reason recorded"
    if held.circuit_blocked:
        what = f"circuit state unreadable, moved aside: {held.circuit_blocked}"
        decisions.append(Decision(what, f"{prefix}forge circuit {change} --reset --reason WHY"))
    elif held.circuit_escalated:
        if reason.startswith("integrity"):
            what = f"integrity trip to review: {reason}"
            decisions.append(Decision(what, f"{prefix}forge timeline {change} --kind integrity"))
        elif reason.startswith("budget"):
            what = f"budget spent: {reason}"
            decisions.append(Decision(what, f"{prefix}forge spend {change} --reset"))
        else:
            what = f"circuit escalated: {reason}"
            decisions.append(Decision(what, f"{prefix}forge timeline {change}"))
        # The review, or the budget granted, is then said in the circuit's reset.
        decisions.append(
            Decision("reset the circuit", f"{prefix}forge circuit {change} --reset --reason WHY")
        )
    if held.verify_blocked:
        what = f"verify state BLOCKED: {held.verify_blocked}"
        decisions.append(Decision(what, f"{prefix}forge verify --change {change} --reset-breaker"))
    elif held.verify_open:
        limit = f"/{held.verify_max}" if held.verify_max else ""
        what = f"verify breaker OPEN: {held.verify_failures}{limit} consecutive failures"
        decisions.append(Decision(what, f"{prefix}forge verify --change {change} --reset-breaker"))
    return tuple(decisions)


def _contract(
    change: str, records: Sequence[Mapping[str, Any]], prefix: str
) -> tuple[Decision, ...]:
    """The loop contract's blockers not cleared since, and its owner decision not yet taken."""
    blockers: dict[str, None] = {}
    owner: str | None = None
    stage = "STAGE"
    for record in records:
        kind = record.get("event")
        if kind == BLOCKED and isinstance(record.get("detail"), str):
            blockers[_one_line(record["detail"])] = None
        elif kind == CHECKPOINT:
            stage = _str(record.get("stage")) or stage
            for cleared in record.get("cleared_blockers") or ():
                blockers.pop(_one_line(str(cleared)), None)
            if isinstance(record.get("decided"), str):
                owner = None
            if isinstance(record.get("owner_decision"), str) and record["owner_decision"]:
                owner = _one_line(record["owner_decision"])
    command = f"{prefix}forge checkpoint --change {change} --stage {stage}"
    decisions = [Decision(f"blocked: {b}", f"{command} --clear-blockers") for b in blockers]
    if owner is not None:
        decisions.append(Decision(f"owner decision: {owner}", f"{command} --decided TEXT"))
    return tuple(decisions)


def _budget(
    change: str, gate: object, detail: object, prefix: str, taken: Sequence[Decision]
) -> tuple[Decision, ...]:
    """A run stopped by its spend budget: granting more is the person's decision."""
    command = f"{prefix}forge spend {change} --reset"
    if gate != "spend budget" or any(d.command == command for d in taken):
        return ()
    return (Decision(f"budget spent: {_one_line(str(detail or 'the ceiling'))}", command),)


def _last_run(
    records: Sequence[Mapping[str, Any]],
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """The last ``run.started``, and the ``run.stopped`` after it (None: none yet)."""
    started = stopped = None
    for record in records:
        kind = record.get("event")
        if kind == RunStarted.kind:
            started, stopped = record, None
        elif kind == RunStopped.kind and started is not None:
            stopped = record
    return started, stopped


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _one_line(text: str) -> str:
    return " ".join(text.split())
