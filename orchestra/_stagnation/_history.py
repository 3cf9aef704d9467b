"""A loop's signal history, as its timeline recorded it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from ._signals import Signals

LOOP_CIRCUIT = "loop circuit"


@attrs.frozen
class RecordedIteration:
    """One ``iteration.finished`` event that carries signals."""

    seq: int
    iteration: int
    signals: Signals
    trip: str | None
    circuit: str | None = None
    verify: str | None = None

    @property
    def finished(self) -> bool:
        """Done with its verify passing: a clean ending, never judged."""
        return self.signals.done and self.verify in (None, "PASS")

    @property
    def opened_by_other_means(self) -> bool:
        """The live circuit opened here for a reason other than stagnation."""
        return self.circuit == "open" and not (self.trip or "").startswith("stagnation:")


def recorded_iterations(events: Iterable[Mapping[str, Any]]) -> list[RecordedIteration]:
    """The iterations a stagnation assessment looks back on.

    Those since the loop circuit was last reset by a human, in timeline order;
    events without signals (``forge run`` iterations) are left out, and one
    whose signals do not parse is skipped rather than trusted.
    """
    found: list[RecordedIteration] = []
    for event in events:
        kind = event.get("event")
        if kind == "breaker.reset" and event.get("breaker") == LOOP_CIRCUIT:
            found = []
        elif kind == "iteration.finished" and isinstance(event.get("signals"), Mapping):
            try:
                signals = Signals.from_record(event["signals"])
            except ValueError:
                continue
            trip, seq, number = event.get("trip"), event.get("seq"), event.get("iteration")
            found.append(
                RecordedIteration(
                    seq=seq if isinstance(seq, int) else 0,
                    iteration=number if isinstance(number, int) else len(found) + 1,
                    signals=signals,
                    trip=trip if isinstance(trip, str) else None,
                    circuit=_text(event.get("circuit")),
                    verify=_text(event.get("verify")),
                )
            )
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
