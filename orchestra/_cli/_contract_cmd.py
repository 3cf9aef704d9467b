"""The loop contract's commands: ``loop start``, ``checkpoint``, ``event``, ``resume``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._contract import (
    DEPTHS,
    EVENTS,
    RISKS,
    Checkpoint,
    ContractError,
    Discovery,
    Update,
    VerifyStanding,
    add_trace,
    apply,
    block,
    iteration_prompt,
    load_checkpoint,
    next_action_of,
    parse_rubric_update,
    pass_begun,
    record,
    render,
    save_checkpoint,
    start,
)
from .._errors import EXIT_OK, StateError, UsageError
from .._state import (
    BLOCKED,
    CHECKPOINT,
    CONTRACT_PREFIX,
    ITERATION_BEGUN,
    LOOP_STARTED,
    SHIP_READY,
    STRATEGY_CHANGED,
    ChangePaths,
    exclusive_lock,
    read_timeline,
    require_change,
    utc_now_iso,
)
from .._workspace import Project, tree_state
from ._common import policy_from, project_from
from ._console import Output


def loop_start(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    paths = ChangePaths(project.root, args.change)
    default_budget = policy_from(project, args=args).policy.contract.max_fix_iterations
    if not args.restart:
        with exclusive_lock(paths.lock):
            existing = load_checkpoint(paths)
        if existing is not None:
            budget = existing.budget
            raise ContractError(
                f'change "{paths.name}" already has a loop contract ({existing.stage}, '
                f"{budget.used_fix_iterations}/{budget.max_fix_iterations} fix iterations used)",
                hint="resume it (forge resume), or start afresh on purpose with --restart",
            )
    now = utc_now_iso()
    plan = _plan_path(project, args.plan)
    checkpoint = start(
        goal=args.goal,
        scope=args.scope or [],
        non_goals=args.non_goal or [],
        rubric=args.rubric or [],
        max_fix_iterations=(
            default_budget if args.max_fix_iterations is None else args.max_fix_iterations
        ),
        mode=args.mode,
        route=args.route,
        autonomy_policy=args.autonomy_policy,
        max_goal_steps=args.max_goal_steps,
        plan=str(plan.relative_to(project.root)) if plan else None,
        now=now,
    )
    with exclusive_lock(paths.lock):
        save_checkpoint(paths, checkpoint)
    record(
        paths,
        LOOP_STARTED,
        {
            "goal": checkpoint.goal,
            "mode": checkpoint.mode,
            "current_stage": checkpoint.current_stage,
        },
    )
    summary = f"loop started: {checkpoint.goal} ({len(checkpoint.rubric)} rubric item(s))"
    _trace(project, checkpoint, now, "loop-start", summary, out)
    out.line(f'Loop: started on change "{paths.name}" — {checkpoint.goal}')
    out.line(f"  rubric: {', '.join(item.id for item in checkpoint.rubric)}")
    out.line(
        f"  budget: {checkpoint.budget.max_fix_iterations} fix iteration(s); "
        f"stage: {checkpoint.current_stage}"
    )
    if out.json_mode:
        out.document(_as_json(checkpoint))
    return EXIT_OK


# Set by Forge in a sandboxed executor's environment (see orchestra._sandbox).
_SANDBOX_ENV = "FORGE_SANDBOX"


@contextlib.contextmanager
def _state_writes(command: str) -> Iterator[None]:
    """Inside Forge's sandbox the change's state is read-only: say so, not only the errno."""
    try:
        yield
    except StateError as exc:
        if not os.environ.get(_SANDBOX_ENV):
            raise
        raise StateError(
            f"{command} cannot write the change's state from inside Forge's sandbox "
            f"({exc.message})",
            hint=(
                "while an iteration runs, .forge/ is Forge's to write; run it after the "
                'iteration, or run the loop with [sandbox] mode = "off"'
            ),
        ) from exc


def _queued(command: str, args: argparse.Namespace, out: Output) -> bool:
    """Inside its loop's executor, leave the command in the change's inbox for the loop to run.

    The agent writes none of Forge's state, sandboxed or not: the loop runs
    the request once the iteration has ended and its check is done. True
    when it was queued; False outside any executor (``args.inside`` is set by
    the command line's check, see :mod:`orchestra._inside`).
    """
    words = list(getattr(args, "command_line", ()))
    if getattr(args, "inside", None) is None or words[:1] != [command]:
        return False
    from ._unrecorded import leave_in_inbox

    leave_in_inbox(project_from(args).root, args.change, words)
    out.line(
        f'{command.capitalize()}: queued for change "{args.change}" — inside its loop the '
        "agent writes none of Forge's state; the loop records it when the iteration ends"
    )
    return True


def checkpoint(args: argparse.Namespace, out: Output) -> int:
    if _queued("checkpoint", args, out):
        return EXIT_OK
    with _state_writes("forge checkpoint"):
        return _checkpoint(args, out)


def _checkpoint(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    paths = require_change(ChangePaths(project.root, args.change), "forge checkpoint")
    update = _update_of(args)
    # Only shipping and a failed verify need the verify standing (shipping, its git status).
    verify = None
    if _ships(update) or update.stage == "verify-failed":
        verify = _verify_standing(project, paths, with_tree=_ships(update))
    now = utc_now_iso()
    with exclusive_lock(paths.lock):
        before = _require(paths)
        after = apply(before, update, now=now, verify=verify)
        save_checkpoint(paths, after)
    began = _record_checkpoint(paths, before, after, update)
    summary = _summary(before, after, update)
    _trace(project, after, now, after.stage, summary, out)
    out.line(f'Checkpoint: {after.stage} on change "{paths.name}" — {summary}')
    budget = after.budget
    out.line(
        f"  budget: {budget.used_fix_iterations}/{budget.max_fix_iterations} fix iteration(s) used"
    )
    if after.route == "goal" and after.max_goal_steps is not None:
        out.line(f"  goal steps: {after.iteration}/{after.max_goal_steps} used")
    if began is not None and update.stage == "verify-failed":
        out.line(
            f"  next pass: iteration-{began}; its prompt, from the failed rubric items: "
            f"forge resume --change {paths.name}"
        )
    _say_stop(after, out)
    if out.json_mode:
        out.document(_as_json(after))
    return EXIT_OK


def _update_of(args: argparse.Namespace) -> Update:
    return Update(
        stage=args.stage,
        current_stage=args.current_stage,
        rubric=tuple(parse_rubric_update(text) for text in args.rubric or []),
        failure=args.failure,
        strategy_change=args.strategy_change,
        next_action=args.next_action,
        current_task=args.current_task,
        discovery=_discovery(args),
        blockers=tuple(args.blocker or []),
        clear_blockers=args.clear_blockers,
        residual_risks=tuple(args.residual_risk or []),
        owner_decision=args.owner_decision,
        decided=args.decided,
    )


def _record_checkpoint(
    paths: ChangePaths, before: Checkpoint, after: Checkpoint, update: Update
) -> int | None:
    """The checkpoint's events in the timeline; returns the pass it began, if any."""
    fields: dict[str, Any] = {
        "stage": after.stage,
        "current_stage": after.current_stage,
        "next_action": after.next_action,
    }
    if after.stop_condition:
        fields["stop_condition"] = after.stop_condition
    if update.owner_decision is not None:
        fields["owner_decision"] = after.owner_decision
    if update.decided is not None:
        fields["decided"] = update.decided.strip()
        fields["decision"] = before.owner_decision
    if update.clear_blockers and before.blockers:
        fields["cleared_blockers"] = list(before.blockers)
    record(paths, CHECKPOINT, fields)
    # A blocker in the checkpoint is a forge.blocked event in the timeline, and
    # forge event forge.blocked is a blocker in the checkpoint: never one alone.
    kept = () if update.clear_blockers else before.blockers
    for blocker in after.blockers:
        if blocker not in kept:
            record(paths, BLOCKED, {"detail": blocker})
    if _iterates(update) and update.strategy_change:
        record(
            paths,
            STRATEGY_CHANGED,
            {"strategy_change": after.strategy_change, "failure": after.last_failure},
        )
    began = pass_begun(before, after)
    if began is not None:  # once a pass: the iteration-N checkpoints after it report on it
        record(paths, ITERATION_BEGUN, {"stage": after.stage, "iteration": began})
    if update.stage == "ship-ready":
        record(paths, SHIP_READY, {"goal": after.goal})
    return began


def _iterates(update: Update) -> bool:
    return update.stage == "verify-failed" or update.stage.startswith("iteration-")


def _summary(before: Checkpoint, after: Checkpoint, update: Update) -> str:
    """The checkpoint in one line: for the Loop Trace and the command's output."""
    moved = f"{before.current_stage} -> {after.current_stage}"
    if before.current_stage == after.current_stage:
        moved = after.current_stage
    parts = [f"{moved}; next: {after.next_action or '-'}"]
    if _iterates(update) and after.last_failure:
        parts.append(f"failure: {after.last_failure}")
    if _iterates(update) and update.strategy_change:
        parts.append(f"strategy: {update.strategy_change}")
    if update.stage == "ship-ready":
        parts.append(f"residual risks: {'; '.join(after.residual_risks) or 'none'}")
    if after.stop_condition:
        parts.append(f"stop: {after.stop_condition}")
    if update.owner_decision is not None:
        parts.append(f"owner decision: {after.owner_decision}")
    if update.decided is not None:
        parts.append(f"decided: {' '.join(update.decided.split())}")
    return "; ".join(parts)


def event(args: argparse.Namespace, out: Output) -> int:
    if args.name not in EVENTS:
        raise UsageError(f"unknown event {args.name!r}", hint=f"events: {', '.join(EVENTS)}")
    if _queued("event", args, out):
        return EXIT_OK
    with _state_writes("forge event"):
        return _event(args, out)


def _event(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    paths = require_change(ChangePaths(project.root, args.change), "forge event")
    if args.name not in EVENTS:
        raise UsageError(f"unknown event {args.name!r}", hint=f"events: {', '.join(EVENTS)}")
    fields: dict[str, Any] = {"detail": args.detail} if args.detail else {}
    if args.name == BLOCKED and not (args.detail or "").strip():
        raise UsageError(
            "forge.blocked needs --detail: what blocks the loop",
            hint=f'forge event --change {paths.name} forge.blocked --detail "needs the tax table"',
        )
    if args.name == SHIP_READY:
        # Shipping is a checkpoint with its checks: the event alone would say
        # ship-ready of a loop that is not.
        raise UsageError(
            "forge.ship.ready is recorded by forge checkpoint --stage ship-ready",
            hint="which checks the rubric, its evidence and the last verify first",
        )
    blocked = None
    with exclusive_lock(paths.lock):
        current = load_checkpoint(paths)
        if args.name == BLOCKED and current is not None:
            blocked = block(current, args.detail, now=utc_now_iso())
            save_checkpoint(paths, blocked)
    record(paths, args.name, fields)
    out.line(f'Event: {args.name} recorded for change "{paths.name}"')
    if blocked is not None:
        out.line(
            f"  blockers: {'; '.join(blocked.blockers)}; "
            f"stop: {blocked.stop_condition}; next action: {blocked.next_action or '-'}"
        )
    if out.json_mode:
        out.document({"change": paths.name, "event": args.name, **fields})
    return EXIT_OK


def resume(args: argparse.Namespace, out: Output) -> int:
    if getattr(args, "paused", None) is not None:
        # forge resume CHANGE: a person lets a paused loop go on (a control).
        from ._pause_cmd import resume as resume_paused

        return resume_paused(args, out)
    project = project_from(args)
    paths = require_change(ChangePaths(project.root, args.change), "forge resume")
    with exclusive_lock(paths.lock):
        current = _require(paths)
    if args.events < 0:
        raise UsageError("--events: expected 0 or more")
    events = [
        e
        for e in read_timeline(paths.timeline).events
        if str(e.get("event")).startswith(CONTRACT_PREFIX)
    ]
    last = events[-args.events :] if args.events else []
    prompt = iteration_prompt(current, paths.name)
    if out.json_mode:
        out.document(
            {
                "change": paths.name,
                "checkpoint": _as_json(current),
                "next_action": next_action_of(current),
                "next_prompt": prompt,
                "last_events": last,
            }
        )
        return EXIT_OK
    _say_contract(paths.name, current, out)
    out.line(f"  next action: {next_action_of(current) or '-'}")
    if prompt is not None:
        out.line("  next prompt:")
        for line in prompt.splitlines():
            out.line(f"    {line}")
    if last:
        out.line("  last events:")
        for recorded in last:
            out.line(
                f"    {recorded.get('ts')}  {recorded.get('event')}  {_detail(recorded)}".rstrip()
            )
    return EXIT_OK


def _say_contract(change: str, current: Checkpoint, out: Output) -> None:
    """The contract as forge resume shows it, down to the stop condition."""
    out.line(f'Resume: change "{change}" — {current.goal}')
    where = f"current stage {current.current_stage}, mode {current.mode}"
    out.line(f"  stage:       {current.stage} ({where})")
    if current.route:
        limit = f"/{current.max_goal_steps}" if current.max_goal_steps else ""
        out.line(f"  route:       {current.route}, {current.iteration}{limit} goal step(s) used")
    out.line("  rubric:")
    for item in current.rubric:
        evidence = f" — {item.evidence}" if item.evidence else ""
        out.line(f"    [{item.status}] {item.id}: {item.text}{evidence}")
    budget = current.budget
    out.line(
        f"  budget:      {budget.used_fix_iterations}/{budget.max_fix_iterations} fix iteration(s) "
        f"used, {budget.remaining_fix_iterations} left"
    )
    out.line(f"  blockers:    {'; '.join(current.blockers) or 'none'}")
    if current.owner_decision:
        out.line(f"  owner decision: {current.owner_decision}")
    if current.last_failure:
        out.line(f"  last failure: {current.last_failure}")
    if current.stop_condition:
        out.line(
            f"  stop:        {current.stop_condition}{_STOP_NOTES.get(current.stop_condition, '')}"
        )


def _detail(recorded: dict[str, Any]) -> str:
    if recorded.get("event") == ITERATION_BEGUN and recorded.get("iteration"):
        return f"iteration-{recorded['iteration']} (at {recorded.get('stage')})"
    return str(recorded.get("detail") or recorded.get("stage") or recorded.get("goal") or "")


_STOP_NOTES = {
    "pass": " — every rubric item passed, with evidence and a passing verify",
    "blocked": " — resolve the blockers, or ask the owner with the options",
    "budget_exhausted": (
        " — no fix iteration left: ask the owner, downgrade the scope, or stop and reflect"
    ),
    "owner_decision_required": " — ask the owner this one decision before going on",
    "goal_steps_exhausted": (
        " — no goal step left: ask the owner, downgrade the scope, or stop and reflect"
    ),
}


def _say_stop(checkpoint: Checkpoint, out: Output) -> None:
    if checkpoint.stop_condition in (None, "pass"):
        return
    what = {
        "blocked": f"blocked: {'; '.join(checkpoint.blockers)}",
        "budget_exhausted": "no fix iteration left",
        "owner_decision_required": f"the owner decides: {checkpoint.owner_decision}",
        "goal_steps_exhausted": f"no goal step left ({checkpoint.max_goal_steps} used)",
    }.get(checkpoint.stop_condition or "", "")
    out.line(f"  stop condition: {checkpoint.stop_condition} — {what}", style="red")


def _ships(update: Update) -> bool:
    return update.stage == "ship-ready" or update.current_stage == "ship"


def _verify_standing(project: Project, paths: ChangePaths, *, with_tree: bool) -> VerifyStanding:
    # Here, not at the top: only shipping and a failed verify read the breaker.
    from .._verify import read_breaker

    last = read_breaker(paths).after
    now = tree_state(project.root) if with_tree else None
    return VerifyStanding(
        change=paths.name,
        verdict=last.last_verdict,
        commit=last.last_commit,
        tree=last.last_tree,
        current_commit=now.commit if now else None,
        current_tree=now.fingerprint if now else None,
        attempts=last.total_attempts,
    )


def _discovery(args: argparse.Namespace) -> Discovery | None:
    if args.discovery_depth is None and not args.discovery_file and not args.impact:
        if args.risk is not None:
            raise UsageError("--risk belongs to a discovery: give --discovery-depth too")
        return None
    if args.discovery_depth not in DEPTHS:
        raise ContractError(f"--discovery-depth: expected one of {', '.join(DEPTHS)}")
    if args.risk is not None and args.risk not in RISKS:
        raise ContractError(f"--risk: expected one of {', '.join(RISKS)}")
    return Discovery(
        depth=args.discovery_depth,
        files=tuple(args.discovery_file or []),
        impact_surface=tuple(args.impact or []),
        risk=args.risk or "low",
    )


def _require(paths: ChangePaths) -> Checkpoint:
    found = load_checkpoint(paths)
    if found is None:
        raise ContractError(
            f'no loop contract for change "{paths.name}"',
            hint=f'forge loop start --change {paths.name} --goal "..." --rubric "R1: ..."',
        )
    return found


def _plan_path(project: Project, plan: str | None) -> Path | None:
    if plan is None:
        return None
    path = (Path.cwd() / plan).resolve()
    if not path.is_relative_to(project.root):
        raise UsageError(f"--plan {plan}: the plan file must be inside the project")
    return path


def _trace(
    project: Project, checkpoint: Checkpoint, now: str, stage: str, summary: str, out: Output
) -> None:
    if checkpoint.plan is None:
        return
    problem = add_trace(project.root / checkpoint.plan, f"- {now} — {stage} — {summary}")
    if problem:
        out.note(problem)


def _as_json(checkpoint: Checkpoint) -> Any:
    return json.loads(render(checkpoint))
