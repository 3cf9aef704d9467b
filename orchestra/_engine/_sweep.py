"""A sweep: one key's values compared over a batch, change by change.

For each value the batch is replayed (:func:`what_if` per change), and each
change's outcome under it becomes a cell of a matrix: rows are the changes,
columns the values. The question the matrix answers is the policy author's:
which value catches the stuck loops earliest without tripping a loop that
finished? A *stuck* loop is one whose recorded run ended without finishing
(its circuit open, its iterations or budget used up); a *false trip* stops a
loop that finished in the record. A loop that trips, cools down, and still
finishes is not a false trip: it cost a cooldown, and the cell says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from ._whatif import Moment, WhatIf

CellKind = Literal["done", "recovered", "false-trip", "trip", "stopped", "past-record"]


@attrs.frozen
class SweepCell:
    """What one loop did under one value.

    Attributes:
        kind: ``done``; ``recovered`` (tripped, cooled down, then done);
            ``false-trip`` (done in the record, stopped under the value: by a
            trip, or another way, ``false stop @4 (exhausted)``);
            ``trip`` (its circuit opened, and it did not finish); ``stopped``
            (it ended another way, e.g. its iterations used up);
            ``past-record`` (it would run past the recorded iterations, where
            nothing can be said).
        iteration: Where it tripped (first), or stopped; None past the record.
        reason: The trip's or the ending's reason.
        opens: The circuit openings under the value (trips and failed
            probes); a loop that finishes cooled down from every one.
    """

    kind: CellKind
    iteration: int | None
    reason: str | None
    opens: int = 0

    @property
    def cooldowns(self) -> int:
        """The cooldowns a loop that finishes anyway spent (0 for any other)."""
        return self.opens if self.kind == "recovered" else 0

    @property
    def text(self) -> str:
        """The cell as the matrix shows it: ``trip @3``, ``recovered — cost one cooldown``."""
        if self.kind == "done":
            return "done"
        if self.kind == "recovered":
            cost = "one cooldown" if self.cooldowns == 1 else f"{self.cooldowns} cooldowns"
            return f"recovered — cost {cost}"
        if self.kind == "false-trip":
            # A finished loop stopped another way (its iterations used up) is no trip.
            if not self.opens:
                return f"false stop @{self.iteration} ({self.reason})"
            return f"false trip @{self.iteration}"
        if self.kind == "trip":
            return f"trip @{self.iteration}"
        if self.kind == "stopped":
            return f"{self.reason} @{self.iteration}"
        return "past the record"

    @property
    def caught_at(self) -> int | None:
        """Where a stuck loop is caught under the value (None: it is not, in the record)."""
        return self.iteration if self.kind in ("trip", "stopped") else None

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "iteration": self.iteration,
            "reason": self.reason,
            "opens": self.opens,
            "cooldowns": self.cooldowns,
            "text": self.text,
        }


def sweep_cell(row: WhatIf) -> SweepCell:
    """The cell of one change's replay under one value."""
    ending, trip = row.ending_now, row.trip_now
    if row.false_trip and ending is not None:
        if trip is not None:
            return SweepCell("false-trip", trip.iteration, trip.reason, row.opens_now)
        return SweepCell("false-trip", ending.iteration, ending.reason)
    if ending is not None and ending.reason == "done":
        if row.opens_now:
            return SweepCell(
                "recovered", ending.iteration, trip.reason if trip else None, row.opens_now
            )
        return SweepCell("done", ending.iteration, ending.reason)
    if trip is not None:
        return SweepCell("trip", trip.iteration, trip.reason, row.opens_now)
    if ending is not None:
        return SweepCell("stopped", ending.iteration, ending.reason)
    return SweepCell("past-record", None, None)


@attrs.frozen
class SweepRow:
    """One change across the values.

    Attributes:
        change: The change.
        recorded: How its recorded run ended (None: no ending recorded).
        stuck: It ended without finishing: a loop the policy should catch.
        cells: Its cell under each value, in the sweep's order.
    """

    change: str
    recorded: Moment | None
    stuck: bool
    cells: tuple[SweepCell, ...]

    def as_json(self, values: Sequence[str]) -> dict[str, object]:
        return {
            "change": self.change,
            "recorded": self.recorded.as_json() if self.recorded is not None else None,
            "stuck": self.stuck,
            "cells": [
                {"value": value, **cell.as_json()}
                for value, cell in zip(values, self.cells, strict=True)
            ],
        }


@attrs.frozen
class SweepValue:
    """What one value does to the whole batch.

    Attributes:
        value: The value, as given.
        caught: Each stuck loop it catches in the record, and where.
        false_trips: The finished loops it stops.
        recovered: The finished loops it trips but that still finish.
        cooldowns: The cooldowns those recovered loops cost.
        iterations: The recorded iterations it would run.
        iterations_saved, tokens_saved, cost_saved: Against the record.
    """

    value: str
    caught: dict[str, int]
    false_trips: tuple[str, ...]
    recovered: tuple[str, ...]
    cooldowns: int
    iterations: int
    iterations_saved: int
    tokens_saved: int
    cost_saved: float
    stopped: tuple[str, ...]

    def as_json(self) -> dict[str, object]:
        return {
            "value": self.value,
            "caught": self.caught,
            "false_trips": list(self.false_trips),
            "recovered": list(self.recovered),
            "cooldowns": self.cooldowns,
            "iterations": self.iterations,
            "iterations_saved": self.iterations_saved,
            "tokens_saved": self.tokens_saved,
            "cost_saved": round(self.cost_saved, 6),
            "stopped": list(self.stopped),
        }


@attrs.frozen
class Sweep:
    """A whole sweep: the matrix, each value's totals, and the verdict.

    Attributes:
        key: The swept key (``stagnation.no_progress``).
        values: Each value's totals, in the order given.
        rows: The matrix: one row per change, stuck loops first.
        best: The values that catch the stuck loops earliest with no false
            trip (more than one when they tie); empty when none does.
        verdict: That, or why none does, in one line.
    """

    key: str
    values: tuple[SweepValue, ...]
    rows: tuple[SweepRow, ...]
    best: tuple[str, ...]
    verdict: str

    def as_json(self) -> dict[str, object]:
        names = [value.value for value in self.values]
        return {
            "key": self.key,
            "values": [value.as_json() for value in self.values],
            "matrix": [row.as_json(names) for row in self.rows],
            "best": list(self.best),
            "verdict": self.verdict,
        }


def sweep(key: str, replayed: Sequence[tuple[str, Sequence[WhatIf]]]) -> Sweep:
    """The sweep of ``key`` from each value's replay of the batch (the same changes each time).

    Args:
        key: The swept key.
        replayed: Per value, in order, its :class:`WhatIf` of every change.
    """
    first = replayed[0][1] if replayed else ()
    rows = [
        SweepRow(
            change=row.change,
            recorded=row.ending_then,
            stuck=row.ending_then is not None and not row.done_then,
            cells=tuple(sweep_cell(rows[index]) for _, rows in replayed),
        )
        for index, row in enumerate(first)
    ]
    rows.sort(key=lambda row: not row.stuck)  # stable: the batch's order within each group
    values = tuple(
        _value_totals(value, rows, column, whatifs)
        for column, (value, whatifs) in enumerate(replayed)
    )
    finished = sum(1 for row in rows if row.recorded is not None and not row.stuck)
    best, verdict = _verdict(values, [row.change for row in rows if row.stuck], finished)
    return Sweep(key=key, values=values, rows=tuple(rows), best=best, verdict=verdict)


def _value_totals(
    value: str, rows: Sequence[SweepRow], column: int, whatifs: Sequence[WhatIf]
) -> SweepValue:
    caught = {}
    for row in rows:
        at = row.cells[column].caught_at
        if row.stuck and at is not None:
            caught[row.change] = at
    recovered = [row for row in rows if row.cells[column].kind == "recovered"]
    return SweepValue(
        value=value,
        caught=caught,
        false_trips=tuple(row.change for row in rows if row.cells[column].kind == "false-trip"),
        recovered=tuple(row.change for row in recovered),
        cooldowns=sum(row.cells[column].cooldowns for row in recovered),
        iterations=sum(w.iterations_now for w in whatifs),
        iterations_saved=sum(w.iterations_saved for w in whatifs),
        tokens_saved=sum(w.tokens_saved for w in whatifs),
        cost_saved=sum(w.cost_saved for w in whatifs),
        stopped=tuple(
            sorted(w.change for w in whatifs if w.ending_now and w.ending_now.reason != "done")
        ),
    )


def _verdict(
    values: Sequence[SweepValue], stuck: Sequence[str], finished: int
) -> tuple[tuple[str, ...], str]:
    """The best values and the closing line that names them, or says why there are none."""
    clean = [value for value in values if not value.false_trips]
    tripping = "; ".join(
        f"{value.value} trips {_names(value.false_trips)}" for value in values if value.false_trips
    )
    if not stuck:
        said = "no loop was stuck in the record (each finished, or none ended): nothing to catch"
        return (), said + (f"; {tripping}, which finished" if tripping else "")
    if not clean:
        return (), (
            f"no value catches the stuck loops without a false trip: {tripping}, "
            "which finished in the record"
        )
    catching = [value for value in clean if value.caught]
    if not catching:
        return (), (
            f"no value without a false trip catches a stuck loop within the recorded iterations "
            f"({_names(stuck)} {'runs' if len(stuck) == 1 else 'run'} past the record under "
            f"{_names([v.value for v in clean])})"
            + (f"; {tripping}, which finished" if tripping else "")
        )

    def rank(value: SweepValue) -> tuple[int, int, int]:
        # Most stuck loops caught, then the fewest iterations to catch them,
        # then the fewest cooldowns spent on loops that finish anyway.
        return (-len(value.caught), sum(value.caught.values()), value.cooldowns)

    top = min(rank(value) for value in catching)
    best = [value for value in catching if rank(value) == top]
    chosen = best[0]
    caught = ", ".join(f"{change} @{at}" for change, at in chosen.caught.items())
    if len(stuck) == 1:
        what = f"the stuck loop {caught}"
    elif len(chosen.caught) == len(stuck):
        what = f"the {len(stuck)} stuck loops ({caught})"
    else:
        what = f"{len(chosen.caught)} of the {len(stuck)} stuck loops ({caught})"
    said = (
        f"{_names([v.value for v in best])} "
        f"{'catches' if len(best) == 1 else 'catch'} {what} earliest, with no false trip"
    )
    if chosen.cooldowns:
        said += f"; it costs {_names(chosen.recovered)} {_cooldowns(chosen.cooldowns)}"
    earlier = [value for value in values if value.false_trips and rank(value) < top]
    if earlier:
        said += "; " + "; ".join(
            f"{value.value} catches earlier but trips {_names(value.false_trips)}, which finished"
            for value in earlier
        )
    if not finished:
        # One change alone (or a batch that finished nothing): the tightest
        # value wins, since nothing here can show its false trips.
        said += "; no loop here finished, so none can show a false trip: sweep the whole batch"
    return tuple(value.value for value in best), said


def _cooldowns(count: int) -> str:
    return "one cooldown" if count == 1 else f"{count} cooldowns"


def _names(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
