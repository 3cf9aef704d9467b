"""One change's state for a running loop: loaded once, committed once per iteration.

The loop holds its change's state in memory (:class:`LoopState`) and judges
from it; nothing it wrote is read back to judge. Each iteration's outcome is
committed under the change's lock in one go: spend, verify streak, circuit and
the timeline's events, recorded in the change's commit journal with one fsync
(``_state/_journal.py``, which writes them again after a power loss). A file
someone else changed in the meantime (a Stop hook's ``forge verify``, a
person's reset in another terminal) is noticed by its stat and read again
before the commit: a decision made on the state before it is refused, and the
loop decides again on the fresh state, so their update is folded in, never
overwritten.

Every method blocks (locks, fsyncs): the loop calls them through
``trio.to_thread.run_sync``, so one slow disk never stalls the other loops.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs

from .._circuit import CircuitState, load_circuit_locked
from .._spend import NO_SPEND, SpendTotals
from .._state import (
    ChangePaths,
    Event,
    Guidance,
    IterationStarted,
    LoopControls,
    Request,
    append_events,
    checkpoint,
    exclusive_lock,
    load_or_block,
    read_controls,
    read_guidance,
    read_timeline,
    recover,
    render_state,
    take_guidance,
    take_stop,
    write_journaled,
)
from .._verify import VerifyAttempts, load_verify_locked
from ._decide import LoopState
from ._decision import Decision
from ._outside import circuit_read, resume
from ._record import IterationRecord

_Signature = tuple[int, int, int] | None


def _signature(path: Path) -> _Signature:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


class Store(Protocol):
    """Where a running loop keeps its change's state: what :func:`run_loop` calls.

    :class:`ChangeStore` keeps it in the files under ``.forge/``; a fleet keeps
    it on its Redis server. Every method may block; the loop calls them in a
    worker thread, except :meth:`stop` while a cancelled loop unwinds.
    """

    def load(self) -> LoopState:
        """The change's state and its detectors' history, as the loop starts."""
        ...

    def refresh(self) -> LoopState:
        """The state with anything written by someone else since folded in."""
        ...

    def append(self, *events: Event) -> None:
        """Record events in the change's timeline."""
        ...

    def save_circuit(self, circuit: CircuitState, *events: Event) -> LoopState:
        """Write the loop circuit (and record why) outside an iteration's commit."""
        ...

    def begin(self, event: IterationStarted) -> LoopState:
        """An iteration starts: count it as used, then record it."""
        ...

    def current(self) -> LoopState:
        """The state the iteration that just ran is judged on (outside updates folded in)."""
        ...

    def commit(self, record: IterationRecord, decision: Decision) -> bool:
        """Write a decision's outcome in one go, if it was made on the state as it stands.

        False (nothing written) when someone else changed the state since
        :meth:`current` returned ``decision.before``: decide again.
        """
        ...

    def stop(self, event: Event, *, finished: str | None = None) -> None:
        """Record how the loop ended (``finished``: the ending its circuit keeps)."""
        ...

    def controls(self) -> LoopControls:
        """A person's pause or stop of the loop, as they stand now."""
        ...

    def take_stop(self, run_began: float) -> Request | None:
        """The stop a person asked of the run that began at ``run_began``, removed as obeyed."""
        ...

    def guidance_waiting(self) -> bool:
        """Whether a person's guidance (``forge steer``) waits for the next iteration."""
        ...

    def take_guidance(self) -> tuple[Guidance, ...]:
        """The guidance an iteration starting now is given; ``once`` entries used up.

        Unreadable guidance gives none (what it said is not known).
        """
        ...


class ChangeStore:
    """The state files and timeline of one change, as one loop sees them.

    Args:
        paths: The change's folder.
        owns_circuit: The loop moves the loop circuit (supervised loops);
            otherwise ``breaker.yaml`` is only read.
    """

    def __init__(self, paths: ChangePaths, *, owns_circuit: bool) -> None:
        self.paths = paths
        self._owns_circuit = owns_circuit
        self._state = LoopState()
        self._seen: dict[Path, _Signature] = {}
        self._on_disk_circuit: CircuitState | None = None

    def load(self) -> LoopState:
        """Read the change's state and its detectors' history from the timeline.

        What the commit journal holds and the disk lost (a power loss since the
        last run) is written again first.
        """
        with exclusive_lock(self.paths.lock):
            recover(self.paths)
            resumed = resume(read_timeline(self.paths.timeline).typed())
            circuit = self._read_circuit()
            if self._owns_circuit and resumed.started > circuit.iterations_used:
                # An iteration that started but was never committed was spent too.
                circuit = attrs.evolve(circuit, iterations_used=resumed.started, finished=None)
            self._state = LoopState(
                circuit=circuit,
                verify=self._read_verify(),
                spend=self._read_spend(),
                history=resumed.history,
                refused=resumed.refused if self._owns_circuit else 0,
                measured=resumed.measured,
                alerts=resumed.alerts,
            )
        return self._state

    def refresh(self) -> LoopState:
        """Fold in what another process wrote since this store last looked."""
        if all(_signature(path) == seen for path, seen in self._seen.items()):
            return self._state
        with exclusive_lock(self.paths.lock):
            self._state = self._fresh()
        return self._state

    def append(self, *events: Event) -> None:
        """Append events to the timeline."""
        with exclusive_lock(self.paths.lock):
            append_events(self.paths.timeline, self.paths.name, events)

    def save_circuit(self, circuit: CircuitState, *events: Event) -> LoopState:
        """Write the loop circuit (and record why) outside an iteration's commit."""
        with exclusive_lock(self.paths.lock):
            self._state = attrs.evolve(self._fresh(), circuit=circuit)
            self._write([(self.paths.breaker, circuit)], events)
        return self._state

    def begin(self, event: IterationStarted) -> LoopState:
        """An iteration starts: count it as used (a rerun goes on after it), then record it.

        The circuit's file is written before the event, as every state file is:
        a crash in between leaves the file a step ahead of the timeline, never
        behind it. Not flushed on its own: the iteration's commit flushes it
        with its own record, and a power cut before that takes the whole
        iteration, its start included (it runs again). A killed process loses
        nothing of it.
        """
        with exclusive_lock(self.paths.lock):
            state = self._fresh()
            files: list[tuple[Path, object]] = []
            if self._owns_circuit:
                circuit = attrs.evolve(
                    state.circuit, iterations_used=event.iteration, finished=None
                )
                state = attrs.evolve(state, circuit=circuit)
                files.append((self.paths.breaker, circuit))
            self._state = state
            self._write(files, [event], sync=False)
        return self._state

    def current(self) -> LoopState:
        """The state an iteration is judged on: :meth:`refresh`."""
        return self.refresh()

    def commit(self, record: IterationRecord, decision: Decision) -> bool:
        """Write the decision's state files and events under the change's lock, in one go.

        Refused (False) when a file changed since the state the decision was
        made on was read: the fresh state is then what :meth:`current` returns.
        """
        with exclusive_lock(self.paths.lock):
            self._state = self._fresh()
            if self._state is not decision.before:
                return False
            after = decision.after
            files: list[tuple[Path, object]] = [(self.paths.spend, after.spend)]
            if record.verify is not None and not (record.verify_by_hook or record.verify_read_only):
                files.append((self.paths.verify_attempts, after.verify))
            if self._owns_circuit and after.circuit != self._on_disk_circuit:
                files.append((self.paths.breaker, after.circuit))
            self._write(files, decision.events)
            self._state = after
        return True

    def stop(self, event: Event, *, finished: str | None = None) -> None:
        """Record how the loop ended; a circuit it owns keeps the count and the ending.

        An interrupted loop passes no ``finished``: its circuit is written as
        it stands (the interrupted iteration counted as used).
        """
        with exclusive_lock(self.paths.lock):
            files: list[tuple[Path, object]] = []
            if self._owns_circuit:
                circuit = self._fresh().circuit
                if finished is not None:
                    circuit = attrs.evolve(circuit, finished=finished)
                self._state = attrs.evolve(self._state, circuit=circuit)
                if circuit != self._on_disk_circuit:
                    files.append((self.paths.breaker, circuit))
            self._write(files, [event])
            # A loop that ends leaves its files flushed and its journal empty.
            checkpoint(self.paths)

    def controls(self) -> LoopControls:
        """``controls.yaml``: a person's pause or stop (``forge pause``, ``forge stop``)."""
        return read_controls(self.paths)

    def take_stop(self, run_began: float) -> Request | None:
        """The stop meant for this run, removed from ``controls.yaml`` as the loop obeys it."""
        return take_stop(self.paths, run_began)

    def guidance_waiting(self) -> bool:
        """Whether ``guidance.yaml`` holds readable guidance for the next iteration."""
        waiting = read_guidance(self.paths)
        return waiting.blocked is None and bool(waiting.entries)

    def take_guidance(self) -> tuple[Guidance, ...]:
        """The guidance ``guidance.yaml`` holds, its ``once`` entries removed from it."""
        return take_guidance(self.paths)

    # -- with the lock held ------------------------------------------------------

    def _fresh(self) -> LoopState:
        """The state, with any file changed by someone else read again."""
        state = self._state
        paths = self.paths
        if self._changed(paths.breaker):
            # A person's reset starts the loop afresh, by the same rule a replay folds.
            state = circuit_read(state, self._read_circuit())
        if self._changed(paths.verify_attempts):
            state = attrs.evolve(state, verify=self._read_verify())
        if self._changed(paths.spend):
            state = attrs.evolve(state, spend=self._read_spend())
        return state

    def _changed(self, path: Path) -> bool:
        return path not in self._seen or _signature(path) != self._seen[path]

    def _read_circuit(self) -> CircuitState:
        circuit = load_circuit_locked(self.paths)
        self._seen[self.paths.breaker] = _signature(self.paths.breaker)
        self._on_disk_circuit = circuit
        return circuit

    def _read_verify(self) -> VerifyAttempts:
        verify, _ = load_verify_locked(self.paths)
        self._seen[self.paths.verify_attempts] = _signature(self.paths.verify_attempts)
        return verify

    def _read_spend(self) -> SpendTotals:
        totals, _ = load_or_block(self.paths, self.paths.spend, SpendTotals, NO_SPEND)
        self._seen[self.paths.spend] = _signature(self.paths.spend)
        return totals

    def _write(
        self, files: list[tuple[Path, object]], events: Sequence[Event], *, sync: bool = True
    ) -> None:
        """State files, then the events that record them: one journal record, one fsync."""
        rendered = [(path, render_state(state)) for path, state in files]
        write_journaled(self.paths, rendered, events, sync=sync)
        for path, state in files:
            self._seen[path] = _signature(path)
            if path == self.paths.breaker and isinstance(state, CircuitState):
                self._on_disk_circuit = state
