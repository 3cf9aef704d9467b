"""The loop contract: goal, scope, rubric, fix budget, stages, and their rules.

Pure: a :class:`Checkpoint` is a frozen record and every change to it is a
function that either returns the next checkpoint or raises
:class:`ContractError` naming the rule it breaks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from .._errors import ForgeError, UsageError

STAGES = ("discover", "plan", "execute", "verify", "iterate", "ship")
# The stages' order: discover -> plan -> execute -> verify -> iterate/ship;
# an iteration goes back to execute (or straight to verify).
NEXT_STAGES = {
    "discover": {"plan"},
    "plan": {"execute"},
    "execute": {"verify"},
    "verify": {"iterate", "ship"},
    "iterate": {"execute", "verify"},
    "ship": set(),
}
STATUSES = ("pending", "pass", "fail", "blocked", "out-of-scope")
MODES = ("direct-downgraded", "structured", "loop")
NEXT_ACTIONS = ("ship", "iterate", "ask", "block", "downgrade")
DEPTHS = ("D0", "D1", "D2")
RISKS = ("low", "medium", "high")
# The checkpoint stages, and the memory checkpoints between them.
_STAGE = re.compile(
    r"loop-start|discovery-complete|plan-complete|iteration-[1-9]\d*|verify-failed|ship-ready"
)
STOP_CONDITIONS = ("pass", "blocked", "budget_exhausted", "owner_decision_required")
_RUBRIC = re.compile(r"\s*(?P<id>[A-Za-z][A-Za-z0-9_-]{0,15})\s*:\s*(?P<text>\S.*)")


class ContractError(UsageError):
    """A checkpoint update that the loop contract refuses (exit 2)."""


class BudgetExhausted(ForgeError):
    """Another fix iteration was asked for with none left: stop (exit 1)."""


@attrs.frozen
class RubricItem:
    id: str
    text: str
    status: str = attrs.field(default="pending", validator=attrs.validators.in_(STATUSES))
    evidence: str | None = None


@attrs.frozen
class Discovery:
    """What discovery found: its depth, the files and surface it touches, the risk."""

    depth: str = attrs.field(default="D0", validator=attrs.validators.in_(DEPTHS))
    files: tuple[str, ...] = ()
    impact_surface: tuple[str, ...] = ()
    risk: str = attrs.field(default="low", validator=attrs.validators.in_(RISKS))


@attrs.frozen
class Budget:
    max_fix_iterations: int = attrs.field(validator=attrs.validators.ge(1))
    used_fix_iterations: int = attrs.field(default=0, validator=attrs.validators.ge(0))

    @property
    def remaining_fix_iterations(self) -> int:
        return max(0, self.max_fix_iterations - self.used_fix_iterations)


@attrs.frozen
class Checkpoint:
    """``.forge/changes/<c>/checkpoint.json``: the contract and where the loop stands."""

    stage: str = attrs.field(validator=attrs.validators.matches_re(_STAGE))
    mode: str = attrs.field(validator=attrs.validators.in_(MODES))
    goal: str
    scope: tuple[str, ...]
    non_goals: tuple[str, ...]
    rubric: tuple[RubricItem, ...]
    budget: Budget
    current_stage: str = attrs.field(default="discover", validator=attrs.validators.in_(STAGES))
    discovery: Discovery | None = None
    current_task: str | None = None
    next_action: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.in_(NEXT_ACTIONS))
    )
    last_failure: str | None = None
    strategy_change: str | None = None
    blockers: tuple[str, ...] = ()
    residual_risks: tuple[str, ...] = ()
    stop_condition: str | None = None
    route: str | None = None
    autonomy_policy: str | None = None
    max_goal_steps: int | None = None
    plan: str | None = None
    updated_at: str | None = None


def parse_rubric(entries: Sequence[str]) -> tuple[RubricItem, ...]:
    """``"R1: tests pass"`` entries as rubric items; ids must be unique.

    Raises:
        ContractError: an entry without an id, or an id used twice.
    """
    items: list[RubricItem] = []
    for entry in entries:
        match = _RUBRIC.fullmatch(entry)
        if not match:
            raise ContractError(
                f"--rubric {entry!r}: expected 'ID: criterion'",
                hint='e.g. --rubric "R1: tests pass"',
            )
        if any(item.id == match["id"] for item in items):
            raise ContractError(f"--rubric: the id {match['id']!r} is used twice")
        items.append(RubricItem(id=match["id"], text=match["text"].strip()))
    if not items:
        raise ContractError("a loop contract needs a rubric", hint='--rubric "R1: tests pass"')
    return tuple(items)


def start(
    *,
    goal: str,
    scope: Sequence[str],
    non_goals: Sequence[str],
    rubric: Sequence[str],
    max_fix_iterations: int,
    mode: str = "loop",
    route: str | None = None,
    autonomy_policy: str | None = None,
    max_goal_steps: int | None = None,
    plan: str | None = None,
    now: str,
) -> Checkpoint:
    """The checkpoint of a loop that starts: stage ``loop-start``, current stage ``discover``."""
    if not goal.strip():
        raise ContractError("a loop contract needs a goal")
    if mode not in MODES:
        raise ContractError(
            f"--mode {mode!r}: the checkpoint schema's modes are {', '.join(MODES)}",
            hint="the Goal route is --route goal on a loop, never mode: goal",
        )
    if max_fix_iterations < 1:
        raise ContractError("--max-fix-iterations: expected an integer >= 1")
    if route not in (None, "goal"):
        raise ContractError(f"--route {route!r}: the only route is 'goal'")
    if route is None and (autonomy_policy is not None or max_goal_steps is not None):
        raise ContractError("--autonomy-policy and --max-goal-steps belong to --route goal")
    if max_goal_steps is not None and max_goal_steps < 1:
        raise ContractError("--max-goal-steps: expected an integer >= 1")
    return Checkpoint(
        stage="loop-start",
        mode=mode,
        goal=goal.strip(),
        scope=tuple(scope),
        non_goals=tuple(non_goals),
        rubric=parse_rubric(rubric),
        budget=Budget(max_fix_iterations=max_fix_iterations),
        current_stage="discover",
        route=route,
        autonomy_policy=autonomy_policy,
        max_goal_steps=max_goal_steps,
        plan=plan,
        updated_at=now,
    )


@attrs.frozen
class Update:
    """What ``forge checkpoint`` asks to change."""

    stage: str
    current_stage: str | None = None
    rubric: tuple[tuple[str, str, str | None], ...] = ()  # (id, status, evidence)
    failure: str | None = None
    strategy_change: str | None = None
    next_action: str | None = None
    current_task: str | None = None
    discovery: Discovery | None = None
    blockers: tuple[str, ...] = ()
    residual_risks: tuple[str, ...] = ()


def apply(checkpoint: Checkpoint, update: Update, *, now: str) -> Checkpoint:
    """The next checkpoint, or the rule the update breaks.

    Raises:
        ContractError: unknown rubric id or status, a stage out of order, a
            verify-failed without a new strategy, ship-ready with open items.
        BudgetExhausted: a verify-failed with no fix iteration left.
    """
    if not _STAGE.fullmatch(update.stage) or update.stage == "loop-start":
        raise ContractError(
            f"--stage {update.stage!r}: not a checkpoint stage",
            hint="discovery-complete, plan-complete, iteration-N, verify-failed or ship-ready "
            "(loop-start is forge loop start's)",
        )
    rubric = list(checkpoint.rubric)
    ids = [item.id for item in rubric]
    for item_id, status, evidence in update.rubric:
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
        kept = evidence if evidence is not None else rubric[index].evidence
        rubric[index] = attrs.evolve(rubric[index], status=status, evidence=kept)
    current = checkpoint.current_stage
    if update.current_stage is not None and update.current_stage != current:
        if update.current_stage not in STAGES:
            raise ContractError(
                f"--current-stage {update.current_stage!r}: unknown stage",
                hint=f"stages: {', '.join(STAGES)} (never 'goal')",
            )
        if update.current_stage not in NEXT_STAGES[current]:
            allowed = ", ".join(sorted(NEXT_STAGES[current])) or "none: the loop has shipped"
            raise ContractError(
                f"stage transition {current} -> {update.current_stage} is out of order",
                hint=f"from {current} the next stage is {allowed}",
            )
        current = update.current_stage
    if update.next_action is not None and update.next_action not in NEXT_ACTIONS:
        raise ContractError(
            f"--next-action {update.next_action!r}: unknown",
            hint=f"one of {', '.join(NEXT_ACTIONS)}",
        )
    budget = checkpoint.budget
    stop_condition = checkpoint.stop_condition
    if update.stage == "verify-failed":
        if budget.remaining_fix_iterations == 0:
            raise BudgetExhausted(
                "no fix iteration left: stop condition budget_exhausted",
                context=[
                    f"used {budget.used_fix_iterations} of {budget.max_fix_iterations} "
                    "fix iterations"
                ],
                hint="stop thrashing: ask the owner, downgrade the scope, or stop and reflect",
            )
        if not update.strategy_change:
            raise ContractError(
                "verify-failed needs --strategy-change: what is different in the next pass",
                hint="do not repeat the same failed strategy with the same evidence",
            )
        if update.strategy_change.strip() == (checkpoint.strategy_change or "").strip():
            raise ContractError(
                "the strategy change repeats the previous one",
                hint="change at least one variable: prompt, context, task split, strategy, ...",
            )
        budget = attrs.evolve(budget, used_fix_iterations=budget.used_fix_iterations + 1)
        if budget.remaining_fix_iterations == 0:
            stop_condition = "budget_exhausted"
    if update.stage == "verify-failed" and current not in ("verify", "iterate"):
        raise ContractError(
            f"verify-failed while the current stage is {current}: verify first",
            hint="--current-stage verify, then a failed verify is verify-failed",
        )
    if update.stage == "ship-ready" or current == "ship":
        open_items = [item.id for item in rubric if item.status not in ("pass", "out-of-scope")]
        if open_items:
            raise ContractError(
                "shipping needs every rubric item pass or out-of-scope; not yet: "
                + ", ".join(open_items),
            )
        if update.stage == "ship-ready":
            if current not in ("verify", "ship"):
                raise ContractError(
                    f"ship-ready from the {current} stage: verify first",
                    hint="ship follows a passing verify",
                )
            stop_condition, current = "pass", "ship"
    return attrs.evolve(
        checkpoint,
        stage=update.stage,
        current_stage=current,
        rubric=tuple(rubric),
        budget=budget,
        last_failure=update.failure if update.failure is not None else checkpoint.last_failure,
        strategy_change=update.strategy_change or checkpoint.strategy_change,
        next_action=update.next_action
        or ("ship" if current == "ship" else None)
        or ("iterate" if update.stage == "verify-failed" else None)
        or checkpoint.next_action,
        current_task=update.current_task or checkpoint.current_task,
        discovery=update.discovery or checkpoint.discovery,
        blockers=(*checkpoint.blockers, *update.blockers),
        residual_risks=(*checkpoint.residual_risks, *update.residual_risks),
        stop_condition=stop_condition,
        updated_at=now,
    )


def parse_rubric_update(text: str) -> tuple[str, str, str | None]:
    """``R1=pass:"evidence"`` (or ``R1=pass``) as (id, status, evidence).

    Raises:
        ContractError: when the text is not ``ID=STATUS[:EVIDENCE]``.
    """
    item_id, sep, rest = text.partition("=")
    if not sep or not item_id.strip() or not rest.strip():
        raise ContractError(f"--rubric {text!r}: expected ID=STATUS[:evidence]")
    status, _, raw_evidence = rest.partition(":")
    evidence = raw_evidence.strip().strip('"').strip() or None
    return item_id.strip(), status.strip(), evidence
