"""What happens to a loop's state between its iterations: the one home of the reset rule.

A person (or a hook) may step in while a loop runs or between its runs: a
Stop hook's or a person's verify verdict, a reset of the verify breaker, of
the loop circuit or of the spend totals, a state file moved aside. Each
changes what the next iteration is judged against. The live store reads the
change from the file it touched, the replay from the timeline event it left;
both fold it in through the functions here, so a reset starts afresh the same
way live and in ``forge policy simulate``.

A reset of the loop circuit starts the loop afresh: the iterations are
counted again from the first, calls a provider refused before it no longer
count, and the stagnation detectors look back on nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from .._circuit import CLOSED_CIRCUIT, CircuitState
from .._monitor import ALERT_MEMORY
from .._policy import Policy
from .._spend import NO_SPEND
from .._stagnation import Signals
from .._state import (
    LOOP_CIRCUIT,
    VERIFY_BREAKER,
    AlertCleared,
    AlertRaised,
    BreakerOpened,
    BreakerReset,
    Event,
    IterationFinished,
    IterationStarted,
    RunStarted,
    SpendReset,
    StateCorrupt,
    VerifyRecorded,
)
from .._verify import PASS, record_verdict, reset
from ._decide import LoopState


def afresh(state: LoopState, circuit: CircuitState = CLOSED_CIRCUIT) -> LoopState:
    """A person reset the loop circuit: the loop starts afresh with ``circuit``.

    Its iterations are counted again, so calls a provider refused before the
    reset (which used no iteration) no longer shift the cap; the detectors
    start over, and so does what the alerts look back on. The alerts raised
    stay raised until the next iteration clears those that no longer hold, so
    that each raised alert's clearing is on record. The verify streak and the
    spend have resets of their own.
    """
    return attrs.evolve(
        state, circuit=circuit, history=(), measured=(), refused=0, refusals_in_a_row=0
    )


def was_reset(held: CircuitState, read: CircuitState) -> bool:
    """Whether the loop circuit as read from outside is a reset of the one the loop held.

    Only a reset moves the circuit back: fewer openings or fewer iterations
    used than the loop counted.
    """
    return read.opens < held.opens or read.iterations_used < held.iterations_used


def circuit_read(state: LoopState, circuit: CircuitState) -> LoopState:
    """The loop circuit as another process left it (read from its file or server)."""
    if was_reset(state.circuit, circuit):
        return afresh(state, circuit)
    return attrs.evolve(state, circuit=circuit)


def run_started(state: LoopState, resumed: Resumed, *, supervised: bool) -> LoopState:
    """A new run of the change's loop: what it carries over from the runs before.

    ``resumed`` is what the change's timeline says before the run (:func:`resume`),
    which is what a live loop reads back when it starts. No refusal is in a row
    with one of an earlier run. A supervised loop goes on counting its
    iterations, and the calls refused among them in the supervised runs before
    (a ``forge run``'s refusals shift no supervised cap); ``forge run`` counts
    each run's own from the first. Either takes up the detectors' history where
    the timeline leaves it (a ``forge run`` measures no signals: it adds none).
    """
    refused = resumed.refused if supervised else 0
    return attrs.evolve(state, refusals_in_a_row=0, refused=refused, history=resumed.history)


def is_loop_reset(event: Event) -> bool:
    """A person's reset of the loop circuit, as the timeline records it."""
    return isinstance(event, BreakerReset) and event.breaker == LOOP_CIRCUIT


def apply_outside_event(state: LoopState, event: Event, policy: Policy) -> LoopState:
    """What an event written outside a loop's iterations does to its state, for a replay.

    A verdict recorded by a hook or a person, a human's reset of a breaker or
    of the spend totals, and a state file moved aside all change what the next
    iteration is judged against.
    """
    if isinstance(event, VerifyRecorded) and event.run_id is None:
        passed = event.verdict == PASS
        verify = record_verdict(
            state.verify,
            passed=passed,
            max_failures=policy.verify.max_failures,
            now=event.ts or "",
        )
        return attrs.evolve(state, verify=verify)
    if isinstance(event, BreakerReset) and event.breaker == VERIFY_BREAKER:
        return attrs.evolve(state, verify=reset(state.verify, now=event.ts or ""))
    if is_loop_reset(event):
        return afresh(state)
    if isinstance(event, SpendReset):
        return attrs.evolve(state, spend=NO_SPEND)
    if isinstance(event, StateCorrupt) and event.file == "verify-attempts.yaml":
        moved = f"moved aside to {event.moved_to}"
        return attrs.evolve(state, verify=attrs.evolve(state.verify, blocked=moved))
    return state


# ---------------------------------------------------------------------------
# A restarted loop, from its timeline


@attrs.frozen
class Resumed:
    """What a restarted loop takes from its change's timeline.

    Attributes:
        history: The signals its detectors look back on (since the circuit
            last opened or was reset; unreadable signals are skipped).
        refused: Calls a provider refused in the supervised runs since the
            last reset (they use no iteration).
        started: The highest iteration a supervised run started since then.
        measured: What the alerts look back on (as :attr:`LoopState.measured`).
        alerts: The alerts raised and not cleared since (as :attr:`LoopState.alerts`).
    """

    history: tuple[Signals, ...] = ()
    refused: int = 0
    started: int = 0
    measured: tuple[Signals, ...] = ()
    alerts: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Resuming:
    """:func:`resume`'s fold, one event at a time (a replay folds its own timeline so).

    A replay leaves out the openings the live loop recorded and folds in its own
    (:meth:`opened`): under another policy the circuit opens elsewhere.
    """

    state: LoopState = attrs.field(factory=LoopState)
    supervised: bool = False
    started: int = 0

    def after(self, event: Event) -> Resuming:
        """The fold with ``event``, the next in the timeline, taken in."""
        state, started = self.state, self.started
        if isinstance(event, RunStarted):
            return attrs.evolve(self, supervised=event.supervised)
        if is_loop_reset(event):
            return attrs.evolve(self, state=afresh(state), started=0)
        if isinstance(event, BreakerOpened):
            return self.opened()
        if isinstance(event, IterationStarted) and self.supervised:
            return attrs.evolve(self, started=max(started, event.iteration))
        if isinstance(event, IterationFinished):
            state = _resume_iteration(state, event, supervised=self.supervised)
            return attrs.evolve(self, state=state)
        if isinstance(event, AlertRaised | AlertCleared):
            state = attrs.evolve(state, alerts=_alerts_after(state.alerts, event))
            return attrs.evolve(self, state=state)
        return self

    @classmethod
    def going_on(cls, resumed: Resumed, *, supervised: bool) -> Resuming:
        """The fold as it stood after events it no longer sees (a trimmed timeline's).

        ``resumed`` and ``supervised`` are what the fold had made of them
        (:attr:`resumed`, :attr:`supervised`): folding on from here gives what
        folding the whole timeline would.
        """
        state = LoopState(
            history=resumed.history,
            refused=resumed.refused,
            measured=resumed.measured,
            alerts=resumed.alerts,
        )
        return cls(state=state, supervised=supervised, started=resumed.started)

    def through(self, events: Iterable[Event]) -> Resuming:
        """The fold with ``events``, the next in the timeline, taken in."""
        fold = self
        for event in events:
            fold = fold.after(event)
        return fold

    def opened(self) -> Resuming:
        """The loop circuit opened: the detectors start afresh."""
        return attrs.evolve(self, state=attrs.evolve(self.state, history=()))

    @property
    def resumed(self) -> Resumed:
        state = self.state
        return Resumed(
            history=state.history,
            refused=state.refused,
            started=self.started,
            measured=state.measured,
            alerts=state.alerts,
        )


def resume(events: Iterable[Event], fold: Resuming | None = None) -> Resumed:
    """Fold a change's timeline into what a restarted loop goes on from.

    The same rules as a running loop's: a reset starts afresh (:func:`afresh`),
    each opening starts the detectors afresh, a refused call uses no iteration.
    ``fold`` is where the fold of events no longer on the timeline left off
    (a trimmed timeline's, :meth:`Resuming.going_on`); None: from the start.
    """
    return (Resuming() if fold is None else fold).through(events).resumed


def _alerts_after(
    alerts: tuple[tuple[str, str], ...], event: AlertRaised | AlertCleared
) -> tuple[tuple[str, str], ...]:
    held = dict(alerts)
    if isinstance(event, AlertRaised):
        held[event.alert] = event.detail
    else:
        held.pop(event.alert, None)
    return tuple(sorted(held.items()))


def _resume_iteration(state: LoopState, event: IterationFinished, *, supervised: bool) -> LoopState:
    if not event.judged:
        if supervised and event.rate_limit is not None:
            return attrs.evolve(state, refused=state.refused + 1)
        return state
    if event.signals is None:
        return state
    try:
        signals = Signals.from_record(event.signals)
    except ValueError:
        return state  # unreadable signals are skipped rather than trusted
    return attrs.evolve(
        state,
        history=(*state.history, signals),
        measured=(*state.measured, signals)[-ALERT_MEMORY:],
    )


def fold_history(events: Iterable[Event]) -> tuple[Signals, ...]:
    """The signals a restarted loop's detectors look back on, from its timeline."""
    return resume(events).history


def started_iterations(events: Iterable[Event]) -> int:
    """The highest iteration a supervised loop of this change started, by its timeline."""
    return resume(events).started


def refused_calls(events: Iterable[Event]) -> int:
    """Calls a provider refused in the supervised loops of this change, by its timeline.

    They use no iteration: a restarted loop counts its iterations without them.
    """
    return resume(events).refused
