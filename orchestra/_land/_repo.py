"""The git a land run does: a scratch worktree, bringing a branch onto the base, the ref move."""

from __future__ import annotations

from pathlib import Path

from .._errors import ForgeError, UsageError
from .._git import GIT_TIMEOUT, GitResult, run_git
from .._state import STATE_DIR

# A checkout or a rebase writes files of the whole tree: give a large one its time.
_TREE_TIMEOUT = 5 * GIT_TIMEOUT


class LandGitError(ForgeError):
    """A git command a land run needs failed in a way that is not a conflict."""


def git(cwd: Path, *args: str) -> GitResult:
    """Run git for the land run, with the time a tree-wide command may need."""
    return run_git(cwd, *args, timeout=_TREE_TIMEOUT)


def must(cwd: Path, *args: str) -> str:
    """Git's standard output, stripped; a failure raises naming the command.

    Raises:
        LandGitError: the command failed.
    """
    done = git(cwd, *args)
    if not done.ok:
        raise LandGitError(
            f"git {' '.join(args)} failed", context=[done.message()], hint="see git's message"
        )
    return done.stdout.decode(errors="replace").strip()


def head_of(root: Path, branch: str) -> str | None:
    """The sha ``refs/heads/<branch>`` points at, or None when there is no such branch."""
    done = git(root, "rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}")
    return done.stdout.decode().strip() if done.ok else None


def checked_out_branch(root: Path) -> str | None:
    """The branch checked out in the main working tree (None when HEAD is detached)."""
    done = git(root, "symbolic-ref", "-q", "--short", "HEAD")
    return done.stdout.decode().strip() if done.ok else None


def require_repository(root: Path) -> None:
    """Raises UsageError when ``root`` is not in a git working tree."""
    done = git(root, "rev-parse", "--is-inside-work-tree")
    if not done.ok or done.stdout.strip() != b"true":
        raise UsageError(
            "forge land needs a git repository", hint="run it in the project's working tree"
        )


def checked_out_elsewhere(root: Path, branch: str) -> Path | None:
    """A linked worktree (not ``root``'s own) that has ``branch`` checked out, if any."""
    listing = git(root, "worktree", "list", "--porcelain").stdout.decode(errors="replace")
    here = root.resolve()
    for record in listing.split("\n\n"):
        lines = record.strip().splitlines()
        where = next(
            (ln.removeprefix("worktree ") for ln in lines if ln.startswith("worktree ")), ""
        )
        if f"branch refs/heads/{branch}" in lines and where and Path(where).resolve() != here:
            return Path(where)
    return None


def tracked_changes(tree: Path) -> list[str]:
    """Paths with uncommitted changes to tracked files (untracked ones do not count)."""
    done = git(tree, "status", "--porcelain", "--untracked-files=no")
    if not done.ok:
        raise LandGitError("git status failed", context=[done.message()], hint="see git's message")
    # Not stripped: each line's first column is part of its status.
    out = done.stdout.decode(errors="replace")
    return [line[3:] for line in out.splitlines() if line.strip()]


def all_changes(tree: Path) -> bool:
    """Whether the tree has anything uncommitted, untracked files included."""
    return bool(must(tree, "status", "--porcelain"))


def commit_all(tree: Path, message: str) -> str:
    """Commit everything uncommitted in ``tree`` on its branch; the new head."""
    must(tree, "add", "-A")
    must(tree, "commit", "-q", "--no-verify", "-m", message)
    return must(tree, "rev-parse", "HEAD")


def scratch_path(root: Path) -> Path:
    """Where a land run combines trees: ``.forge/land/scratch``."""
    return root / STATE_DIR / "land" / "scratch"


def open_scratch(root: Path, at: str) -> Path:
    """A detached worktree at ``at``, made afresh (a leftover one is removed first)."""
    path = scratch_path(root)
    close_scratch(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    must(root, "worktree", "add", "--detach", str(path), at)
    return path


def close_scratch(root: Path) -> None:
    """Remove the scratch worktree, if any (a run killed half-way leaves one)."""
    path = scratch_path(root)
    if path.exists():
        git(root, "worktree", "remove", "--force", str(path))
    git(root, "worktree", "prune")


def reset_scratch(scratch: Path, at: str) -> None:
    """Put the scratch tree back at ``at``, nothing half-done in it."""
    for abort in (("rebase", "--abort"), ("merge", "--abort")):
        git(scratch, *abort)
    must(scratch, "checkout", "-q", "--force", "--detach", at)
    must(scratch, "clean", "-fdq")


def conflicted(scratch: Path) -> list[str]:
    """The paths git left in conflict in the scratch tree."""
    out = git(scratch, "diff", "--name-only", "--diff-filter=U").stdout.decode(errors="replace")
    return sorted({line for line in out.splitlines() if line})


def combine(scratch: Path, base: str, tip: str, mode: str, message: str) -> list[str]:
    """Bring the commits of ``tip`` onto ``base`` in the scratch tree (at ``base``).

    ``rebase`` replays the commits since the merge-base, ``merge`` makes a merge
    commit, ``squash`` one commit with ``message``, ``fast-forward`` takes a
    ``tip`` that holds ``base`` as it is. No branch moves: the result
    is the scratch tree's detached HEAD.

    Returns:
        The conflicted paths (empty when it combined); after a conflict the
        scratch tree is back at ``base``.
    """
    if mode == "rebase":
        merge_base = must(scratch, "merge-base", base, tip)
        done = git(scratch, "rebase", "-q", "--onto", base, merge_base, tip)
    elif mode == "fast-forward":
        done = git(scratch, "merge", "-q", "--ff-only", tip)
    elif mode == "merge":
        done = git(scratch, "merge", "-q", "--no-ff", "-m", message, tip)
    else:
        done = git(scratch, "merge", "-q", "--squash", tip)
        if done.ok and git(scratch, "diff", "--cached", "--quiet").returncode == 1:
            done = git(scratch, "commit", "-q", "--no-verify", "-m", message)
    if done.ok:
        return []
    files = conflicted(scratch)
    reset_scratch(scratch, base)
    if not files:
        raise LandGitError(
            f"git could not {mode} {tip[:7]} onto {base[:7]}",
            context=[done.message()],
            hint="see git's message",
        )
    return files


def mode_for(root: Path, base: str, tip: str, mode: str) -> str:
    """How ``tip`` is brought onto ``base``: ``mode``, unless rebasing cannot keep its merges.

    A branch with a merge commit since it left the base — the base merged into
    it by ``forge land --rework``, or by the agent — would have the conflicts
    its merge resolved replayed again by a rebase. It is merged instead: a
    fast-forward when it already holds the base, else a merge commit.
    """
    if mode != "rebase":
        return mode
    merge_base = must(root, "merge-base", base, tip)
    merges = must(root, "rev-list", "--merges", "--count", f"{merge_base}..{tip}")
    if merges == "0":
        return mode
    holds_base = git(root, "merge-base", "--is-ancestor", base, tip).ok
    return "fast-forward" if holds_base else "merge"


def merge_base_into(tree: Path, base: str, message: str) -> list[str]:
    """Merge ``base`` into the branch checked out in ``tree``; the conflicted paths.

    A clean merge is committed. A conflicted one is left as git leaves it,
    the conflicts marked in the files, for the agent to resolve: the next
    ``forge land`` commits what it made of them.

    Raises:
        LandGitError: the merge failed without conflicts (git's words say why).
    """
    done = git(tree, "merge", "-q", "--no-ff", "--no-edit", "-m", message, base)
    if done.ok:
        return []
    files = conflicted(tree)
    if not files:
        raise LandGitError(
            f"git could not merge {base[:7]} into {tree}",
            context=[done.message()],
            hint="see git's message",
        )
    return files


def advance(root: Path, branch: str, new: str, old: str, *, checked_out: bool) -> None:
    """Move ``branch`` from ``old`` to ``new`` in one compare-and-swap.

    ``git update-ref`` writes the ref with a lock file and a rename, and only
    when it still points at ``old``: a kill at any moment leaves it old or new.
    When the main working tree has the branch checked out (and is clean: the
    caller checked), its index and files follow with a two-tree
    ``read-tree -m -u``, which changes only the files the land changed; a
    kill between the two is finished by the next run (``_pending.py``).

    Raises:
        LandGitError: the branch moved meanwhile, or git failed.
    """
    must(root, "update-ref", "-m", "forge land", f"refs/heads/{branch}", new, old)
    if checked_out:
        must(root, "read-tree", "-m", "-u", old, new)


def remove_change(root: Path, change: str, worktree: Path) -> tuple[str, str]:
    """Remove the change's worktree and branch; ``(worktree, branch)`` removed, or ``""``."""
    removed = ""
    if worktree.exists():
        must(root, "worktree", "remove", "--force", str(worktree))
        removed = str(worktree)
    git(root, "worktree", "prune")
    branch = f"forge/{change}"
    deleted = branch if git(root, "branch", "-D", branch).ok else ""
    return removed, deleted
