"""The gates a loop checks before its first iteration and after every one.

Each gate reads state and says whether it is open (stop and escalate), closed,
or could not be read, which is never taken as closed. Gates are read-only here:
they record nothing of their own.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import attrs

from ._errors import StateError
from ._policy import BudgetPolicy
from ._secscan._project import ProjectScanner
from ._spend import budget_exceeded, read_spend
from ._state import ChangePaths, atomic_write
from ._verify import gate_detail, read_breaker

VERIFY_GATE = "verify circuit-breaker"
BUDGET_GATE = "spend budget"
SECSCAN_GATE = "secscan"


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


class Gate(Protocol):
    """Anything that can say whether a loop may go on."""

    @property
    def name(self) -> str: ...

    def check(self) -> GateReading: ...


@attrs.frozen
class VerifyBreakerGate:
    """Open when the change's verify breaker is open; an error when its state is unreadable."""

    paths: ChangePaths
    name: str = VERIFY_GATE

    def check(self) -> GateReading:
        try:
            update = read_breaker(self.paths)
        except StateError as exc:
            return GateReading(self.name, open=True, error=True, detail=exc.message)
        state = update.after
        if update.corrupt is not None or state.blocked is not None:
            return GateReading(self.name, open=True, error=True, detail=gate_detail(state))
        if state.open:
            return GateReading(self.name, open=True, detail=gate_detail(state))
        threshold = f"/{state.max_failures}" if state.max_failures else ""
        detail = f"{state.consecutive_failures}{threshold} consecutive failures"
        return GateReading(self.name, open=False, detail=detail)


@attrs.frozen
class BudgetGate:
    """Open when a spend total reaches its ceiling; closed for good without a ceiling."""

    paths: ChangePaths
    budget: BudgetPolicy
    name: str = BUDGET_GATE

    def check(self) -> GateReading:
        if not self.budget.has_ceiling:
            return GateReading(self.name, open=False, detail="no ceiling configured")
        try:
            reading = read_spend(self.paths)
        except StateError as exc:
            return GateReading(self.name, open=True, error=True, detail=exc.message)
        if reading.totals.blocked is not None:
            detail = f"spend state unreadable: {reading.totals.blocked}"
            return GateReading(self.name, open=True, error=True, detail=detail)
        exceeded = budget_exceeded(reading.totals, self.budget)
        if exceeded:
            return GateReading(self.name, open=True, detail=f"spend budget exhausted: {exceeded}")
        totals = reading.totals
        detail = f"{totals.tokens} tokens, {totals.tool_calls} tool calls, ${totals.cost_usd:.4f}"
        return GateReading(self.name, open=False, detail=detail)


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

    def check(self) -> GateReading:
        scanner = self.scanner
        if scanner is None:
            return GateReading(self.name, open=False, detail="the secret scan is off")
        try:
            if scanner.trusted_markers is None and self.markers is not None:
                scanner.trusted_markers = _read_markers(self.markers)
            report = scanner.scan()
            if scanner.trusted_markers is None:
                scanner.trusted_markers = report.result.markers
                if self.markers is not None:
                    data = json.dumps(sorted(report.result.markers), indent=1)
                    atomic_write(self.markers, data.encode(), journal=True)
        except StateError as exc:
            return GateReading(self.name, open=True, error=True, detail=exc.message)
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
