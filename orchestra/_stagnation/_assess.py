"""The progress score and the stagnation detectors: pure functions of the recorded signals.

Because they read nothing but the iterations' recorded signals and the policy,
a change's history can be replayed under another policy (``forge policy
simulate``) and trips exactly where a live loop under that policy would.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs

from .._policy import StagnationPolicy, StagnationWeights
from ._signals import Signals, trailing_streak

LOW, MEDIUM, HIGH = "low", "medium", "high"


def score(current: Signals, previous: Signals | None, weights: StagnationWeights) -> int:
    """One iteration's progress score: the weighted sum of what it measurably did.

    An iteration that changed only tests earns nothing for its edits nor for
    the tests they made pass: fixing the tests is not progress on the work.
    The same error as the previous iteration's (the agent's own, or the same
    tests failing) costs ``same_error`` once.
    """
    total = (
        weights.task_completed * current.tasks_completed
        + weights.file_modified * current.work_files
        + weights.error_resolved * current.lint_resolved
        + weights.revert * current.reverts
    )
    if not _tests_only(current):
        total += weights.test_passing * current.tests_newly_passing
    if current.files_modified == 0:
        total += weights.no_files_modified
    if previous is not None and _same_error(current, previous):
        total += weights.same_error
    return total


def _tests_only(signals: Signals) -> bool:
    """Every meaningful change of the iteration is to a test file."""
    return signals.meaningful_tests > 0 and signals.work_files == 0


def _same_error(current: Signals, previous: Signals) -> bool:
    own = current.error_fingerprint
    tests = current.failing_tests
    return (own is not None and own == previous.error_fingerprint) or (
        tests is not None and tests == previous.failing_tests
    )


@attrs.frozen
class Assessment:
    """What the detectors say after the last iteration of a history.

    Attributes:
        score: The last iteration's score.
        window_score: The score summed over the last ``window`` iterations.
        detector: The detector that trips (``no-progress`` ...), or None.
        reason: ``stagnation: <detector> (<figure>)``, or None.
        evidence: The figures that made it trip.
        risk: ``low``, ``medium`` or ``high``: how close the loop is to tripping.
    """

    score: int
    window_score: int
    detector: str | None = None
    reason: str | None = None
    evidence: dict[str, object] = attrs.field(factory=dict)
    risk: str = LOW


def assess(history: Sequence[Signals], policy: StagnationPolicy) -> Assessment:
    """Score the last iteration of ``history`` and run every detector over it."""
    if not history:
        return Assessment(score=0, window_score=0)
    scores = [
        score(current, history[index - 1] if index else None, policy.weights)
        for index, current in enumerate(history)
    ]
    recent = scores[-policy.window :]
    window_score = sum(recent)
    for name, detector in _DETECTORS:
        found = detector(history, scores, policy)
        if found is not None:
            figure, evidence = found
            return Assessment(
                score=scores[-1],
                window_score=window_score,
                detector=name,
                reason=f"stagnation: {name} ({figure})",
                evidence=evidence,
                risk=HIGH,
            )
    return Assessment(
        score=scores[-1],
        window_score=window_score,
        risk=_risk(history, scores, policy),
    )


def _no_progress(signals: Signals) -> bool:
    """No meaningful change to the work and no task completed.

    Whitespace edits are not progress, and neither are edits to tests alone.
    """
    return signals.work_files == 0 and signals.tasks_completed == 0


_Found = tuple[str, dict[str, object]] | None


def _score_window(history: Sequence[Signals], scores: list[int], p: StagnationPolicy) -> _Found:
    if len(scores) < p.window:
        return None  # judged once a whole window is recorded
    total = sum(scores[-p.window :])
    if total < 0:
        return f"{total} over {p.window}", {"scores": scores[-p.window :]}
    return None


def _no_progress_streak(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    streak = trailing_streak(history, _no_progress)
    return (str(streak), {"iterations": streak}) if streak >= p.no_progress else None


def _identical_errors(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    last = history[-1].error_fingerprint
    if last is None:
        return None
    streak = trailing_streak(history, lambda s: s.error_fingerprint == last)
    if streak >= p.identical_errors:
        return str(streak), {"fingerprint": last, "iterations": streak}
    return None


def _output_decline(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    if len(history) < p.window or history[-1].done:
        return None
    volumes = [s.output_lines for s in history[-p.window :]]
    first, last = volumes[0], volumes[-1]
    declining = all(b <= a for a, b in itertools.pairwise(volumes))
    # A decline from a handful of lines is noise, not a loop running dry.
    baseline = max(1, p.output_min_lines)
    if first >= baseline and declining and (first - last) / first >= p.output_decline:
        share = round(100 * (first - last) / first)
        return f"{share}%", {"output_lines": volumes}
    return None


def _denials(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    streak = trailing_streak(history, lambda s: s.permission_denials > 0)
    return (str(streak), {"iterations": streak}) if streak >= p.permission_denials else None


def _guard_refusals(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    # An agent that keeps reaching for a protected path is stuck on the path, not
    # short of a permission: its own detector, at the permission-denials threshold.
    streak = trailing_streak(history, lambda s: s.guard_refusals > 0)
    return (str(streak), {"iterations": streak}) if streak >= p.permission_denials else None


def _test_fix_loop(history: Sequence[Signals], _s: list[int], p: StagnationPolicy) -> _Found:
    if len(history) < p.window:
        return None
    recent = history[-p.window :]
    changed = sum(s.files_modified for s in recent)
    tests = sum(s.test_files_modified for s in recent)
    if changed and tests / changed > p.test_fix_ratio:
        share = round(100 * tests / changed)
        return f"{share}% of changed files are tests", {"changed": changed, "tests": tests}
    return None


def _circular(history: Sequence[Signals], _s: list[int], _p: StagnationPolicy) -> _Found:
    for period in (2, 3):
        recent = history[-2 * period :]
        if len(recent) < 2 * period:
            continue
        prints = [s.diff_fingerprint for s in recent]
        first, second = prints[:period], prints[period:]
        resolved = any(s.tasks_completed or s.tests_newly_passing for s in recent)
        if None not in prints and first == second and len(set(first)) == period and not resolved:
            return f"{period} approaches alternate", {"diff_fingerprints": prints}
    return None


# The more specific a detector, the earlier it is asked: a loop repeating one
# error also makes no progress, and its stall is the error's, not a plan's.
_DETECTORS = (
    ("identical-errors", _identical_errors),
    ("circular", _circular),
    ("test-fix-loop", _test_fix_loop),
    ("protected-paths", _guard_refusals),
    ("permission-denials", _denials),
    ("no-progress", _no_progress_streak),
    ("output-decline", _output_decline),
    ("score", _score_window),
)


def repeats(
    detector: str, signals: Signals | None, policy: StagnationPolicy, *, error: str | None
) -> bool:
    """Whether one iteration repeats the pattern ``detector`` tripped on (a probe's, after it).

    A probe is one iteration, too few for a streak or a window: it is judged
    on its own signals. It repeats ``identical-errors`` when it ends on the
    same ``error`` fingerprint, ``permission-denials`` or ``protected-paths``
    when it is denied again, ``test-fix-loop`` when its edits are tests above
    the ratio, ``no-progress`` when it changed nothing meaningful. The other
    detectors' patterns take the positive score the probe needs anyway.
    """
    if signals is None:
        return False
    if detector == "identical-errors":
        return error is not None and signals.error_fingerprint == error
    if detector == "permission-denials":
        return signals.permission_denials > 0
    if detector == "protected-paths":
        return signals.guard_refusals > 0
    if detector == "test-fix-loop":
        changed = signals.files_modified
        return changed > 0 and signals.test_files_modified / changed > policy.test_fix_ratio
    return False


def _risk(history: Sequence[Signals], scores: list[int], p: StagnationPolicy) -> str:
    """High when a detector is one iteration away; medium when the trend is flat or worse."""

    def close_to(streak: int, threshold: int) -> bool:
        return streak > 0 and streak >= threshold - 1

    last_error = history[-1].error_fingerprint
    near = (
        close_to(trailing_streak(history, _no_progress), p.no_progress)
        or close_to(
            trailing_streak(history, lambda s: s.permission_denials > 0), p.permission_denials
        )
        or (
            last_error is not None
            and close_to(
                trailing_streak(history, lambda s: s.error_fingerprint == last_error),
                p.identical_errors,
            )
        )
    )
    if near:
        return HIGH
    if sum(scores[-p.window :]) <= 0 or _no_progress(history[-1]):
        return MEDIUM
    return LOW
