"""The gates a loop reads before its first iteration and after every one.

A gate is open (stop and escalate), closed, or could not be read, which is
never taken as closed. The verify breaker, the spend budget and the loop
circuit are read from the change's state as the store holds it (pure
functions here); the secret scan walks files and is the one gate with I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import attrs

from .._circuit import OPEN, CircuitState, cooldown_remaining
from .._durations import human_seconds
from .._errors import ForgeError, StateError
from .._policy import BudgetPolicy
from .._secscan import ProjectScanner
from .._spend import SpendTotals, budget_exceeded
from .._state import atomic_write
from .._treestatus import TreeStatus
from .._verify import VerifyAttempts, gate_detail

VERIFY_GATE = "verify circuit-breaker"
BUDGET_GATE = "spend budget"
SECSCAN_GATE = "secscan"
CIRCUIT_GATE = "loop circuit"
INTEGRITY_GATE = "integrity"
STATE_GATE = "forge state"


@attrs.frozen
class GateReading:
    """One gate's state at one moment."""

    gate: str
    open: bool
    detail: str
    error: bool = False

    @property
    def state(self) -> str:
        return "error" if self.error else ("open" if self.open else "closed")


def verify_reading(state: VerifyAttempts) -> GateReading:
    """Open when the change's verify breaker is open; an error when its state was unreadable."""
    if state.blocked is not None:
        return GateReading(VERIFY_GATE, open=True, error=True, detail=gate_detail(state))
    if state.open:
        return GateReading(VERIFY_GATE, open=True, detail=gate_detail(state))
    threshold = f"/{state.max_failures}" if state.max_failures else ""
    detail = f"{state.consecutive_failures}{threshold} consecutive failures"
    return GateReading(VERIFY_GATE, open=False, detail=detail)


def budget_reading(totals: SpendTotals, budget: BudgetPolicy) -> GateReading:
    """Open when a spend total reaches its ceiling; closed for good without a ceiling."""
    if not budget.has_ceiling:
        return GateReading(BUDGET_GATE, open=False, detail="no ceiling configured")
    if totals.blocked is not None:
        detail = f"spend state unreadable: {totals.blocked}"
        return GateReading(BUDGET_GATE, open=True, error=True, detail=detail)
    if totals.unpriced and budget.max_cost_usd is not None and not budget.allow_unpriced:
        # A cost that cannot be counted is a ceiling that cannot be read: never closed.
        detail = (
            f"the cost of {totals.unpriced} iteration(s) is unknown (their model has no price "
            "in the executor's [prices]): add the price, or set [budget] allow_unpriced = true"
        )
        return GateReading(BUDGET_GATE, open=True, error=True, detail=detail)
    exceeded = budget_exceeded(totals, budget)
    if exceeded:
        return GateReading(BUDGET_GATE, open=True, detail=f"spend budget exhausted: {exceeded}")
    detail = f"{totals.tokens} tokens, {totals.tool_calls} tool calls, ${totals.cost_usd:.4f}"
    return GateReading(BUDGET_GATE, open=False, detail=detail)


def circuit_reading(circuit: CircuitState, now: float) -> GateReading:
    """Open while the loop circuit is open: cooling down, or escalated to a human."""
    if circuit.state != OPEN:
        return GateReading(CIRCUIT_GATE, open=False, detail=circuit.state)
    why = circuit.reason or "tripped"
    if circuit.blocked is not None:
        return GateReading(CIRCUIT_GATE, open=True, error=True, detail=f"escalated: {why}")
    if circuit.escalated:
        return GateReading(CIRCUIT_GATE, open=True, detail=f"escalated: {why}")
    left = human_seconds(cooldown_remaining(circuit, now))
    return GateReading(CIRCUIT_GATE, open=True, detail=f"open: {why}; cooldown {left} left")


@attrs.define
class SecscanGate:
    """Open on unwaived findings at or above ``fail_on``; an error when waivers are unreadable.

    Inline allow markers are trusted only when they were there at the change's
    first pre-flight scan (kept in ``markers``, frozen while a loop runs): one
    that appears later, in this run or a later one, is a finding of its own, so
    an agent cannot waive its own leak. Without a scanner (``[secscan] enabled
    = false``) the gate stays closed and says so.
    """

    scanner: ProjectScanner | None = None
    markers: Path | None = None
    name: str = SECSCAN_GATE

    def check(self, status: TreeStatus | None = None) -> GateReading:
        """Scan (only what changed since ``status``'s predecessor) and read the gate.

        Blocking: call it off the event loop. A scan that fails is an
        unreadable gate, never a closed one.
        """
        scanner = self.scanner
        if scanner is None:
            return GateReading(self.name, open=False, detail="the secret scan is off")
        try:
            if scanner.trusted_markers is None and self.markers is not None:
                scanner.trusted_markers = _read_markers(self.markers)
            report = scanner.scan(status)
            if scanner.trusted_markers is None:
                scanner.trusted_markers = report.result.markers
                if self.markers is not None:
                    data = json.dumps(sorted(report.result.markers), indent=1)
                    atomic_write(self.markers, data.encode(), journal=True)
        except StateError as exc:
            return GateReading(self.name, open=True, error=True, detail=exc.message)
        except (ForgeError, OSError, ValueError) as exc:
            return GateReading(self.name, open=True, error=True, detail=f"gate check failed: {exc}")
        return GateReading(self.name, open=bool(report.blocking), detail=report.detail())


def _read_markers(path: Path) -> frozenset[str] | None:
    """The trusted markers recorded for a change, None before its first scan."""
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"{path}: unreadable ({exc}); move it aside to record afresh") from exc
    if not isinstance(data, list) or not all(isinstance(item, str) for item in data):
        raise StateError(f"{path}: expected a JSON list of marker fingerprints")
    return frozenset(data)


def first_stop(readings: Sequence[GateReading]) -> GateReading | None:
    """The reading that stops a loop: an unreadable gate first, then an open one."""
    for reading in readings:
        if reading.error:
            return reading
    for reading in readings:
        if reading.open:
            return reading
    return None


def gate_states(readings: Sequence[GateReading]) -> dict[str, dict[str, str]]:
    """Readings as the timeline records them."""
    return {r.gate: {"state": r.state, "detail": r.detail} for r in readings}
