"""``forge land [CHANGE…]``: the latest batch's finished changes onto the base, each verified."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from .._errors import EXIT_ESCALATE, EXIT_INTERRUPTED, EXIT_OK, UsageError
from .._fleet import fleet_meant
from .._land import (
    LandSettings,
    batch_changes,
    checked_out_branch,
    checked_out_elsewhere,
    finish_pending,
    has_landed,
    head_of,
    land_all,
    land_run,
    order_changes,
    read_pending,
    require_repository,
    tracked_changes,
)
from .._state import STATE_DIR, ChangePaths, read_timeline
from ._common import policy_from, project_from
from ._console import Output
from ._trio_run import run_interruptible

if TYPE_CHECKING:
    from .._land import LandOutcome
    from .._policy import LandPolicy, LoadedPolicy, VerifyPolicy
    from .._workspace import Project
    from ._land_fleet import FleetLand


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    root = project.root
    require_repository(root)
    land_policy = policy_from(project, args=args).policy.land
    if args.status:
        return _pr_status(root, args, out)  # reads only: an interrupted landing waits
    if args.dry_run:
        return _run(project, land_policy, args, out)
    with land_run(root):
        return _run(project, land_policy, args, out)


def _run(project: Project, land_policy: LandPolicy, args: argparse.Namespace, out: Output) -> int:
    root = project.root
    if not args.dry_run:
        # A run killed while it moved the base left a journal: finish that first.
        finish_pending(root, out.line)
    elif (pending := read_pending(root)) is not None:
        out.line(f"land: {pending.change} — an interrupted landing; forge land finishes it")
    fleet_wanted = fleet_meant(args.fleet)
    if args.pr or land_policy.mode == "pr":
        if fleet_wanted:
            from ._land_fleet import refuse_pull_requests

            refuse_pull_requests()
        if args.rework:
            raise UsageError(
                "--rework does not apply to pull requests: the remote's checks decide there",
                hint="forge land --rework lands onto the local base",
            )
        return _land_prs(root, args, out, land_policy)
    # A fleet batch's changes are reworked on the fleet (forge fleet requeue), not here.
    rework = (args.rework or land_policy.rework) and not fleet_wanted
    mode = "merge" if args.merge else "squash" if args.squash else "rebase"
    if args.merge and args.squash:
        raise UsageError("--merge and --squash exclude each other", hint="pick one mode")
    checked = checked_out_branch(root)
    base = args.base or land_policy.base or checked
    if not base:
        raise UsageError(
            "no base: the main working tree has no branch checked out",
            hint="forge land --base main",
        )
    if head_of(root, base) is None:
        raise UsageError(f"--base {base}: no such branch", hint="git branch lists them")
    elsewhere = checked_out_elsewhere(root, base)
    if elsewhere is not None:
        # Moving it would leave that tree's files behind its branch.
        raise UsageError(
            f"--base {base} is checked out in another worktree ({elsewhere})",
            hint="land onto the branch of the main working tree, or switch that worktree away",
        )
    named = list(args.changes or [])
    fleet = _fleet_batch(project, args, out, named) if fleet_wanted else None
    batch = fleet.batch if fleet else [] if named else _latest_batch(root)
    candidates = {name for name, _ in batch} | set(named)
    order = [c.strip() for c in (args.order or "").split(",") if c.strip()]
    would_fetch = fleet.fetchable if fleet else set()
    plan = order_changes(
        batch,
        named=named,
        order=order,
        has_branch={
            c: c in would_fetch or head_of(root, f"forge/{c}") is not None for c in candidates
        },
        landed={
            c: (fleet is not None and c in fleet.landed)
            or has_landed(read_timeline(ChangePaths(root, c).timeline).events)
            for c in candidates
        },
    )
    if fleet:
        plan = attrs.evolve(plan, skipped=fleet.all_skipped(plan.skipped))
    on_base = checked == base
    if on_base and not args.dry_run:
        dirty = tracked_changes(root)
        if dirty:
            raise UsageError(
                f"the working tree has {base} checked out with uncommitted changes "
                f"({', '.join(dirty[:5])}): landing would move it under them",
                hint="commit or stash them, then forge land again",
            )
    for change, why in plan.skipped:
        out.line(f"land: {change} — skipped: {why}", style="dim")
    if args.dry_run:
        after = "; a conflict or FAIL goes back to its loop" if rework else ""
        for position, change in enumerate(plan.changes, start=1):
            out.line(f"plan {position}: {change} — {mode} onto {base}, then verify{after}")
        out.line(f"land: would land {len(plan.changes)} change(s) onto {base} (dry run)")
        if out.json_mode:
            out.document(
                {"dry_run": True, "base": base, "mode": mode, "changes": list(plan.changes)}
            )
        return EXIT_OK
    loaded = policy_from(project, args=args)
    settings = LandSettings(base=base, mode=mode, keep=args.keep, checked_out=on_base)
    grace = loaded.policy.run.grace.seconds

    async def verify(change: str, folder: Path) -> tuple[bool, list[str]]:
        from .._verify import run_verify

        report = await run_verify(folder, _verify_policy(loaded, root, change, fleet), grace)
        return report.passed, report.failing()

    outcomes = run_interruptible(land_all, root, plan.changes, settings, verify, out.line)
    if fleet:
        fleet.journal(project, out)  # the fleet's report shows what landed
    landed = sum(1 for o in outcomes if o.result == "landed")
    held = len(outcomes) - landed
    out.line(
        f"land: {landed} landed, {held} not landed of {len(outcomes)} onto {base}"
        + ("" if not held or rework else " — escalate: see the lines above")
    )
    reworked = None
    if rework and held:
        reworked = _rework(
            project, loaded, base, [o for o in outcomes if o.result != "landed"], out
        )
    if out.json_mode:
        out.document(
            {
                "base": base,
                "mode": mode,
                "landed": landed,
                "not_landed": held,
                "changes": [o.as_json() for o in outcomes],
                "skipped": [{"change": c, "why": w} for c, w in plan.skipped],
                **({"rework": reworked} if reworked is not None else {}),
            }
        )
    if reworked is not None and reworked.get("interrupted"):
        return EXIT_INTERRUPTED  # Ctrl-C stopped the rework's loops: their state is written
    return EXIT_ESCALATE if held else EXIT_OK


def _rework(
    project: Project, loaded: LoadedPolicy, base: str, held: list[LandOutcome], out: Output
) -> dict[str, object]:
    """Hand the changes that did not land back to their loops, and run those loops.

    Each goes back only when a ``[[loop]]`` in a worktree declares it and its
    circuit is closed; the loops run as one ``forge supervise`` batch (same
    gates, one rate limit), whose ``done`` ones the next ``forge land`` takes.
    """
    from .._land import prepare_rework, rework_refusal
    from .._supervise import resolve_loops
    from ._supervise_cmd import batch_of, supervise_batch

    root = project.root
    setups = {setup.change: setup for setup in resolve_loops(loaded, root)}
    taken = []
    refused: list[dict[str, str]] = []
    for outcome in held:
        setup = setups.get(outcome.change)
        if setup is None:
            why: str | None = "no [[loop]] in forge.toml declares it"
        elif not setup.worktree:
            why = "its loop does not work in a worktree"
        else:
            why = rework_refusal(ChangePaths(root, outcome.change))
        if setup is None or why is not None:
            out.line(f"land: {outcome.change} — not reworked: {why}")
            refused.append({"change": outcome.change, "why": str(why)})
        else:
            taken.append((outcome, setup))
    if not taken:
        out.line("land: nothing handed back — escalate: see the lines above")
        return {"run_id": None, "loops": [], "refused": refused, "interrupted": False}
    batch = batch_of(project, loaded.policy, [setup for _, setup in taken], out)
    briefs = {}
    for outcome, _ in taken:
        given = prepare_rework(root, outcome, base, batch.run_id)
        conflicts = f", conflicts marked in {', '.join(given.files)}" if given.files else ""
        out.line(
            f"land: {given.change} — handed back to its loop: {base} ({given.commit[:7]}) "
            f"merged into forge/{given.change}{conflicts}"
        )
        briefs[given.change] = given.brief
    runs = [
        attrs.evolve(run, plan=attrs.evolve(run.plan, brief=briefs[run.setup.change]))
        for run in batch.runs
    ]
    code = supervise_batch(attrs.evolve(batch, runs=runs), out, document=False)
    endings = _endings(root / STATE_DIR / "runs" / batch.run_id / "summary.json")
    for change in briefs:
        ending = endings.get(change) or "without an ending"
        then = "the next forge land lands it" if ending == "done" else "a person looks"
        out.line(f"land: {change} — its rework ended {ending}: {then}")
    done = sum(1 for change in briefs if endings.get(change) == "done")
    out.line(
        f"land: {done} of {len(briefs)} handed back ended done"
        + (
            " — forge land lands them"
            if done == len(briefs) and not refused
            else " — escalate: see the lines above"
        )
    )
    loops = [{"change": change, "reason": endings.get(change)} for change in briefs]
    interrupted = code == EXIT_INTERRUPTED
    return {"run_id": batch.run_id, "loops": loops, "refused": refused, "interrupted": interrupted}


def _endings(summary: Path) -> dict[str, str | None]:
    """Each loop's ending in a batch's ``summary.json`` (empty when it cannot be read)."""
    try:
        data = json.loads(summary.read_bytes())
    except (OSError, ValueError):
        return {}
    return dict(batch_changes(data)) if isinstance(data, dict) else {}


def _latest_batch(root: Path) -> list[tuple[str, str | None]]:
    """The loops of the latest ``forge supervise`` summary, in the batch's order."""
    runs = root / STATE_DIR / "runs"
    summaries = sorted(runs.glob("*/summary.json")) if runs.is_dir() else []
    for path in reversed(summaries):
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("loops"), list):
            return batch_changes(data)
    raise UsageError(
        "no batch to land: no .forge/runs/*/summary.json",
        hint="run forge supervise first, or name the changes: forge land C1 C2",
    )


def _fleet_batch(
    project: Project, args: argparse.Namespace, out: Output, named: list[str]
) -> FleetLand:
    """The fleet batch's loops, their pushed branches fetched (see ``_land_fleet``)."""
    from ._land_fleet import fleet_land

    return fleet_land(project, args, out, named)


def _verify_policy(
    loaded: LoadedPolicy, root: Path, change: str, fleet: FleetLand | None = None
) -> VerifyPolicy:
    """The change's verify: a fleet loop's as submitted, its ``[[loop]]``'s, else the project's."""
    from .._supervise import resolve_loops

    if fleet is not None and change in fleet.verify:
        return fleet.verify[change]
    for setup in resolve_loops(loaded, root):
        if setup.change == change:
            return setup.policy.verify
    return loaded.policy.verify


def _land_prs(root: Path, args: argparse.Namespace, out: Output, policy: LandPolicy) -> int:
    """``forge land --pr``: push each change's branch and open its pull request.

    Nothing is verified here and the local base never moves: the remote's checks decide.
    """

    from .._git import run_git
    from .._land import has_pull_request, open_pull_requests
    from .._spend import read_spend

    for flag, given in (("--merge", args.merge), ("--squash", args.squash), ("--keep", args.keep)):
        if given:
            raise UsageError(
                f"{flag} does not apply to pull requests: the remote merges them",
                hint="forge land --pr [CHANGE…]",
            )
    base = args.base or policy.base or checked_out_branch(root)
    if not base:
        raise UsageError(
            "no base for the pull requests: the main working tree has no branch checked out",
            hint="forge land --pr --base main",
        )
    remote = policy.remote
    if not run_git(root, "remote", "get-url", remote).ok:
        raise UsageError(
            f"no git remote {remote!r} to push to",
            hint="git remote add origin URL, or set [land] remote in forge.toml",
        )
    named = list(args.changes or [])
    batch = [] if named else _latest_batch(root)
    candidates = {name for name, _ in batch} | set(named)
    timelines = {c: read_timeline(ChangePaths(root, c).timeline).events for c in candidates}
    order = [c.strip() for c in (args.order or "").split(",") if c.strip()]
    plan = order_changes(
        batch,
        named=named,
        order=order,
        has_branch={c: head_of(root, f"forge/{c}") is not None for c in candidates},
        landed={c: has_landed(timelines[c]) for c in candidates},
    )
    for change, why in plan.skipped:
        out.line(f"land: {change} — skipped: {why}", style="dim")
    taken = []
    for change in plan.changes:
        url = has_pull_request(timelines[change])
        if url:
            out.line(f"land: {change} — skipped: its pull request is open ({url})", style="dim")
        else:
            taken.append(change)
    if args.dry_run:
        for position, change in enumerate(taken, start=1):
            out.line(f"plan {position}: {change} — push forge/{change} to {remote}, PR onto {base}")
        out.line(f"land: would open {len(taken)} pull request(s) onto {base} (dry run)")
        if out.json_mode:
            out.document({"dry_run": True, "base": base, "remote": remote, "changes": taken})
        return EXIT_OK

    def spend_of(change: str) -> dict[str, object]:
        return attrs.asdict(read_spend(ChangePaths(root, change)).totals)

    outcomes = open_pull_requests(
        root, taken, base=base, remote=remote, spend_of=spend_of, said=out.line
    )
    failed = sum(1 for o in outcomes if o.result == "failed")
    out.line(
        f"land: {len(outcomes) - failed} pushed, {failed} failed of {len(outcomes)} to {remote}"
        + ("" if not failed else " — escalate: see the lines above")
    )
    if out.json_mode:
        out.document(
            {
                "base": base,
                "remote": remote,
                "changes": [o.as_json() for o in outcomes],
                "skipped": [{"change": c, "why": w} for c, w in plan.skipped],
            }
        )
    return EXIT_ESCALATE if failed else EXIT_OK


def _pr_status(root: Path, args: argparse.Namespace, out: Output) -> int:
    """``forge land --status``: each opened pull request's state and checks, from gh."""
    from .._land import gh_ready, has_pull_request, pull_request_status

    missing = gh_ready()
    if missing:
        raise UsageError(
            f"land --status asks gh about the pull requests: {missing}",
            hint="install gh and run gh auth login",
        )
    changes_dir = root / STATE_DIR / "changes"
    names = list(args.changes or []) or (
        sorted(p.name for p in changes_dir.iterdir() if p.is_dir()) if changes_dir.is_dir() else []
    )
    statuses = []
    for change in names:
        url = has_pull_request(read_timeline(ChangePaths(root, change).timeline).events)
        if url:
            status = pull_request_status(root, change, url)
            statuses.append(status)
            out.line(status.line())
        elif args.changes:
            out.line(f"land: {change} — no pull request opened", style="dim")
    if not statuses:
        out.line("land: no pull requests opened (forge land --pr opens them)")
    if out.json_mode:
        out.document({"pull_requests": [s.as_json() for s in statuses]})
    return EXIT_ESCALATE if any(s.error for s in statuses) else EXIT_OK
