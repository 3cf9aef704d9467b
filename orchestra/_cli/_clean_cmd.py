"""``forge clean [--abandon CHANGE --reason TEXT] [--dry-run]``: remove what landed.

A loop with ``worktree = true`` leaves a worktree (``.forge/worktrees/<change>``)
and a branch (``forge/<change>``) behind. Once the change has landed (its
latest ``land.*`` event is ``land.done``) both are only clutter: clean removes
them and records ``land.cleaned`` in the change's timeline. It never removes
unlanded work — commits on the branch that the base does not have, or
uncommitted changes in the worktree — unless a person abandons the change
(``--abandon CHANGE --reason WHY``, recorded as ``land.abandoned``). Every
change it keeps is named, with why and the commands that settle it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import attrs

from .._errors import EXIT_OK, ForgeError, UsageError
from .._git import GIT_TIMEOUT, git_output, run_git
from .._state import (
    LAND_ABANDONED,
    LAND_CLEANED,
    STATE_DIR,
    ChangePaths,
    LandState,
    OtherEvent,
    append_event,
    exclusive_lock,
    land_state,
    list_changes,
    read_timeline,
)
from ._common import project_from
from ._console import Output

_BRANCH_PREFIX = "forge/"


@attrs.frozen
class Leftovers:
    """What one change left in the repository, and what of it is not on the base.

    Attributes:
        change: The change's name.
        worktree: Its worktree's folder, when there is one.
        branch: Its branch (``forge/<change>``), when there is one.
        base: The base its work is compared with.
        ahead: Commits on the branch that bring to the base what it lacks.
        dirty: Whether the worktree has uncommitted changes (untracked files too).
        land: Its land state.
    """

    change: str
    worktree: Path | None
    branch: str | None
    base: str
    ahead: int
    dirty: bool
    land: LandState


@attrs.frozen
class Verdict:
    """Whether clean removes a change's worktree and branch, and why."""

    remove: bool
    why: str


def verdict(left: Leftovers, *, abandoned: bool) -> Verdict:
    """Remove a landed change with nothing unlanded, or an abandoned one; keep the rest."""
    if abandoned or left.land.state == "abandoned":
        return Verdict(True, "abandoned")
    unlanded = []
    if left.ahead:
        unlanded.append(f"{left.ahead} commit(s) not on {left.base}")
    if left.dirty:
        unlanded.append("uncommitted changes")
    settle = f"forge land {left.change}, or forge clean --abandon {left.change} --reason WHY"
    if unlanded:
        return Verdict(False, f"{' and '.join(unlanded)}; {settle}")
    if left.land.landed:
        return Verdict(True, f"landed on {left.land.base or left.base}")
    said = "not landed" if left.land.state == "none" else f"land {left.land.line()}"
    return Verdict(False, f"{said}; {settle}")


def run(args: argparse.Namespace, out: Output) -> int:
    project = project_from(args)
    root = project.root
    abandon: str | None = args.abandon
    reason = (args.reason or "").strip()
    if args.reason is not None and abandon is None:
        raise UsageError(
            "--reason goes with --abandon", hint="forge clean --abandon C --reason '...'"
        )
    if abandon is not None and not reason:
        # Abandoning throws work away: say why, for the record.
        raise UsageError(
            f"forge clean --abandon {abandon} needs --reason: why is its work given up?",
            hint=f"forge clean --abandon {abandon} --reason 'superseded by another change'",
        )
    names = _candidates(root)
    if abandon is not None and abandon not in names and abandon not in list_changes(root):
        raise UsageError(
            f"unknown change {abandon!r}: it has no state, worktree or branch here",
            hint="forge status lists the changes",
        )
    fallback = _current_branch(root)
    bases = _declared_bases(project.config)
    removed: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    if abandon is not None and not args.dry_run:
        _record(
            ChangePaths(root, abandon),
            OtherEvent(name=LAND_ABANDONED, fields={"reason": reason, "by": _who(root)}),
        )
    for name in sorted(names | ({abandon} if abandon else set())):
        left = _leftovers(root, name, bases.get(name, fallback))
        if left.worktree is None and left.branch is None:
            continue
        decided = verdict(left, abandoned=name == abandon)
        entry = {
            "change": name,
            "worktree": str(left.worktree) if left.worktree else "",
            "branch": left.branch or "",
            "why": decided.why,
            "commits": left.ahead,
            "dirty": left.dirty,
        }
        if not decided.remove:
            kept.append(entry)
            continue
        if not args.dry_run:
            _remove(root, left)
        removed.append(entry)
    verb = "would remove" if args.dry_run else "removed"
    for entry in removed:
        what = " and ".join(
            part
            for part in (
                f"worktree {entry['worktree']}" if entry["worktree"] else "",
                f"branch {entry['branch']}" if entry["branch"] else "",
            )
            if part
        )
        out.line(f"{verb} {entry['change']}: {what} ({entry['why']})")
    for entry in kept:
        out.line(f"kept {entry['change']}: {entry['why']}", style="yellow")
    if not removed and not kept:
        out.line("nothing to clean: no change has a worktree or a forge/ branch")
    if out.json_mode:
        out.document({"dry_run": bool(args.dry_run), "removed": removed, "kept": kept})
    return EXIT_OK


def _candidates(root: Path) -> set[str]:
    """The changes with a worktree folder or a ``forge/<change>`` branch."""
    from .._names import CHANGE_NAME

    names: set[str] = set()
    folder = root / STATE_DIR / "worktrees"
    if folder.is_dir():
        names.update(p.name for p in folder.iterdir() if p.is_dir())
    listed = git_output(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/forge/")
    for line in (listed or b"").decode(errors="replace").splitlines():
        names.add(line.strip().removeprefix(_BRANCH_PREFIX))
    return {name for name in names if CHANGE_NAME.fullmatch(name)}


def _declared_bases(config: Path | None) -> dict[str, str]:
    """Each ``[[loop]]``'s ``base`` other than ``HEAD``, read straight from forge.toml.

    Only the base is wanted, to count a branch's unlanded commits: a file that
    cannot be read that simply leaves every change compared with the branch
    checked out (``HEAD``, the loops' default base, is that too).
    """
    if config is None:
        return {}
    import tomllib  # here: only clean reads the file this way

    try:
        data = tomllib.loads(config.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # TOMLDecodeError, UnicodeDecodeError
        return {}
    tables = data.get("loop", [])
    found: dict[str, str] = {}
    for table in tables if isinstance(tables, list) else []:
        if not isinstance(table, dict):
            continue
        change, base = table.get("change"), table.get("base")
        if isinstance(change, str) and isinstance(base, str) and base and base != "HEAD":
            found[change] = base
    return found


def _current_branch(root: Path) -> str:
    said = git_output(root, "symbolic-ref", "-q", "--short", "HEAD")
    return said.decode(errors="replace").strip() if said else "HEAD"


def _who(root: Path) -> str:
    said = git_output(root, "config", "user.name")
    return said.decode(errors="replace").strip() if said else ""


def _leftovers(root: Path, change: str, fallback: str) -> Leftovers:
    paths = ChangePaths(root, change)
    land = land_state(read_timeline(paths.timeline).events)
    base = land.base or fallback
    path = root / STATE_DIR / "worktrees" / change
    worktree = path if path.exists() else None
    branch = f"{_BRANCH_PREFIX}{change}"
    has_branch = run_git(root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}").ok
    dirty = False
    if worktree is not None:
        status = run_git(worktree, "status", "--porcelain")
        # A worktree git cannot read may hold anything: count it as unlanded.
        dirty = not status.ok or bool(status.stdout.strip())
    ahead = _ahead(root, base, branch) if has_branch else 0
    return Leftovers(change, worktree, branch if has_branch else None, base, ahead, dirty, land)


def _ahead(root: Path, base: str, branch: str) -> int:
    """Commits on ``branch`` that ``base`` lacks — 0 when the base already has their content.

    A squash or rebase lands new commits on the base, so the branch's own are
    never ancestors of it: merging the branch into the base and finding the
    base's tree unchanged shows their work is there all the same.
    """
    counted = git_output(root, "rev-list", "--count", f"{base}..{branch}")
    if counted is None:
        return _unknown_ahead(root, branch)
    ahead = int(counted.decode().strip() or 0)
    if ahead == 0:
        return 0
    merged = run_git(root, "merge-tree", "--write-tree", base, branch, timeout=GIT_TIMEOUT)
    tree = git_output(root, "rev-parse", f"{base}^{{tree}}")
    if merged.ok and tree is not None and merged.stdout.split()[:1] == tree.split():
        return 0
    return ahead


def _unknown_ahead(root: Path, branch: str) -> int:
    # No base to compare with (it was deleted): every commit of the branch may be unlanded.
    counted = git_output(root, "rev-list", "--count", branch)
    return max(1, int(counted.decode().strip() or 1)) if counted else 1


def _remove(root: Path, left: Leftovers) -> None:
    """Remove the worktree, prune, delete the branch; record ``land.cleaned``."""
    if left.worktree is not None:
        done = run_git(root, "worktree", "remove", "--force", str(left.worktree))
        if not done.ok:
            raise ForgeError(
                f"cannot remove the worktree of {left.change!r}: {done.message()}",
                hint=f"git worktree remove --force {left.worktree}",
            )
    run_git(root, "worktree", "prune")
    if left.branch is not None:
        done = run_git(root, "branch", "-D", left.branch)
        if not done.ok:
            raise ForgeError(
                f"cannot delete the branch {left.branch}: {done.message()}",
                hint=f"git branch -D {left.branch}",
            )
    _record(
        ChangePaths(root, left.change),
        OtherEvent(
            name=LAND_CLEANED,
            fields={
                "worktree": str(left.worktree) if left.worktree else "",
                "branch": left.branch or "",
            },
        ),
    )


def _record(paths: ChangePaths, event: OtherEvent) -> None:
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, paths.name, event)
