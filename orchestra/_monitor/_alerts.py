"""Alerts: early warnings over a loop's measured iterations, as pure functions.

Each alert watches one figure against its ``[alerts]`` threshold:

- ``loop-count``: iterations on the change since a task was last completed;
- ``no-tasks`` / ``no-files``: iterations in a row completing no task / modifying no file;
- ``pass-rate``: iterations in a row whose test pass rate (JUnit XML) fell;
- ``error-frequency``: iterations in a row whose error count (failed tests,
  lint errors, the iteration's own error) rose;
- ``output-volume``: the last iteration's output lines against the window's
  peak, once the peak is at least ``[stagnation] output_min_lines``;
- ``calls-remaining``: the share of the rate window's calls left;
- ``negative-score``: iterations in a row with a negative progress score.

An alert is raised when its figure crosses the threshold and cleared when it
is back; it warns a person and does not stop the loop, unless ``[alerts]
trip_on`` names it, in which case it opens the circuit like a stagnation trip.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import attrs

from .._policy import ALERTS, AlertsPolicy, Policy
from .._stagnation import Signals, score, trailing_streak

CALLS_REMAINING = "calls-remaining"

# Iterations the alerts look back on, live and in a replay (the longest
# threshold is far shorter).
ALERT_MEMORY = 200


@attrs.frozen
class Alert:
    """One alert that holds: its name, what it says, and its figure against its threshold."""

    name: str
    detail: str
    value: float
    threshold: float


@attrs.frozen
class CallsLeft:
    """The shared rate window's calls: left of allowed."""

    remaining: int
    calls: int


def _rising_streak(values: Sequence[float]) -> int:
    """How many steps in a row, at the end of ``values``, each rose above the one before."""
    count = 0
    for before, after in reversed(list(itertools.pairwise(values))):
        if after <= before:
            break
        count += 1
    return count


def evaluate(
    history: Sequence[Signals], policy: Policy, *, calls: CallsLeft | None = None
) -> dict[str, Alert]:
    """The alerts that hold after the last iteration of ``history`` (oldest first)."""
    if not policy.alerts.enabled:
        return {}
    found = [*_history_alerts(history, policy)] if history else []
    if (calls_alert := _calls_alert(calls, policy.alerts)) is not None:
        found.append(calls_alert)
    return {alert.name: alert for alert in found}


def _history_alerts(history: Sequence[Signals], policy: Policy) -> list[Alert]:
    """The alerts the iterations' own signals raise, in a stable order."""
    p = policy.alerts
    candidates = [
        *_task_alerts(history, p),
        _files_alert(history, p),
        _pass_rate_alert(history, p),
        _errors_alert(history, p),
        _output_alert(history, policy),
        _score_alert(history, policy),
    ]
    return [alert for alert in candidates if alert is not None]


def _task_alerts(history: Sequence[Signals], p: AlertsPolicy) -> list[Alert]:
    if not history[-1].tasks_measured:
        # Without a tasks file the change is the task: loop-count counts its
        # iterations (since a person's reset); no-tasks has nothing to count.
        on_change = len(history)
        if on_change <= p.loop_count:
            return []
        detail = f"{on_change} iterations on the change (no tasks file to count tasks in)"
        return [Alert("loop-count", detail, on_change, p.loop_count)]
    since_task = trailing_streak(history, lambda s: s.tasks_completed == 0)
    found = []
    if since_task > p.loop_count:
        detail = f"{since_task} iterations without a task completed"
        found.append(Alert("loop-count", detail, since_task, p.loop_count))
    if since_task and since_task >= p.no_tasks:
        detail = f"no task completed for {since_task} iterations"
        found.append(Alert("no-tasks", detail, since_task, p.no_tasks))
    return found


def _files_alert(history: Sequence[Signals], p: AlertsPolicy) -> Alert | None:
    no_files = trailing_streak(history, lambda s: s.files_modified == 0)
    if no_files < p.no_files:
        return None
    return Alert("no-files", f"no file modified for {no_files} iterations", no_files, p.no_files)


def _pass_rate_alert(history: Sequence[Signals], p: AlertsPolicy) -> Alert | None:
    rates = [rate for s in history if (rate := s.pass_rate) is not None]
    falling = _rising_streak([-rate for rate in rates])
    if falling < p.pass_rate:
        return None
    detail = f"test pass rate fell {falling} times in a row, now {rates[-1]:.0%}"
    return Alert("pass-rate", detail, falling, p.pass_rate)


def _errors_alert(history: Sequence[Signals], p: AlertsPolicy) -> Alert | None:
    rising = _rising_streak([s.errors for s in history])
    if rising < p.error_frequency:
        return None
    detail = f"errors rose {rising} times in a row, now {history[-1].errors}"
    return Alert("error-frequency", detail, rising, p.error_frequency)


def _output_alert(history: Sequence[Signals], policy: Policy) -> Alert | None:
    window = history[-policy.stagnation.window :]
    peak = max(s.output_lines for s in window)
    last = window[-1].output_lines
    if peak < max(1, policy.stagnation.output_min_lines) or window[-1].done:
        return None
    decline = (peak - last) / peak
    if decline < policy.alerts.output_volume:
        return None
    detail = f"output fell {decline:.0%} (from {peak} to {last} lines)"
    return Alert("output-volume", detail, round(decline, 3), policy.alerts.output_volume)


def _score_alert(history: Sequence[Signals], policy: Policy) -> Alert | None:
    scores = [
        score(current, history[index - 1] if index else None, policy.stagnation.weights)
        for index, current in enumerate(history)
    ]
    negative = sum(1 for _ in itertools.takewhile(lambda value: value < 0, reversed(scores)))
    if negative < policy.alerts.negative_score:
        return None
    detail = f"progress score negative for {negative} iterations"
    return Alert("negative-score", detail, negative, policy.alerts.negative_score)


def _calls_alert(calls: CallsLeft | None, p: AlertsPolicy) -> Alert | None:
    if calls is None or calls.calls <= 0:
        return None
    share = calls.remaining / calls.calls
    if share >= p.calls_remaining:
        return None
    detail = f"{calls.remaining} of {calls.calls} calls left in the rate window"
    return Alert(CALLS_REMAINING, detail, round(share, 3), p.calls_remaining)


@attrs.frozen
class AlertStep:
    """What one judged iteration did to a loop's alerts.

    Attributes:
        measured: What the alerts look back on after it (the last
            :data:`ALERT_MEMORY` measured iterations).
        holding: The alerts that hold after it, by name (name, what it says).
        raised: The alerts that hold now and did not before.
        cleared: The names of those that held before and no longer do.
        risk: The stagnation risk, raised by the quality alerts holding.
    """

    measured: tuple[Signals, ...]
    holding: tuple[tuple[str, str], ...]
    raised: tuple[Alert, ...]
    cleared: tuple[str, ...]
    risk: str | None


def step_alerts(
    measured: tuple[Signals, ...],
    before: Iterable[str],
    signals: Signals | None,
    policy: Policy,
    *,
    risk: str | None,
    calls: CallsLeft | None,
) -> AlertStep:
    """Judge the alerts after one iteration: which hold, which were raised or cleared.

    Args:
        measured: What the alerts looked back on before the iteration.
        before: The names of the alerts raised before it.
        signals: What the iteration measured, if it did.
        policy: The loop's policy (``[alerts]``, ``[stagnation]``).
        risk: The stagnation detectors' risk for the iteration.
        calls: The rate window's calls left after its permit, if known.
    """
    if signals is not None:
        measured = (*measured, signals)[-ALERT_MEMORY:]
    holding = evaluate(measured, policy, calls=calls)
    held = set(before)
    return AlertStep(
        measured=measured,
        holding=tuple((name, alert.detail) for name, alert in sorted(holding.items())),
        raised=tuple(alert for name, alert in sorted(holding.items()) if name not in held),
        cleared=tuple(sorted(held - set(holding))),
        risk=risk_with_alerts(risk, holding),
    )


def promoted(history: Sequence[Signals], policy: Policy) -> Alert | None:
    """The first alert ``[alerts] trip_on`` promotes to a trip, if one holds.

    Judged over the iterations since the circuit last opened, as the
    stagnation detectors are. The rate window's calls are the provider's
    doing, not the loop's: ``calls-remaining`` warns but cannot trip.
    """
    if not policy.alerts.trip_on or not history:
        return None
    holding = evaluate(history, policy)
    for name in policy.alerts.trip_on:
        if name in holding:
            return holding[name]
    return None


def clears(name: str, signals: Signals | None) -> bool:
    """Whether a probe's own iteration clears what alert ``name`` measured.

    A circuit an alert opened closes only on a probe that ends the alert's
    streak as well as making progress: a task completed after ``loop-count``
    or ``no-tasks``, a file modified after ``no-files``, tests recovering
    after ``pass-rate``, errors falling after ``error-frequency``. The other
    alerts are cleared by the progress the probe needs anyway.
    """
    if signals is None:
        return False
    if name in ("loop-count", "no-tasks"):
        return signals.tasks_completed > 0
    if name == "no-files":
        return signals.files_modified > 0
    if name == "pass-rate":
        return signals.tests_newly_failing == 0 and (
            signals.tests_newly_passing > 0 or signals.tests_failed == 0
        )
    if name == "error-frequency":
        return signals.errors == 0 or signals.lint_resolved > 0 or signals.tests_newly_passing > 0
    return True


# Alerts about the loop's own work (the rate window's calls are the provider's doing).
_QUALITY = frozenset(ALERTS) - {"calls-remaining"}
_RISKS = ("low", "medium", "high")


def risk_with_alerts(risk: str | None, holding: Iterable[str]) -> str | None:
    """The stagnation risk, raised by the quality alerts that hold.

    One such alert makes the risk at least medium, two or more make it high:
    a loop whose tests keep failing more is at risk even while it edits files.
    """
    raised = sum(1 for name in holding if name in _QUALITY)
    floor = "high" if raised >= 2 else "medium" if raised == 1 else None
    if floor is None or risk is None:
        return risk if floor is None else floor
    return max(risk, floor, key=lambda r: _RISKS.index(r) if r in _RISKS else 0)
