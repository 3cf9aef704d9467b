"""The loop's passes: which one is in progress, which a checkpoint begins, the Goal route's steps.

Pass N is ``iteration-N``. ``iteration-1`` begins the first pass; a failed
verify that leaves the loop free to go on begins the next one, and the
``iteration-N`` checkpoints that follow report on that pass without
beginning another. Each pass begins once, so its ``forge.iteration.started``
is written once.

A failed verify is a verdict: it stands on a ``forge verify --change`` that
no earlier failed verify has counted. On the Goal route every pass is a goal
step and ``max_goal_steps`` bounds them: a verify that fails in the last step
ends the loop (``goal_steps_exhausted``) instead of beginning another pass.

Pure, like the rest of the contract: each function returns what the next
checkpoint holds or raises the rule it breaks.
"""

from __future__ import annotations

import re

from ._model import Checkpoint, ContractError, GoalStepsExhausted, VerifyStanding

_ITERATION = re.compile(r"iteration-(?P<number>[1-9]\d*)")


def pass_in_progress(checkpoint: Checkpoint) -> int:
    """The pass in progress; 0 before the first began.

    A checkpoint written before passes were counted says it in its stage.
    """
    if checkpoint.iteration:
        return checkpoint.iteration
    match = _ITERATION.fullmatch(checkpoint.stage)
    return int(match["number"]) if match else 0


def pass_begun(before: Checkpoint, after: Checkpoint) -> int | None:
    """The pass a checkpoint began (each begins once), None when it began none."""
    number = after.iteration
    if number <= pass_in_progress(before):
        return None
    if after.stage == "verify-failed" and number == after.failed_iteration:
        return None  # the pass that failed, not its fix: that waits for the stop to clear
    return number


def goal_steps_spent(checkpoint: Checkpoint) -> bool:
    """Whether a verify failed in the Goal route's last step: no step is left for a fix."""
    limit = _goal_limit(checkpoint)
    return limit is not None and (checkpoint.failed_iteration or 0) >= limit


def enter(checkpoint: Checkpoint, stage: str) -> int:
    """The pass an ``iteration-N`` checkpoint is about: the one in progress, or the next.

    Raises:
        ContractError: a pass that is over, or one that skips passes.
        GoalStepsExhausted: a pass beyond the Goal route's ``max_goal_steps``.
    """
    match = _ITERATION.fullmatch(stage)
    if match is None:
        raise ContractError(f"--stage {stage!r}: not an iteration")
    wanted = int(match["number"])
    current = pass_in_progress(checkpoint)
    if wanted == current:
        return current
    if wanted != current + 1:
        where = f"the pass in progress is {current}" if current else "no pass has begun"
        raise ContractError(
            f"--stage {stage}: {where}",
            hint=(
                f"iteration-{current} reports on it; iteration-{current + 1} begins the next"
                if current
                else "the first pass is iteration-1"
            ),
        )
    limit = _goal_limit(checkpoint)
    if limit is not None and wanted > limit:
        raise _no_goal_step(checkpoint, limit)
    return wanted


def fail(checkpoint: Checkpoint, verify: VerifyStanding | None) -> tuple[int, int]:
    """The pass whose verify failed, and the ``forge verify`` attempt that says so.

    Raises:
        GoalStepsExhausted: the Goal route's last step already failed.
        ContractError: no ``forge verify --change`` was recorded, or the last
            one was already counted by an earlier failed verify.
    """
    limit = _goal_limit(checkpoint)
    if limit is not None and goal_steps_spent(checkpoint):
        raise _no_goal_step(checkpoint, limit)
    attempts = verify.attempts if verify is not None else 0
    change = verify.change if verify is not None else "<change>"
    if attempts == 0:
        raise ContractError(
            "verify-failed needs a recorded verify: no forge verify of the change was run",
            hint=f"forge verify --change {change}, then record its failure",
        )
    counted = checkpoint.failed_verify_attempt
    if counted is not None and attempts <= counted:
        last = f" ({verify.verdict})" if verify is not None and verify.verdict else ""
        raise ContractError(
            f"verify-failed needs a new verify: the last forge verify{last} was already "
            "counted by the previous verify-failed",
            context=[f"verify attempt {attempts} of the change"],
            hint=f"fix, then forge verify --change {change} again before recording its failure",
        )
    return max(pass_in_progress(checkpoint), 1), attempts


def _goal_limit(checkpoint: Checkpoint) -> int | None:
    return checkpoint.max_goal_steps if checkpoint.route == "goal" else None


def _no_goal_step(checkpoint: Checkpoint, limit: int) -> GoalStepsExhausted:
    return GoalStepsExhausted(
        "no goal step left: stop condition goal_steps_exhausted",
        context=[f"used {pass_in_progress(checkpoint)} of {limit} goal step(s) (max_goal_steps)"],
        hint="stop advancing: ask the owner, downgrade the scope, or stop and reflect",
    )
