"""Alerts: each one raised at its threshold and cleared when its figure comes back."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from orchestra._engine import LoopState, decide, supervised_rules
from orchestra._engine._record import IterationRecord
from orchestra._monitor._alerts import CallsLeft, evaluate
from orchestra._policy import AlertsPolicy, Policy, StagnationPolicy
from orchestra._stagnation import Signals

WORKING = Signals(files_modified=1, meaningful_files=1, output_lines=50)
IDLE = Signals(files_modified=0, output_lines=50)
TASK = attrs.evolve(WORKING, tasks_completed=1)


def names(
    history: Sequence[Signals], policy: Policy | None = None, calls: CallsLeft | None = None
) -> set[str]:
    return set(evaluate(history, policy or Policy(), calls=calls))


def test_loop_count_is_raised_past_its_threshold_and_cleared_by_a_task() -> None:
    policy = Policy(alerts=AlertsPolicy(loop_count=4))
    history = [WORKING] * 4
    assert "loop-count" not in names(history, policy)
    history.append(WORKING)
    found = evaluate(history, policy)["loop-count"]
    assert found.detail == "5 iterations without a task completed"
    assert (found.value, found.threshold) == (5, 4)
    assert "loop-count" not in names([*history, TASK], policy)


def test_no_tasks_and_no_files() -> None:
    assert names([WORKING, WORKING]) == set()
    assert "no-tasks" in names([WORKING] * 3)
    assert "no-tasks" not in names([WORKING, WORKING, WORKING, TASK])
    assert "no-files" in names([TASK, IDLE, IDLE, IDLE])
    assert "no-files" not in names([IDLE, IDLE, IDLE, TASK])


def _tests(passed: int, failed: int) -> Signals:
    return attrs.evolve(TASK, tests_passed=passed, tests_failed=failed)


def test_a_falling_pass_rate_is_raised_after_three_falls_and_cleared_when_it_holds() -> None:
    falling = [_tests(5, 1), _tests(4, 2), _tests(3, 3)]
    assert "pass-rate" not in names(falling)  # two falls
    falling.append(_tests(2, 4))
    alert = evaluate(falling, Policy())["pass-rate"]
    assert alert.detail == "test pass rate fell 3 times in a row, now 33%"
    assert "pass-rate" not in names([*falling, _tests(2, 4)])
    # The figures: 5/6 to 0/6 over six iterations.
    six = [_tests(n, 6 - n) for n in (5, 4, 3, 2, 1, 0)]
    assert "pass-rate" in names(six)


def test_rising_errors_are_raised_after_three_rises_and_cleared_when_they_stop() -> None:
    rising = [_tests(6, n) for n in (0, 1, 2, 3)]
    assert evaluate(rising, Policy())["error-frequency"].detail == (
        "errors rose 3 times in a row, now 3"
    )
    assert "error-frequency" not in names(rising[:-1])
    assert "error-frequency" not in names([*rising, _tests(6, 3)])


def test_output_volume_decline_needs_a_baseline() -> None:
    loud = attrs.evolve(TASK, output_lines=100)
    quiet = attrs.evolve(TASK, output_lines=20)
    assert evaluate([loud, quiet], Policy())["output-volume"].detail == (
        "output fell 80% (from 100 to 20 lines)"
    )
    assert "output-volume" not in names([loud, quiet, loud])
    one_line = attrs.evolve(TASK, output_lines=1)
    silent = attrs.evolve(TASK, output_lines=0)
    assert "output-volume" not in names([one_line, silent])


def test_calls_remaining() -> None:
    assert "calls-remaining" in names([TASK], calls=CallsLeft(remaining=19, calls=100))
    assert "calls-remaining" not in names([TASK], calls=CallsLeft(remaining=20, calls=100))


def test_a_negative_score_for_three_iterations() -> None:
    assert "negative-score" in names([TASK, IDLE, IDLE, IDLE])
    assert "negative-score" not in names([IDLE, IDLE, IDLE, WORKING])


def test_alerts_can_be_turned_off() -> None:
    assert names([IDLE] * 5, Policy(alerts=AlertsPolicy(enabled=False))) == set()


def test_a_promoted_alert_opens_the_circuit() -> None:
    policy = Policy(
        alerts=AlertsPolicy(no_tasks=2, trip_on=("no-tasks",)),
        stagnation=StagnationPolicy(no_progress=9),
    )
    rules = supervised_rules(policy)
    state = LoopState()
    for number in (1, 2):
        record = IterationRecord(run_id="r", iteration=number, signals=WORKING)
        state, verdict = decide(state, record, policy, rules, now=0.0, now_iso="")
    assert verdict.opened
    assert state.circuit.reason == "alert: no-tasks (no task completed for 2 iterations)"
    assert state.circuit.recovery_type == "no-progress"
    assert state.circuit.recovery_step == 1
