"""The loop contract's rules: every change to a checkpoint, and what it refuses.

Pure: each function returns the next :class:`Checkpoint` or raises
:class:`ContractError` (or :class:`BudgetExhausted`) naming the rule it breaks.
"""

from __future__ import annotations

import re

import attrs

from . import _passes as passes
from ._model import (
    CHECKPOINT_STAGE,
    NEXT_ACTIONS,
    NEXT_STAGES,
    STAGES,
    STATUSES,
    Budget,
    BudgetExhausted,
    Checkpoint,
    ContractError,
    RubricItem,
    Update,
    VerifyStanding,
)

# The next actions each stop condition leaves open; the first is the default.
# With no stop condition every next action is open.
ACTIONS_WHEN_STOPPED = {
    "pass": ("ship",),
    "owner_decision_required": ("ask", "block"),
    "blocked": ("block", "ask"),
    "budget_exhausted": ("ask", "downgrade", "block"),
    "goal_steps_exhausted": ("ask", "downgrade", "block"),
}
_NOT_A_WORD = re.compile(r"[\W_]+")


def same_strategy(a: str, b: str) -> bool:
    """Whether two strategy changes say the same thing, case, punctuation and spacing aside."""
    return _strategy_key(a) == _strategy_key(b)


def _strategy_key(text: str) -> str:
    return " ".join(_NOT_A_WORD.sub(" ", text.casefold()).split())


def apply(
    checkpoint: Checkpoint,
    update: Update,
    *,
    now: str,
    verify: VerifyStanding | None = None,
) -> Checkpoint:
    """The next checkpoint, or the rule the update breaks.

    ``verify`` is needed to ship and to record a failed verify: without it
    (or with a last verify that is not a PASS on the current tree)
    ``ship-ready`` is refused, and ``verify-failed`` needs a verify that no
    earlier failed verify counted.

    Raises:
        ContractError: unknown rubric id or status, a stage out of order, an
            iteration that is over or skips one, a verify-failed without a
            new verify or a new strategy, shipping with open items, missing
            evidence, no passing verify on this tree, or open blockers; a
            next action that contradicts the stop condition.
        BudgetExhausted: a verify-failed with no fix iteration left.
        GoalStepsExhausted: a pass, or a failed verify's fix, beyond the Goal
            route's ``max_goal_steps``.
    """
    if not CHECKPOINT_STAGE.fullmatch(update.stage) or update.stage == "loop-start":
        raise ContractError(
            f"--stage {update.stage!r}: not a checkpoint stage",
            hint="discovery-complete, plan-complete, iteration-N, verify-failed or ship-ready "
            "(loop-start is forge loop start's)",
        )
    rubric = _update_rubric(checkpoint.rubric, update.rubric)
    current = _move(checkpoint.current_stage, update.current_stage)
    if update.next_action is not None and update.next_action not in NEXT_ACTIONS:
        raise ContractError(
            f"--next-action {update.next_action!r}: unknown",
            hint=f"one of {', '.join(NEXT_ACTIONS)}",
        )
    blockers = _blockers(checkpoint, update)
    owner_decision = _owner_decision(checkpoint, update)
    passed = _after_verify(checkpoint, update, current, verify)
    current = _ship(checkpoint, update, current, rubric, blockers, owner_decision, verify)
    stop_condition = _stop_condition(current, owner_decision, blockers, passed)
    next_action = _next_action(checkpoint, update, current, stop_condition, blockers)
    iteration = passed.iteration
    if update.stage == "verify-failed" and stop_condition is None:
        iteration += 1  # the fix is the next pass; under a stop it waits for iteration-N
    return attrs.evolve(
        passed,
        stage=update.stage,
        current_stage=current,
        rubric=rubric,
        last_failure=update.failure if update.failure is not None else checkpoint.last_failure,
        strategy_change=update.strategy_change or checkpoint.strategy_change,
        iteration=iteration,
        next_action=next_action,
        current_task=update.current_task or checkpoint.current_task,
        discovery=update.discovery or checkpoint.discovery,
        blockers=blockers,
        residual_risks=(*checkpoint.residual_risks, *update.residual_risks),
        stop_condition=stop_condition,
        owner_decision=owner_decision,
        updated_at=now,
    )


def _after_verify(
    checkpoint: Checkpoint, update: Update, current: str, verify: VerifyStanding | None
) -> Checkpoint:
    """The checkpoint's passes, budget and tried strategies once the update is counted."""
    if update.stage.startswith("iteration-"):
        return attrs.evolve(checkpoint, iteration=passes.enter(checkpoint, update.stage))
    if update.stage != "verify-failed":
        return attrs.evolve(checkpoint, iteration=passes.pass_in_progress(checkpoint))
    budget = _budget_left(checkpoint.budget)
    if current not in ("verify", "iterate"):
        raise ContractError(
            f"verify-failed while the current stage is {current}: verify first",
            hint="--current-stage verify, then a failed verify is verify-failed",
        )
    failed, attempt = passes.fail(checkpoint, verify)
    tried = _new_strategy(_tried(checkpoint), update.strategy_change)
    return attrs.evolve(
        checkpoint,
        budget=attrs.evolve(budget, used_fix_iterations=budget.used_fix_iterations + 1),
        tried_strategies=tried,
        iteration=failed,
        failed_iteration=failed,
        failed_verify_attempt=attempt,
    )


def _ship(
    checkpoint: Checkpoint,
    update: Update,
    current: str,
    rubric: tuple[RubricItem, ...],
    blockers: tuple[str, ...],
    owner_decision: str | None,
    verify: VerifyStanding | None,
) -> str:
    """The current stage once shipping's checks are passed (``ship`` after ship-ready)."""
    if update.stage == "ship-ready" or current == "ship":
        open_items = [item.id for item in rubric if item.status not in ("pass", "out-of-scope")]
        if open_items:
            raise ContractError(
                "shipping needs every rubric item pass or out-of-scope; not yet: "
                + ", ".join(open_items),
            )
    shipping = update.stage == "ship-ready" or (
        current == "ship" and checkpoint.current_stage != "ship"
    )
    if update.stage == "ship-ready":
        if current not in ("verify", "ship"):
            raise ContractError(
                f"ship-ready from the {current} stage: verify first",
                hint="ship follows a passing verify",
            )
        current = "ship"
    if shipping:
        _may_ship(rubric, blockers, owner_decision, verify)
    return current


def block(checkpoint: Checkpoint, detail: str, *, now: str) -> Checkpoint:
    """The checkpoint once ``detail`` blocks the loop (a ``forge.blocked`` event).

    Raises:
        ContractError: an empty detail.
    """
    update = Update(stage=checkpoint.stage, blockers=(detail,))
    blockers = _blockers(checkpoint, update)
    stop_condition = _stop_condition(
        checkpoint.current_stage, checkpoint.owner_decision, blockers, checkpoint
    )
    return attrs.evolve(
        checkpoint,
        blockers=blockers,
        stop_condition=stop_condition,
        next_action=_next_action(
            checkpoint, update, checkpoint.current_stage, stop_condition, blockers
        ),
        updated_at=now,
    )


def next_action_of(checkpoint: Checkpoint) -> str | None:
    """The next action the checkpoint stands for, never one its stop condition rules out.

    A checkpoint written by an older Forge may say ``iterate`` beside
    ``budget_exhausted``: the stop condition wins.
    """
    allowed = ACTIONS_WHEN_STOPPED.get(checkpoint.stop_condition or "")
    if allowed is None or checkpoint.next_action in allowed:
        return checkpoint.next_action
    return allowed[0]


def _update_rubric(
    rubric: tuple[RubricItem, ...], updates: tuple[tuple[str, str, str | None], ...]
) -> tuple[RubricItem, ...]:
    items = list(rubric)
    ids = [item.id for item in items]
    for item_id, status, evidence in updates:
        if item_id not in ids:
            raise ContractError(
                f"--rubric {item_id}: no such rubric item", hint=f"known: {', '.join(ids)}"
            )
        if status not in STATUSES:
            raise ContractError(
                f"--rubric {item_id}={status}: unknown status",
                hint=f"a status is one of {', '.join(STATUSES)}",
            )
        index = ids.index(item_id)
        kept = evidence if evidence is not None else items[index].evidence
        items[index] = attrs.evolve(items[index], status=status, evidence=kept)
    return tuple(items)


def _move(current: str, wanted: str | None) -> str:
    if wanted is None or wanted == current:
        return current
    if wanted not in STAGES:
        raise ContractError(
            f"--current-stage {wanted!r}: unknown stage",
            hint=f"stages: {', '.join(STAGES)} (never 'goal')",
        )
    if wanted not in NEXT_STAGES[current]:
        allowed = ", ".join(sorted(NEXT_STAGES[current])) or "none: the loop has shipped"
        raise ContractError(
            f"stage transition {current} -> {wanted} is out of order",
            hint=f"from {current} the next stage is {allowed}",
        )
    return wanted


def _blockers(checkpoint: Checkpoint, update: Update) -> tuple[str, ...]:
    blockers = () if update.clear_blockers else checkpoint.blockers
    for blocker in update.blockers:
        text = " ".join(blocker.split())
        if not text:
            raise ContractError("a blocker needs a text: what blocks the loop")
        if text not in blockers:
            blockers = (*blockers, text)
    return blockers


def _owner_decision(checkpoint: Checkpoint, update: Update) -> str | None:
    decision = checkpoint.owner_decision
    if update.decided is not None:
        if decision is None:
            raise ContractError("--decided: no owner decision is pending")
        if not update.decided.strip():
            raise ContractError("--decided needs the decision that was made")
        decision = None
    if update.owner_decision is not None:
        if not update.owner_decision.strip():
            raise ContractError("--owner-decision needs the decision the owner must make")
        if decision is not None:
            raise ContractError(
                f"an owner decision is already pending: {decision}",
                hint="record it with --decided TEXT first; one decision at a time",
            )
        decision = " ".join(update.owner_decision.split())
    return decision


def _tried(checkpoint: Checkpoint) -> tuple[str, ...]:
    if checkpoint.tried_strategies or checkpoint.strategy_change is None:
        return checkpoint.tried_strategies
    return (checkpoint.strategy_change,)  # a checkpoint from before the list was kept


def _budget_left(budget: Budget) -> Budget:
    if budget.remaining_fix_iterations == 0:
        raise BudgetExhausted(
            "no fix iteration left: stop condition budget_exhausted",
            context=[
                f"used {budget.used_fix_iterations} of {budget.max_fix_iterations} fix iterations"
            ],
            hint="stop thrashing: ask the owner, downgrade the scope, or stop and reflect",
        )
    return budget


def _new_strategy(tried: tuple[str, ...], strategy_change: str | None) -> tuple[str, ...]:
    if not strategy_change or not _strategy_key(strategy_change):
        raise ContractError(
            "verify-failed needs --strategy-change: what is different in the next pass",
            hint="do not repeat the same failed strategy with the same evidence",
        )
    for earlier in tried:
        if same_strategy(earlier, strategy_change):
            raise ContractError(
                f"the strategy change {strategy_change!r} repeats an earlier failed one "
                f"({earlier!r})",
                context=[f"failed strategies so far: {'; '.join(tried)}"],
                hint="change at least one variable: prompt, context, task split, strategy, ...",
            )
    return (*tried, strategy_change.strip())


def _may_ship(
    rubric: tuple[RubricItem, ...],
    blockers: tuple[str, ...],
    owner_decision: str | None,
    verify: VerifyStanding | None,
) -> None:
    """Refuse shipping with everything that is missing, in one message."""
    missing: list[str] = []
    without = [item.id for item in rubric if not item.evidence]
    if without:
        missing.append(f"evidence for {', '.join(without)}")
    if verify is None or verify.verdict is None:
        missing.append("a forge verify of the change (none recorded)")
    elif verify.verdict != "PASS":
        missing.append(f"a passing verify (the last one was {verify.verdict})")
    elif verify.current_tree is None:
        missing.append("a verified tree (the working tree has no fingerprint outside git)")
    elif verify.tree != verify.current_tree:
        at = f" at commit {verify.commit[:12]}" if verify.commit else ""
        missing.append(f"a passing verify of the current tree (the last PASS{at} saw another)")
    if blockers:
        missing.append(f"no open blocker (blocked: {'; '.join(blockers)})")
    if owner_decision is not None:
        missing.append(f"the owner's decision ({owner_decision})")
    if not missing:
        return
    hints = []
    if without:
        hints.append(f'--rubric {without[0]}=pass:"<command, reviewer or file:line>"')
    if (
        verify is not None
        and verify.current_tree is not None
        and any("verify" in what for what in missing)
    ):
        hints.append(f"forge verify --change {verify.change}")
    if blockers:
        hints.append("--clear-blockers once they are resolved")
    if owner_decision is not None:
        hints.append('--decided "<the decision>"')
    raise ContractError(
        "ship-ready refused; missing: " + "; ".join(missing),
        hint=", then ".join(hints) or None,
    )


def _stop_condition(
    current: str, owner_decision: str | None, blockers: tuple[str, ...], checkpoint: Checkpoint
) -> str | None:
    """The stop condition, the first that holds in the order of their table."""
    if current == "ship":
        return "pass"
    if owner_decision is not None:
        return "owner_decision_required"
    if blockers:
        return "blocked"
    if checkpoint.budget.remaining_fix_iterations == 0:
        return "budget_exhausted"
    if passes.goal_steps_spent(checkpoint):
        return "goal_steps_exhausted"
    return None


def _next_action(
    checkpoint: Checkpoint,
    update: Update,
    current: str,
    stop_condition: str | None,
    blockers: tuple[str, ...],
) -> str | None:
    if update.next_action == "block" and not blockers:
        raise ContractError(
            "--next-action block needs a blocker",
            hint='--blocker "<what blocks the loop>"',
        )
    allowed = ACTIONS_WHEN_STOPPED.get(stop_condition or "")
    if update.next_action is not None:
        if allowed is not None and update.next_action not in allowed:
            raise ContractError(
                f"--next-action {update.next_action} contradicts the stop condition "
                f"{stop_condition}",
                hint=f"with {stop_condition} the next action is {' or '.join(allowed)}",
            )
        return update.next_action
    if allowed is not None:
        if stop_condition == "blocked" and update.blockers:
            return "block"
        return checkpoint.next_action if checkpoint.next_action in allowed else allowed[0]
    if update.stage == "verify-failed":
        return "iterate"
    if checkpoint.stop_condition is not None and checkpoint.next_action in ("ask", "block"):
        return None  # the stop it answered is over: the loop says what comes next
    return checkpoint.next_action
