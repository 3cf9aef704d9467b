"""Git worktrees for loops that want isolation.

A loop with ``worktree = true`` works in ``.forge/worktrees/<change>`` on the
branch ``forge/<change>``, made from the loop's ``base`` and reused on rerun.
A worktree whose folder is gone (``rm -rf .forge``) is made again on the same
branch, so the loop's earlier commits carry over.
"""

from __future__ import annotations

from pathlib import Path

import trio

from .._errors import ForgeError
from .._git import GIT_TIMEOUT, run_git_async
from .._state import STATE_DIR

_CHECKOUT_TIMEOUT = 5 * GIT_TIMEOUT


class WorktreeError(ForgeError):
    """A loop's worktree could not be created."""


async def ensure_worktree(repo: Path, change: str, base: str, lock: trio.Lock) -> Path:
    """The loop's worktree, created from ``base`` on first use and reused after.

    A worktree git still registers but whose folder is missing is pruned and
    made again on its existing branch ``forge/<change>``. Creation is
    serialized (``lock``): git takes a lock of its own on the repository, and
    two loops adding worktrees at once would trip over it.

    Raises:
        WorktreeError: naming the git command and what git printed.
    """
    path = repo / STATE_DIR / "worktrees" / change
    branch = f"forge/{change}"
    async with lock:
        if (path / ".git").exists():
            return path
        if await _registered_but_missing(repo, path):
            await _git(repo, change, "worktree", "prune")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WorktreeError(
                f"cannot create the worktree of loop {change!r}: {exc}",
                context=[f"folder: {path.parent}"],
            ) from exc
        has_branch = await run_git_async(
            repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}"
        )
        if has_branch.ok:
            args = ["worktree", "add", str(path), branch]
        else:
            args = ["worktree", "add", "-b", branch, str(path), base]
        await _git(repo, change, *args)
    return path


async def _registered_but_missing(repo: Path, path: Path) -> bool:
    """Whether git lists ``path`` as a worktree although its folder is gone."""
    listed = await run_git_async(repo, "worktree", "list", "--porcelain")
    if not listed.ok:
        return False  # the add that follows reports what is wrong
    return _missing_in(listed.stdout.decode(errors="replace"), path)


def _missing_in(listing: str, path: Path) -> bool:
    """Whether ``git worktree list --porcelain`` lists ``path`` with no checkout there."""
    wanted = path.resolve()
    for record in listing.split("\n\n"):
        first = record.strip().partition("\n")[0]
        if first.startswith("worktree "):
            where = Path(first.removeprefix("worktree "))
            if where.resolve() == wanted and not (where / ".git").exists():
                return True
    return False


async def _git(repo: Path, change: str, *args: str) -> None:
    # A checkout writes every file of the tree: give a large one its time.
    done = await run_git_async(repo, *args, timeout=_CHECKOUT_TIMEOUT)
    if not done.ok:
        said = done.message()
        raise WorktreeError(
            f"cannot create the worktree of loop {change!r}: {_gist(said)}",
            context=[f"git {' '.join(args)}", said],
            hint="check that the loop's base exists, that the branch "
            f"forge/{change} is not checked out elsewhere, and that nothing occupies "
            f"{STATE_DIR}/worktrees/{change}",
        )


def _gist(said: str) -> str:
    """Git's reason in one line: its fatal or error lines, else its last line."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    reasons = [line for line in lines if line.startswith(("fatal:", "error:"))]
    return "; ".join(reasons) if reasons else (lines[-1] if lines else said)
