"""The sweep's pure core: each cell from a change's replay, and the verdict over the values."""

from __future__ import annotations

from orchestra._engine import WhatIf, sweep
from orchestra._engine._whatif import Moment


def whatif(
    change: str,
    then: tuple[str, int],
    now: tuple[str, int] | None,
    trip: int | None = None,
    opens: int = 0,
) -> WhatIf:
    ending_then = Moment(then[1], then[0])
    return WhatIf(
        change=change,
        ending_then=ending_then,
        ending_now=Moment(now[1], now[0]) if now else None,
        trip_then=None,
        trip_now=Moment(trip, "stagnation: no-progress") if trip is not None else None,
        iterations_then=then[1],
        iterations_now=now[1] if now else then[1],
        tokens_saved=0,
        cost_saved=0.0,
        done_then=then[0] == "done",
        opens_now=opens,
    )


def test_values_that_tie_are_named_together_and_cooldowns_break_ties() -> None:
    stuck = ("circuit-open", 4)
    result = sweep(
        "stagnation.no_progress",
        [
            (
                "3",
                [
                    whatif("a", stuck, ("circuit-open", 3), 3, 2),
                    whatif("b", ("done", 5), ("done", 5), 2, 1),
                ],
            ),
            (
                "4",
                [
                    whatif("a", stuck, ("circuit-open", 3), 3, 2),
                    whatif("b", ("done", 5), ("done", 5)),
                ],
            ),
            (
                "5",
                [
                    whatif("a", stuck, ("circuit-open", 3), 3, 2),
                    whatif("b", ("done", 5), ("done", 5)),
                ],
            ),
        ],
    )
    # 3 catches as early, but spends a cooldown on b, which finishes anyway.
    assert [cell.text for cell in result.rows[1].cells] == [
        "recovered — cost one cooldown",
        "done",
        "done",
    ]
    assert result.best == ("4", "5")
    assert result.verdict == "4 and 5 catch the stuck loop a @3 earliest, with no false trip"


def test_a_stuck_loop_no_value_catches_is_counted_against_none() -> None:
    result = sweep(
        "run.max_iterations",
        [
            (
                "4",
                [
                    whatif("a", ("exhausted", 8), ("exhausted", 4)),
                    whatif("b", ("circuit-open", 3), None),
                ],
            ),
            (
                "8",
                [
                    whatif("a", ("exhausted", 8), ("exhausted", 8)),
                    whatif("b", ("circuit-open", 3), None),
                ],
            ),
        ],
    )
    assert [[cell.text for cell in row.cells] for row in result.rows] == [
        ["exhausted @4", "exhausted @8"],
        ["past the record", "past the record"],
    ]
    assert result.best == ("4",)
    assert result.verdict.startswith("4 catches 1 of the 2 stuck loops (a @4) earliest")


def test_with_nothing_stuck_the_verdict_says_so_and_names_the_false_trips() -> None:
    result = sweep(
        "stagnation.window",
        [
            ("2", [whatif("a", ("done", 5), ("circuit-open", 2), 2, 1)]),
            ("3", [whatif("a", ("done", 5), ("done", 5))]),
        ],
    )
    assert result.rows[0].cells[0].text == "false trip @2"
    fewer = sweep("run.max_iterations", [("3", [whatif("a", ("done", 5), ("exhausted", 3))])])
    assert fewer.rows[0].cells[0].text == "false stop @3 (exhausted)"
    assert fewer.verdict.endswith("3 trips a, which finished")
    assert result.best == ()
    assert result.verdict == (
        "no loop was stuck in the record (each finished, or none ended): nothing to catch; "
        "2 trips a, which finished"
    )
