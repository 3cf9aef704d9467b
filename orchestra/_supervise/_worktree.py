"""Git worktrees for loops that want isolation.

A loop with ``worktree = true`` works in ``.forge/worktrees/<change>`` on the
branch ``forge/<change>``, made from the loop's ``base`` and reused on rerun.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import trio

from .._errors import ForgeError
from .._state import STATE_DIR


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
        has_branch = await _git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}")
        if has_branch.returncode == 0:
            args = ["worktree", "add", str(path), branch]
        else:
            args = ["worktree", "add", "-b", branch, str(path), base]
        done = await _git(repo, *args)
        if done.returncode != 0:
            raise WorktreeError(
                f"cannot create the worktree of loop {change!r}",
                context=[f"git {' '.join(args)}", done.stdout.decode(errors="replace").strip()],
                hint="check that the loop's base exists and that the branch is not checked out",
            )
    return path


async def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        ["git", *args],
        cwd=repo,
        check=False,
        capture_stdout=True,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
