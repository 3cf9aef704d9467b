"""The progress score and the stagnation detectors, as pure functions.

Each detector has a test for the history that trips it and for the near miss
that must not; the score is checked against sequences computed by hand, with
the arithmetic written next to them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestra._policy import StagnationPolicy, StagnationWeights
from orchestra._stagnation import (
    HIGH,
    LOW,
    MEDIUM,
    Assessment,
    Signals,
    assess,
    error_fingerprint,
    score,
)

DETERMINISTIC = settings(derandomize=True, database=None, deadline=None)
DEFAULT = StagnationPolicy()
WEIGHTS = DEFAULT.weights


def work(files: int = 1, **signals: Any) -> Signals:
    """An iteration that modified ``files`` files meaningfully (scores +files by default)."""
    return Signals(files_modified=files, meaningful_files=files, **signals)


def idle(**signals: Any) -> Signals:
    """An iteration that modified no file (scores -3 by default)."""
    return Signals(**signals)


def revert(**signals: Any) -> Signals:
    """Two files put back as they were, one meaningfully (scores +1 - 2 = -1 by default).

    A revert is a real change of content, so it is not "no progress": only
    its score tells that the loop is going backwards.
    """
    return Signals(files_modified=2, meaningful_files=1, reverts=2, **signals)


def judge(history: Sequence[Signals], policy: StagnationPolicy = DEFAULT) -> Assessment:
    return assess(history, policy)


def approaches(*prints: str, **signals: Any) -> list[Signals]:
    """One meaningful-change iteration per diff fingerprint."""
    return [work(1, diff_fingerprint=p, **signals) for p in prints]


def volumes(*lines: int, **signals: Any) -> list[Signals]:
    """One meaningful-change iteration per output volume."""
    return [work(1, output_lines=n, **signals) for n in lines]


# --- the defaults the tests below rely on -------------------------------------------------


def test_defaults_are_the_documented_thresholds_and_weights() -> None:
    assert (
        DEFAULT.window,
        DEFAULT.no_progress,
        DEFAULT.identical_errors,
        DEFAULT.output_decline,
        DEFAULT.permission_denials,
        DEFAULT.test_fix_ratio,
    ) == (3, 3, 5, 0.7, 3, 0.8)
    assert attrs.astuple(WEIGHTS) == (3, 5, 1, 2, -2, -3, -1)


# --- score: single iterations -------------------------------------------------------------


@pytest.mark.parametrize(
    ("signals", "expected"),
    [
        pytest.param(Signals(), -3, id="nothing-modified"),
        pytest.param(work(1), 1, id="one-meaningful-file"),
        pytest.param(work(4), 4, id="four-meaningful-files"),
        # 2 files changed, 1 of them only in whitespace: +1 for the meaningful one.
        pytest.param(Signals(files_modified=2, meaningful_files=1), 1, id="whitespace-not-counted"),
        # modified but nothing meaningful: no +1, and no -3 either (a file was modified).
        pytest.param(Signals(files_modified=1), 0, id="whitespace-only"),
        # -3 (no file) + 3 * 2 (tests newly passing) = 3
        pytest.param(Signals(tests_newly_passing=2), 3, id="tests-passing-without-files"),
        # -3 (no file) + 5 (task) = 2
        pytest.param(Signals(tasks_completed=1), 2, id="task-without-files"),
        # +1 (file) + 2 * 3 (lint errors resolved) = 7
        pytest.param(work(1, lint_resolved=3), 7, id="lint-resolved"),
        # +2 (files) - 1 * 2 (reverts) = 0
        pytest.param(work(2, reverts=2), 0, id="reverts"),
        # 1 (file) + 3*2 (tests) + 5*1 (task) + 2*3 (lint) - 1 (revert) = 17
        pytest.param(
            work(1, tests_newly_passing=2, tasks_completed=1, lint_resolved=3, reverts=1),
            17,
            id="everything",
        ),
        # signals the score table does not mention weigh nothing: +1 (file) only
        pytest.param(
            work(
                1,
                tests_newly_failing=4,
                lint_errors=9,
                output_bytes=900,
                output_lines=30,
                permission_denials=2,
                test_files_modified=1,
                diff_fingerprint="d",
                done=True,
            ),
            1,
            id="unweighted-signals",
        ),
        # a first iteration has no previous error to repeat: -3 only
        pytest.param(Signals(error_fingerprint="E"), -3, id="first-error-not-repeated"),
    ],
)
def test_score_of_one_iteration(signals: Signals, expected: int) -> None:
    assert score(signals, None, WEIGHTS) == expected
    assert judge([signals]).score == expected
    assert judge([signals]).window_score == expected


@pytest.mark.parametrize(
    ("previous", "current", "expected"),
    [
        # +1 (file) - 2 (same error as the previous iteration) = -1
        pytest.param(work(1, error_fingerprint="E"), work(1, error_fingerprint="E"), -1, id="same"),
        # -3 (no file) - 2 (same error) = -5
        pytest.param(work(1, error_fingerprint="E"), idle(error_fingerprint="E"), -5, id="idle"),
        pytest.param(work(1, error_fingerprint="E"), work(1, error_fingerprint="F"), 1, id="other"),
        pytest.param(work(1, error_fingerprint="E"), work(1), 1, id="error-gone"),
        pytest.param(work(1), work(1, error_fingerprint="E"), 1, id="new-error"),
        # no error twice in a row is not "the same error"
        pytest.param(work(1), work(1), 1, id="no-error-twice"),
    ],
)
def test_score_compares_the_error_with_the_previous_iteration(
    previous: Signals, current: Signals, expected: int
) -> None:
    assert score(current, previous, WEIGHTS) == expected
    assert judge([previous, current]).score == expected


# --- score: hand-computed sequences -------------------------------------------------------

# (signals, its score, the window score after it, the detector after it)
STUCK_ON_AN_ERROR: list[tuple[Signals, int, int, str | None]] = [
    # +1 * 2 files = 2                              window: 2
    (work(2, error_fingerprint="E1"), 2, 2, None),
    # +1 file - 2 same error = -1                   window: 2 - 1 = 1
    (work(1, error_fingerprint="E1"), -1, 1, None),
    # -3 no file - 2 same error = -5                window: 2 - 1 - 5 = -4 < 0: trips
    (idle(error_fingerprint="E1"), -5, -4, "score"),
    # +3 files + 3 * 1 test passing = 6 (error gone) window: -1 - 5 + 6 = 0, not negative
    (work(3, tests_newly_passing=1), 6, 0, None),
]

PRODUCTIVE: list[tuple[Signals, int, int, str | None]] = [
    # +1 file + 5 task = 6                          window: 6
    (work(1, tasks_completed=1), 6, 6, None),
    # +1 meaningful of 2 files - 1 revert = 0       window: 6 + 0 = 6
    (Signals(files_modified=2, meaningful_files=1, reverts=1), 0, 6, None),
    # +1 file + 2 * 2 lint resolved = 5 (first error) window: 6 + 0 + 5 = 11
    (work(1, lint_resolved=2, error_fingerprint="L"), 5, 11, None),
    # +1 file - 2 same error = -1                   window: 0 + 5 - 1 = 4 (6 left the window)
    (work(1, error_fingerprint="L"), -1, 4, None),
    # -3 no file + 3 * 2 tests - 2 same error = 1   window: 5 - 1 + 1 = 5
    (idle(tests_newly_passing=2, error_fingerprint="L"), 1, 5, None),
]


@pytest.mark.parametrize(
    "sequence",
    [pytest.param(STUCK_ON_AN_ERROR, id="stuck"), pytest.param(PRODUCTIVE, id="productive")],
)
def test_hand_computed_sequences(sequence: list[tuple[Signals, int, int, str | None]]) -> None:
    history = [signals for signals, *_ in sequence]
    for end, (_signals, expected_score, expected_window, expected_detector) in enumerate(
        sequence, start=1
    ):
        assessment = judge(history[:end])
        assert (assessment.score, assessment.window_score, assessment.detector) == (
            expected_score,
            expected_window,
            expected_detector,
        ), f"after iteration {end}"


def test_the_stuck_sequence_trips_with_the_window_scores_as_evidence() -> None:
    history = [signals for signals, *_ in STUCK_ON_AN_ERROR[:3]]
    assessment = judge(history)
    assert assessment.reason == "stagnation: score (-4 over 3)"
    assert assessment.evidence == {"scores": [2, -1, -5]}
    assert assessment.risk == HIGH


def test_hand_computed_sequence_under_custom_weights() -> None:
    weights = StagnationWeights(same_error=-5, no_files_modified=-1)
    policy = attrs.evolve(DEFAULT, weights=weights)
    history = [signals for signals, *_ in STUCK_ON_AN_ERROR]
    scores = [score(s, history[i - 1] if i else None, weights) for i, s in enumerate(history)]
    # 2 files: 2;  1 file - 5: -4;  -1 no file - 5: -6;  3 files + 3 test: 6
    assert scores == [2, -4, -6, 6]
    # window after 3: 2 - 4 - 6 = -8
    assert judge(history[:3], policy).reason == "stagnation: score (-8 over 3)"
    # window after 4: -4 - 6 + 6 = -4: still negative under these weights
    assert judge(history, policy).reason == "stagnation: score (-4 over 3)"


# --- the score detector ---------------------------------------------------------------------


def test_a_negative_window_trips_once_it_is_complete() -> None:
    history = [revert(), revert(), revert()]  # -1 each
    assert judge(history[:1]).detector is None  # -1, 1 iteration of 3: not judged
    assert judge(history[:1]).window_score == -1
    assert judge(history[:2]).detector is None  # -2, 2 iterations of 3: not judged
    assert judge(history[:2]).window_score == -2
    tripped = judge(history)  # -1 - 1 - 1 = -3 over a whole window
    assert (tripped.detector, tripped.reason) == ("score", "stagnation: score (-3 over 3)")
    assert tripped.evidence == {"scores": [-1, -1, -1]}


def test_two_very_bad_iterations_are_not_judged_by_the_window() -> None:
    # -3 + (-3 - 2 same error) = -8, but only 2 of 3 iterations are recorded
    assessment = judge([idle(error_fingerprint="E"), idle(error_fingerprint="E")])
    assert (assessment.window_score, assessment.detector) == (-8, None)


def test_a_window_summing_to_zero_does_not_trip() -> None:
    # +2 - 1 - 1 = 0: not negative
    assessment = judge([work(2), revert(), revert()])
    assert (assessment.window_score, assessment.detector) == (0, None)


def test_only_the_last_window_counts() -> None:
    # whole history: -3 - 3 + 1 + 1 + 1 = -3; last window: 1 + 1 + 1 = 3
    assessment = judge([idle(), idle(), work(1), work(1), work(1)])
    assert (assessment.window_score, assessment.detector) == (3, None)


# --- identical errors -----------------------------------------------------------------------


def same_error(count: int, fingerprint: str = "E") -> list[Signals]:
    # 3 files each: 3, then 3 - 2 = 1 per repeat, so the window score never trips
    return [work(3, error_fingerprint=fingerprint) for _ in range(count)]


def test_five_identical_errors_trip() -> None:
    assessment = judge(same_error(5))
    assert assessment.reason == "stagnation: identical-errors (5)"
    assert assessment.detector == "identical-errors"
    assert assessment.evidence == {"fingerprint": "E", "iterations": 5}
    assert assessment.risk == HIGH


def test_the_streak_is_reported_past_the_threshold() -> None:
    assert judge(same_error(6)).reason == "stagnation: identical-errors (6)"


def test_four_identical_errors_do_not_trip() -> None:
    assessment = judge(same_error(4))
    assert assessment.detector is None
    assert assessment.risk == HIGH  # one iteration away


def test_five_different_errors_do_not_trip() -> None:
    history = [work(3, error_fingerprint=f"E{n}") for n in range(5)]
    assert judge(history).detector is None


def test_five_real_different_errors_do_not_trip() -> None:
    messages = [
        "NameError: name 'x' is not defined",
        "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
        "KeyError: 'missing'",
        "AssertionError: assert False",
        "ModuleNotFoundError: No module named 'nope'",
    ]
    history = [work(3, error_fingerprint=error_fingerprint(m)) for m in messages]
    assert judge(history).detector is None


def test_five_real_errors_differing_in_line_numbers_trip() -> None:
    history = [
        work(3, error_fingerprint=error_fingerprint(f"/tmp/run{n}/app.py:{10 + n}: boom"))
        for n in range(5)
    ]
    assert judge(history).reason == "stagnation: identical-errors (5)"


@pytest.mark.parametrize(
    "prints",
    [
        pytest.param(["E", "E", "F", "E", "E", "E", "E"], id="other-error-between"),
        pytest.param(["E", "E", "E", "E", None, "E"], id="clean-iteration-between"),
        pytest.param(["E", "E", "E", "E", "E", None], id="last-iteration-clean"),
    ],
)
def test_a_broken_error_streak_does_not_trip(prints: list[str | None]) -> None:
    history = [work(3, error_fingerprint=p) for p in prints]
    assert judge(history).detector is None


# --- no progress ----------------------------------------------------------------------------


def stalled() -> Signals:
    """No file modified, no task completed; a test newly passes: -3 + 3 = 0, no score trip."""
    return idle(tests_newly_passing=1)


def test_three_iterations_without_progress_trip() -> None:
    assessment = judge([work(2), stalled(), stalled(), stalled()])
    assert assessment.reason == "stagnation: no-progress (3)"
    assert assessment.evidence == {"iterations": 3}
    assert assessment.window_score == 0  # the score alone would not have tripped


def test_two_iterations_without_progress_do_not_trip() -> None:
    assessment = judge([work(2), stalled(), stalled()])
    assert assessment.detector is None
    assert assessment.risk == HIGH  # one iteration away


def test_a_broken_no_progress_streak_does_not_trip() -> None:
    # scores 0, 0, +1, 0, 0: the streak at the end is 2
    assert judge([stalled(), stalled(), work(1), stalled(), stalled()]).detector is None


def test_a_completed_task_is_progress_without_files() -> None:
    # -3 + 5 = 2 each: no file modified, but a task completed
    assert judge([idle(tasks_completed=1)] * 3).detector is None


def test_a_whitespace_only_change_is_no_progress() -> None:
    # files_modified=1, meaningful_files=0: "zero meaningful changes"
    assessment = judge([Signals(files_modified=1)] * 3)
    assert (assessment.detector, assessment.window_score) == ("no-progress", 0)


# --- permission denials ---------------------------------------------------------------------


def test_three_iterations_with_denials_trip() -> None:
    assessment = judge([work(1, permission_denials=d) for d in (1, 4, 2)])
    assert assessment.reason == "stagnation: permission-denials (3)"
    assert assessment.evidence == {"iterations": 3}


def test_two_iterations_with_denials_do_not_trip() -> None:
    assessment = judge([work(1), work(1, permission_denials=3), work(1, permission_denials=3)])
    assert assessment.detector is None
    assert assessment.risk == HIGH


def test_a_broken_denial_streak_does_not_trip() -> None:
    denied, allowed = work(1, permission_denials=1), work(1)
    assert judge([denied, denied, allowed, denied, denied]).detector is None


def test_guard_refusals_are_a_protection_signal_of_their_own() -> None:
    # An agent that keeps reaching for a protected path: the guard refused it
    # each time, which is not a missing permission.
    refused = [work(1, guard_refusals=1)] * 3
    assessment = judge(refused)
    assert assessment.reason == "stagnation: protected-paths (3)"
    assert assessment.evidence == {"iterations": 3}
    assert judge([work(1, guard_refusals=1), work(1), work(1, guard_refusals=2)]).detector is None


# --- circular approaches --------------------------------------------------------------------


def test_two_alternating_approaches_trip() -> None:
    assessment = judge(approaches("A", "B", "A", "B"))
    assert assessment.reason == "stagnation: circular (2 approaches alternate)"
    assert assessment.evidence == {"diff_fingerprints": ["A", "B", "A", "B"]}


def test_three_alternating_approaches_trip() -> None:
    assessment = judge(approaches("A", "B", "C", "A", "B", "C"))
    assert assessment.reason == "stagnation: circular (3 approaches alternate)"
    assert assessment.evidence == {"diff_fingerprints": ["A", "B", "C", "A", "B", "C"]}


def test_a_resolution_before_the_cycle_does_not_prevent_the_trip() -> None:
    history = [work(1, diff_fingerprint="X", tasks_completed=1), *approaches("A", "B", "A", "B")]
    assert judge(history).detector == "circular"


@pytest.mark.parametrize(
    "prints",
    [
        pytest.param(("A", "B", "A", "C"), id="ABAC"),
        pytest.param(("A", "B", "A"), id="too-short"),
        pytest.param(("A", "A", "A", "A"), id="one-approach"),
        pytest.param(("A", "B", "B", "A"), id="ABBA"),
        pytest.param(("A", "B", "C", "A", "B", "D"), id="ABCABD"),
        pytest.param(("A", "B", "C", "B", "A", "C"), id="ABCBAC"),
    ],
)
def test_non_alternating_approaches_do_not_trip(prints: tuple[str, ...]) -> None:
    assert judge(approaches(*prints)).detector is None


def test_an_iteration_without_a_change_breaks_the_cycle() -> None:
    history = [*approaches("A", "B", "A"), work(1, diff_fingerprint=None)]
    assert judge(history).detector is None


@pytest.mark.parametrize(
    "resolution",
    [
        pytest.param({"tasks_completed": 1}, id="task-completed"),
        pytest.param({"tests_newly_passing": 1}, id="test-newly-passing"),
    ],
)
@pytest.mark.parametrize("prints", [("A", "B", "A", "B"), ("A", "B", "C", "A", "B", "C")])
@pytest.mark.parametrize("at", [0, -1])
def test_a_resolving_iteration_in_the_cycle_does_not_trip(
    resolution: dict[str, Any], prints: tuple[str, ...], at: int
) -> None:
    history = approaches(*prints)
    history[at] = attrs.evolve(history[at], **resolution)
    assert judge(history).detector is None


# --- test-fix loop --------------------------------------------------------------------------


def test_a_window_of_test_only_changes_trips() -> None:
    assessment = judge([work(5, test_files_modified=5)] * 3)
    assert assessment.reason == "stagnation: test-fix-loop (100% of changed files are tests)"
    assert assessment.evidence == {"changed": 15, "tests": 15}


def test_more_than_eighty_percent_trips() -> None:
    # 27 * 3 = 81 tests of 34 + 33 + 33 = 100 changed files: 81% > 80%
    history = [work(n, test_files_modified=27) for n in (34, 33, 33)]
    assessment = judge(history)
    assert assessment.reason == "stagnation: test-fix-loop (81% of changed files are tests)"
    assert assessment.evidence == {"changed": 100, "tests": 81}


def test_the_share_is_rounded_in_the_reason() -> None:
    # 5 + 4 + 4 = 13 tests of 15 files: 86.7% -> 87%
    history = [work(5, test_files_modified=t) for t in (5, 4, 4)]
    assert judge(history).reason == "stagnation: test-fix-loop (87% of changed files are tests)"


def test_exactly_eighty_percent_does_not_trip() -> None:
    # 4 * 3 = 12 tests of 15 files: 80%, and the rule is "more than 80%"
    assert judge([work(5, test_files_modified=4)] * 3).detector is None


def test_test_only_changes_are_not_judged_before_a_window() -> None:
    assert judge([work(5, test_files_modified=5)] * 2).detector is None


def test_test_only_changes_outside_the_window_do_not_count() -> None:
    # last window: 5 + 5 + 0 = 10 tests of 15 files: 67%
    history = [work(5, test_files_modified=5)] * 3 + [work(5)]
    assert judge(history).detector is None


# --- output decline -------------------------------------------------------------------------


def test_a_seventy_percent_decline_trips() -> None:
    # (100 - 30) / 100 = 70% >= 70%
    assessment = judge(volumes(100, 50, 30))
    assert assessment.reason == "stagnation: output-decline (70%)"
    assert assessment.evidence == {"output_lines": [100, 50, 30]}


def test_a_flat_then_falling_output_trips() -> None:
    assert judge(volumes(200, 200, 20)).reason == "stagnation: output-decline (90%)"


def test_a_sixty_nine_percent_decline_does_not_trip() -> None:
    # (100 - 31) / 100 = 69% < 70%
    assert judge(volumes(100, 50, 31)).detector is None


def test_no_decline_when_the_last_iteration_signalled_done() -> None:
    history = volumes(100, 50, 10)
    history[-1] = attrs.evolve(history[-1], done=True)
    assert judge(history).detector is None


def test_done_before_the_last_iteration_is_no_exemption() -> None:
    history = volumes(100, 50, 10)
    history[0] = attrs.evolve(history[0], done=True)
    assert judge(history).reason == "stagnation: output-decline (90%)"


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param((100, 20, 25), id="rises-at-the-end"),
        pytest.param((100, 110, 20), id="rises-in-the-middle"),
        pytest.param((100, 10), id="shorter-than-the-window"),
        pytest.param((0, 0, 0), id="silent"),
        pytest.param((1000, 100, 90, 80), id="decline-before-the-window"),
    ],
)
def test_output_that_is_not_a_window_of_decline_does_not_trip(lines: tuple[int, ...]) -> None:
    assert judge(volumes(*lines)).detector is None


# --- precedence ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "winner", "without_winner", "runner_up"),
    [
        pytest.param(
            [idle(error_fingerprint="E")] * 5,
            "stagnation: identical-errors (5)",
            attrs.evolve(DEFAULT, identical_errors=9),
            "stagnation: no-progress (5)",
            id="identical-errors-over-no-progress",
        ),
        pytest.param(
            [idle(permission_denials=1)] * 3,
            "stagnation: permission-denials (3)",
            attrs.evolve(DEFAULT, permission_denials=9),
            "stagnation: no-progress (3)",
            id="permission-denials-over-no-progress",
        ),
        pytest.param(
            [work(1, test_files_modified=1, output_lines=n) for n in (100, 50, 10)],
            "stagnation: test-fix-loop (100% of changed files are tests)",
            attrs.evolve(DEFAULT, test_fix_ratio=1.0),
            "stagnation: output-decline (90%)",
            id="test-fix-loop-over-output-decline",
        ),
        pytest.param(
            [revert(output_lines=n) for n in (100, 50, 10)],
            "stagnation: output-decline (90%)",
            attrs.evolve(DEFAULT, output_decline=1.0),
            "stagnation: score (-3 over 3)",
            id="output-decline-over-score",
        ),
        pytest.param(
            [idle(error_fingerprint="E", permission_denials=1)] * 5,
            "stagnation: identical-errors (5)",
            attrs.evolve(DEFAULT, identical_errors=9, no_progress=9),
            "stagnation: permission-denials (5)",
            id="identical-errors-over-three-others",
        ),
    ],
)
def test_the_first_detector_that_holds_wins(
    history: list[Signals], winner: str, without_winner: StagnationPolicy, runner_up: str
) -> None:
    assessment = judge(history)
    assert assessment.reason == winner
    assert assessment.risk == HIGH
    assert judge(history, without_winner).reason == runner_up


def test_circular_wins_over_test_fix_loop() -> None:
    history = approaches("A", "B", "A", "B", test_files_modified=1)
    assert judge(history).reason == "stagnation: circular (2 approaches alternate)"
    # without the cycle, the same iterations are a test-fix loop
    unchanged = [attrs.evolve(s, diff_fingerprint=None) for s in history]
    assert judge(unchanged).reason == "stagnation: test-fix-loop (100% of changed files are tests)"


# --- custom thresholds and weights ---------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "history", "reason", "default_reason"),
    [
        pytest.param(
            StagnationPolicy(no_progress=2),
            [stalled(), stalled()],
            "stagnation: no-progress (2)",
            None,
            id="no-progress-2",
        ),
        pytest.param(
            attrs.evolve(DEFAULT, identical_errors=2),
            same_error(2),
            "stagnation: identical-errors (2)",
            None,
            id="identical-errors-2",
        ),
        pytest.param(
            StagnationPolicy(permission_denials=1),
            [work(1, permission_denials=1)],
            "stagnation: permission-denials (1)",
            None,
            id="permission-denials-1",
        ),
        pytest.param(
            attrs.evolve(DEFAULT, output_decline=0.5),
            volumes(100, 80, 50),
            "stagnation: output-decline (50%)",
            None,
            id="output-decline-50",
        ),
        pytest.param(
            StagnationPolicy(test_fix_ratio=0.5),
            [work(4, test_files_modified=3)] * 3,
            "stagnation: test-fix-loop (75% of changed files are tests)",
            None,
            id="test-fix-ratio-50",
        ),
        pytest.param(
            StagnationPolicy(window=2),
            [revert(), revert()],
            "stagnation: score (-2 over 2)",
            None,
            id="window-2",
        ),
        pytest.param(
            attrs.evolve(DEFAULT, window=5),
            [revert()] * 5,
            "stagnation: score (-5 over 5)",
            "stagnation: score (-3 over 3)",
            id="window-5",
        ),
        pytest.param(
            StagnationPolicy(window=4),
            # (100 - 30) / 100 over 4 iterations; over the default 3: (90 - 30) / 90 = 67%
            volumes(100, 90, 80, 30),
            "stagnation: output-decline (70%)",
            None,
            id="output-decline-window-4",
        ),
        pytest.param(
            StagnationPolicy(window=2),
            [work(2, test_files_modified=2)] * 2,
            "stagnation: test-fix-loop (100% of changed files are tests)",
            None,
            id="test-fix-window-2",
        ),
    ],
)
def test_custom_thresholds(
    policy: StagnationPolicy, history: list[Signals], reason: str, default_reason: str | None
) -> None:
    assert judge(history, policy).reason == reason
    assert judge(history, DEFAULT).reason == default_reason


@pytest.mark.parametrize(
    ("policy", "history"),
    [
        pytest.param(attrs.evolve(DEFAULT, output_decline=0.5), volumes(100, 80, 51), id="49%"),
        pytest.param(attrs.evolve(DEFAULT, window=5), [revert()] * 4, id="window-5-incomplete"),
        pytest.param(attrs.evolve(DEFAULT, no_progress=4), [stalled()] * 3, id="no-progress-4"),
        pytest.param(attrs.evolve(DEFAULT, identical_errors=6), same_error(5), id="errors-6"),
        pytest.param(
            attrs.evolve(DEFAULT, test_fix_ratio=0.9),
            [work(10, test_files_modified=9)] * 3,
            id="test-fix-90-exactly",
        ),
    ],
)
def test_custom_thresholds_near_misses(policy: StagnationPolicy, history: list[Signals]) -> None:
    assert judge(history, policy).detector is None


def test_custom_weights_in_every_term() -> None:
    weights = StagnationWeights(
        test_passing=10,
        task_completed=20,
        file_modified=3,
        error_resolved=7,
        same_error=-11,
        no_files_modified=-13,
        revert=-4,
    )
    full = work(2, tests_newly_passing=1, tasks_completed=2, lint_resolved=3, reverts=1)
    # 10 * 1 + 20 * 2 + 3 * 2 + 7 * 3 - 4 * 1 = 10 + 40 + 6 + 21 - 4 = 73
    assert score(full, None, weights) == 73
    # -13 (no file) - 11 (same error) = -24
    assert score(idle(error_fingerprint="E"), idle(error_fingerprint="E"), weights) == -24


def test_custom_weights_change_what_the_score_detector_sees() -> None:
    harsh = attrs.evolve(DEFAULT, weights=attrs.evolve(DEFAULT.weights, revert=-5))
    history = [work(1, reverts=1)] * 3
    # default: 1 - 1 = 0 each, window 0
    assert judge(history).detector is None
    # harsh: 1 - 5 = -4 each, window -12
    assessment = judge(history, harsh)
    assert (assessment.score, assessment.window_score) == (-4, -12)
    assert assessment.reason == "stagnation: score (-12 over 3)"


def test_weights_do_not_change_the_streak_detectors() -> None:
    lenient = StagnationPolicy(weights=StagnationWeights(no_files_modified=0))
    assessment = judge([idle()] * 3, lenient)
    assert (assessment.score, assessment.window_score) == (0, 0)
    assert assessment.reason == "stagnation: no-progress (3)"


# --- risk -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "risk"),
    [
        pytest.param([], LOW, id="nothing-yet"),
        pytest.param([work(2)], LOW, id="progress"),
        pytest.param([work(1)] * 5, LOW, id="steady-progress"),
        pytest.param([work(2), idle(), work(2)], LOW, id="one-idle-recovered"),
        pytest.param([idle()], MEDIUM, id="one-idle-iteration"),
        # scores 6 and 0: the window is positive, but the last iteration made no progress
        pytest.param([work(1, tasks_completed=1), stalled()], MEDIUM, id="last-without-progress"),
        # +1 - 1 = 0: a flat trend
        pytest.param([work(1, reverts=1)], MEDIUM, id="flat-window"),
        # +2 - 1 - 1 = 0
        pytest.param([work(2), revert(), revert()], MEDIUM, id="window-zero"),
        pytest.param([stalled(), work(1), stalled()], MEDIUM, id="broken-no-progress"),
        pytest.param([work(1), stalled(), stalled()], HIGH, id="no-progress-one-away"),
        pytest.param([work(1, permission_denials=1)] * 2, HIGH, id="denials-one-away"),
        pytest.param(same_error(4), HIGH, id="identical-errors-one-away"),
        pytest.param(same_error(3), LOW, id="identical-errors-two-away"),
        pytest.param([revert()] * 3, HIGH, id="tripped"),
    ],
)
def test_risk(history: list[Signals], risk: str) -> None:
    assert judge(history).risk == risk


def test_empty_history() -> None:
    assert judge([]) == Assessment(score=0, window_score=0, risk=LOW)


# --- error fingerprints ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("expected 3 got 4", "expected 10 got 12", id="numbers"),
        pytest.param("took 0.25s", "took 13.5s", id="decimals"),
        pytest.param("<Foo object at 0x7f3a2b9c1d30>", "<Foo object at 0x10FF00>", id="0x-ids"),
        pytest.param("bad commit abc1234", "bad commit 9f8e7d6c5b4a", id="commit-ids"),
        pytest.param(
            "sha256 " + "a" * 64 + " mismatch", "sha256 " + "0f" * 32 + " mismatch", id="hashes"
        ),
        pytest.param(
            "2024-01-02T03:04:05Z request failed",
            "2025-11-30 23:59:59.123+02:00 request failed",
            id="timestamps",
        ),
        pytest.param(
            "[2024-01-02 03:04:05,123] ERROR boom", "[2031-12-31 00:00:00,999] ERROR boom", id="log"
        ),
        pytest.param(
            "FileNotFoundError: '/tmp/pytest-of-ci/pytest-12/test_a0/data.json'",
            "FileNotFoundError: '/home/runner/work/x/data.json'",
            id="absolute-paths",
        ),
        pytest.param(
            'File "/srv/app/mod.py", line 12, in f',
            'File "/tmp/x/mod.py", line 340, in f',
            id="traceback-lines",
        ),
        pytest.param(
            "/a/b/c.py:12:5: E501 line too long",
            "/x/c.py:7: E501 line too long",
            id="path-line-col",
        ),
        pytest.param(
            "C:\\Users\\ci\\app.py:3: boom", "D:\\build\\app.py:44: boom", id="windows-paths"
        ),
        pytest.param("  boom  \n", "boom", id="surrounding-whitespace"),
        pytest.param("a   b\n\tc", "a b c", id="inner-whitespace"),
        pytest.param(
            "2024-01-02T03:04:05Z /tmp/a/x.py:3: KeyError 0xdead at line 4 after 12 tries",
            "2030-06-07T08:09:10Z /var/b/x.py:99: KeyError 0xbeef at line 77 after 3 tries",
            id="all-at-once",
        ),
    ],
)
def test_fingerprint_ignores_what_varies_between_runs(first: str, second: str) -> None:
    assert error_fingerprint(first) == error_fingerprint(second)
    assert error_fingerprint(first) is not None


def test_fingerprint_ignores_the_number_of_digits_of_a_number() -> None:
    # A 6-digit and a 7-digit number are both "a number": the messages differ only in it.
    assert error_fingerprint("killed after 999999 ms") == error_fingerprint(
        "killed after 1000000 ms"
    )


def test_fingerprint_ignores_uuids() -> None:
    # Two random uuid4s: hex ids, differing in every group.
    assert error_fingerprint(
        "job 3f2b1c9e-4a5d-4e6f-8a7b-1c2d3e4f5a6b failed"
    ) == error_fingerprint("job 9a8b7c6d-beef-4cad-9e7b-abcdefabcdef failed")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param("NameError: x", "TypeError: x", id="error-type"),
        pytest.param("KeyError: 'alpha'", "KeyError: 'beta'", id="key"),
        pytest.param("/a/b.py:3: E501 line too long", "/a/b.py:3: F401 unused import", id="code"),
        pytest.param("connection refused", "connection reset", id="message"),
        pytest.param("relative/path.py failed", "other/path.py failed", id="relative-paths"),
    ],
)
def test_fingerprint_tells_different_errors_apart(first: str, second: str) -> None:
    assert error_fingerprint(first) != error_fingerprint(second)


@pytest.mark.parametrize("text", [None, "", " ", "\n\t  \n"])
def test_no_fingerprint_without_an_error(text: str | None) -> None:
    assert error_fingerprint(text) is None


def test_fingerprint_is_a_short_stable_hex_digest() -> None:
    fingerprint = error_fingerprint("boom")
    assert fingerprint is not None
    assert len(fingerprint) == 16
    assert int(fingerprint, 16) >= 0
    assert error_fingerprint("boom") == fingerprint


# --- Signals records ------------------------------------------------------------------------

FULL = Signals(
    files_modified=3,
    meaningful_files=2,
    tasks_completed=1,
    tests_newly_passing=4,
    tests_newly_failing=1,
    lint_errors=0,
    lint_resolved=2,
    error_fingerprint="0123456789abcdef",
    output_bytes=2048,
    output_lines=40,
    permission_denials=1,
    test_files_modified=1,
    reverts=1,
    diff_fingerprint="fedcba9876543210",
    done=True,
)


@pytest.mark.parametrize("signals", [Signals(), FULL], ids=["defaults", "full"])
def test_record_round_trip(signals: Signals) -> None:
    assert Signals.from_record(signals.as_record()) == signals
    assert Signals.from_record(json.loads(json.dumps(signals.as_record()))) == signals


def test_record_ignores_unknown_keys_and_defaults_missing_ones() -> None:
    signals = Signals.from_record({"files_modified": 2, "future_signal": [1, 2], "x": None})
    assert signals == Signals(files_modified=2)
    assert Signals.from_record({}) == Signals()


def test_record_accepts_no_lint_count() -> None:
    assert Signals.from_record({"lint_errors": None}).lint_errors is None
    assert Signals.from_record({"lint_errors": 0}).lint_errors == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("files_modified", -1),
        ("files_modified", 1.0),
        ("files_modified", "1"),
        ("files_modified", True),
        ("files_modified", None),
        ("meaningful_files", [1]),
        ("tasks_completed", -3),
        ("reverts", False),
        ("output_lines", 12.5),
        ("lint_errors", -1),
        ("lint_errors", "3"),
        ("lint_errors", True),
        ("done", 1),
        ("done", "yes"),
        ("done", None),
        ("error_fingerprint", 123),
        ("error_fingerprint", b"abc"),
        ("diff_fingerprint", ["a"]),
    ],
)
def test_record_refuses_bad_values(key: str, value: object) -> None:
    with pytest.raises(ValueError, match=key):
        Signals.from_record({key: value})


# --- properties -----------------------------------------------------------------------------

SIGNALS = st.builds(
    Signals,
    files_modified=st.integers(0, 4),
    meaningful_files=st.integers(0, 4),
    tasks_completed=st.integers(0, 2),
    tests_newly_passing=st.integers(0, 3),
    tests_newly_failing=st.integers(0, 3),
    lint_errors=st.none() | st.integers(0, 10),
    lint_resolved=st.integers(0, 3),
    error_fingerprint=st.sampled_from([None, "E", "F"]),
    output_bytes=st.integers(0, 10_000),
    output_lines=st.integers(0, 200),
    permission_denials=st.integers(0, 2),
    test_files_modified=st.integers(0, 4),
    reverts=st.integers(0, 2),
    diff_fingerprint=st.sampled_from([None, "A", "B", "C"]),
    done=st.booleans(),
)

POLICIES = st.builds(
    StagnationPolicy,
    window=st.integers(1, 6),
    no_progress=st.integers(1, 6),
    identical_errors=st.integers(1, 7),
    output_decline=st.floats(0.0, 1.0),
    permission_denials=st.integers(1, 5),
    test_fix_ratio=st.floats(0.0, 1.0),
    weights=st.builds(
        StagnationWeights,
        test_passing=st.integers(-5, 5),
        task_completed=st.integers(-5, 5),
        file_modified=st.integers(-5, 5),
        error_resolved=st.integers(-5, 5),
        same_error=st.integers(-5, 5),
        no_files_modified=st.integers(-5, 5),
        revert=st.integers(-5, 5),
    ),
)

DETECTOR_NAMES = {
    "identical-errors",
    "no-progress",
    "permission-denials",
    "circular",
    "test-fix-loop",
    "output-decline",
    "score",
}


@DETERMINISTIC
@given(history=st.lists(SIGNALS, max_size=12), policy=st.one_of(st.just(DEFAULT), POLICIES))
def test_assess_never_raises_and_sums_the_window(
    history: list[Signals], policy: StagnationPolicy
) -> None:
    assessment = assess(history, policy)
    scores = [
        score(current, history[index - 1] if index else None, policy.weights)
        for index, current in enumerate(history)
    ]
    assert assessment.window_score == sum(scores[-policy.window :])
    assert assessment.score == (scores[-1] if scores else 0)
    assert assessment.risk in (LOW, MEDIUM, HIGH)
    if assessment.detector is None:
        assert (assessment.reason, assessment.evidence) == (None, {})
    else:
        assert assessment.detector in DETECTOR_NAMES
        assert assessment.reason is not None
        assert assessment.reason.startswith(f"stagnation: {assessment.detector} (")
        assert assessment.reason.endswith(")")
        assert assessment.risk == HIGH


@DETERMINISTIC
@given(history=st.lists(SIGNALS, min_size=1, max_size=12))
def test_a_negative_complete_window_always_trips(history: list[Signals]) -> None:
    assessment = assess(history, DEFAULT)
    if len(history) >= DEFAULT.window and assessment.window_score < 0:
        assert assessment.detector is not None


@DETERMINISTIC
@given(signals=SIGNALS)
def test_record_round_trip_property(signals: Signals) -> None:
    assert Signals.from_record(json.loads(json.dumps(signals.as_record()))) == signals


def test_a_circular_approach_wins_over_the_permission_denials_it_met() -> None:
    # The more specific kind names the stall: the same two approaches in turn.
    history = approaches("A", "B", "A", "B", permission_denials=1)
    assert judge(history).reason == "stagnation: circular (2 approaches alternate)"
    assert judge(history[:3]).reason == "stagnation: permission-denials (3)"
