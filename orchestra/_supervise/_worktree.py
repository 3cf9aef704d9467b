"""Git worktrees for loops that want isolation.

A loop with ``worktree = true`` works in ``.forge/worktrees/<change>`` on the
branch ``forge/<change>``, made from the loop's ``base`` and reused on rerun.
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

    Creation is serialized (``lock``): git takes a lock of its own on the
    repository, and two loops adding worktrees at once would trip over it.

    Raises:
        WorktreeError: naming the git command and what it printed.
    """
    path = repo / STATE_DIR / "worktrees" / change
    branch = f"forge/{change}"
    async with lock:
        if (path / ".git").exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        has_branch = await run_git_async(
            repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}"
        )
        if has_branch.ok:
            args = ["worktree", "add", str(path), branch]
        else:
            args = ["worktree", "add", "-b", branch, str(path), base]
        # A checkout writes every file of the tree: give a large one its time.
        done = await run_git_async(repo, *args, timeout=_CHECKOUT_TIMEOUT)
        if not done.ok:
            raise WorktreeError(
                f"cannot create the worktree of loop {change!r}",
                context=[f"git {' '.join(args)}", done.message()],
                hint="check that the loop's base exists and that the branch is not checked out",
            )
    return path
