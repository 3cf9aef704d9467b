"""The loop circuit on disk: ``.forge/changes/<c>/breaker.yaml``."""

from __future__ import annotations

from .._state import (
    ChangePaths,
    append_event,
    exclusive_lock,
    load_or_block,
    run_by_a_person,
    save_state,
)
from ._core import CLOSED_CIRCUIT, OPEN, CircuitState


def load_circuit(paths: ChangePaths) -> CircuitState:
    """The loop's circuit; an unreadable file becomes an escalated (blocked) circuit."""
    with exclusive_lock(paths.lock):
        return load_circuit_locked(paths)


def load_circuit_locked(paths: ChangePaths) -> CircuitState:
    """:func:`load_circuit` for a caller that holds the change's lock."""
    circuit, _ = load_or_block(paths, paths.breaker, CircuitState, CLOSED_CIRCUIT)
    if circuit.blocked is not None and not circuit.escalated:
        # Never assume an unreadable circuit closed: it stays open until a human resets it.
        return CircuitState(
            state=OPEN,
            reason=f"breaker.yaml unreadable ({circuit.blocked})",
            escalated=True,
            blocked=circuit.blocked,
        )
    return circuit


def save_circuit(paths: ChangePaths, circuit: CircuitState) -> None:
    with exclusive_lock(paths.lock):
        save_state(paths.breaker, circuit)


def reset_circuit(paths: ChangePaths, *, reason: str | None = None) -> CircuitState:
    """Close the circuit after a human reviewed the loop; returns what it was.

    ``reason`` (why the loop may run again) is kept in the ``breaker.reset`` event.
    """
    from .._state import LOOP_CIRCUIT, BreakerReset  # building an event: only on a reset

    with exclusive_lock(paths.lock):
        before, _ = load_or_block(paths, paths.breaker, CircuitState, CLOSED_CIRCUIT)
        # Closed, its iterations counted afresh; a human's write, so not journalled.
        save_state(paths.breaker, CLOSED_CIRCUIT, journal=run_by_a_person())
        append_event(
            paths.timeline,
            paths.name,
            BreakerReset(
                breaker=LOOP_CIRCUIT,
                was=before.state,
                opens=before.opens,
                iterations_used=before.iterations_used,
                was_blocked=before.blocked,
                reason=reason,
            ),
        )
    return before
