"""The loop contract's records: goal, scope, rubric, fix budget, stages, the checkpoint.

Pure: a :class:`Checkpoint` is a frozen record; :mod:`._rules` holds the
functions that change it (each returns the next checkpoint or raises
:class:`ContractError` naming the rule it breaks).
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
CHECKPOINT_STAGE = re.compile(
    r"loop-start|discovery-complete|plan-complete|iteration-[1-9]\d*|verify-failed|ship-ready"
)
_RUBRIC = re.compile(r"\s*(?P<id>[A-Za-z][A-Za-z0-9_-]{0,15})\s*:\s*(?P<text>\S.*)")


class ContractError(UsageError):
    """A checkpoint update that the loop contract refuses (exit 2)."""


class BudgetExhausted(ForgeError):
    """Another fix iteration was asked for with none left: stop (exit 1)."""


class GoalStepsExhausted(ForgeError):
    """Another goal step was asked for on the Goal route with none left: stop (exit 1)."""


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

    stage: str = attrs.field(validator=attrs.validators.matches_re(CHECKPOINT_STAGE))
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
    # Every strategy change a failed verify recorded, oldest first: none may come back.
    tried_strategies: tuple[str, ...] = ()
    # The pass in progress (iteration-N is pass N; 0 before the first), the pass
    # whose verify failed last and the forge verify attempt that failure stood on.
    iteration: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    failed_iteration: int | None = None
    failed_verify_attempt: int | None = None
    blockers: tuple[str, ...] = ()
    residual_risks: tuple[str, ...] = ()
    stop_condition: str | None = None
    owner_decision: str | None = None
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
    clear_blockers: bool = False
    residual_risks: tuple[str, ...] = ()
    owner_decision: str | None = None
    decided: str | None = None


@attrs.frozen
class VerifyStanding:
    """The change's last ``forge verify``, and the tree it is compared with now.

    ``verdict``, ``commit`` and ``tree`` come from the verify breaker (None
    when the change was never verified) and ``attempts`` counts its verifies;
    ``current_commit`` and ``current_tree`` describe the working tree as it
    is when shipping (None when only a failed verify is being recorded).
    """

    change: str
    verdict: str | None
    commit: str | None
    tree: str | None
    current_commit: str | None
    current_tree: str | None
    attempts: int = 0


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
