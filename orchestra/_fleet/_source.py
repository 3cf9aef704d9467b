"""Where a fleet loop's code comes from: a shared folder, or a repository each host clones.

A ``repo`` loop is cloned once per host into the host's cache
(``<cache>/<batch>/<change>``), and works on the branch ``forge/<change>``: the
remote's branch when a host pushed one (a takeover continues from there, even
over an older copy of the branch in this host's cache), else a new branch from
``ref``. With ``push = true`` the branch is pushed after every recorded
iteration, when a loop is given back and when it ends, so the morning's
results are branches on the remote. Forge's own state folder inside a clone is kept out of git.
"""

from __future__ import annotations

from pathlib import Path

from .._errors import ForgeError
from .._git import run_git

CLONE_TIMEOUT = 600.0


class SourceError(ForgeError):
    """A loop's repository could not be cloned, checked out or pushed (its loop ends)."""


def branch_of(change: str) -> str:
    return f"forge/{change}"


def checkout_repo(url: str, ref: str, change: str, cache: Path) -> Path:
    """A working copy of ``url`` on branch ``forge/<change>``, in ``cache`` (blocking).

    Raises:
        SourceError: git could not clone, fetch or check out; git's words say why.
    """
    target = cache / change
    branch = branch_of(change)
    if not (target / ".git").exists():
        cache.mkdir(parents=True, exist_ok=True)
        _git(cache, "clone", "--quiet", url, str(target), timeout=CLONE_TIMEOUT)
    else:
        _git(target, "fetch", "--quiet", "origin", timeout=CLONE_TIMEOUT)
    exclude = target / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    excluded = exclude.read_text(encoding="utf-8") if exclude.exists() else ""
    if ".forge/" not in excluded.splitlines():
        with exclude.open("a", encoding="utf-8") as handle:
            handle.write("\n.forge/\n")
    local = run_git(target, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}").ok
    remote = run_git(target, "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{branch}").ok
    ahead = (
        local
        and run_git(
            target, "merge-base", "--is-ancestor", f"refs/remotes/origin/{branch}", branch
        ).ok
    )
    if remote and not ahead:
        # The remote's branch is the loop's latest pushed state (another host's,
        # after a takeover): what this host's cache holds is older or apart from
        # it. Leftovers of a copy of the loop this host lost are discarded with it.
        _git(target, "checkout", "--quiet", "--force", "-B", branch, f"origin/{branch}")
    elif local:
        # This host's own branch: the remote has none, or only part of it (a push failed).
        _git(target, "checkout", "--quiet", branch)
    else:
        start = ref
        if run_git(target, "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{ref}").ok:
            start = f"origin/{ref}"
        _git(target, "checkout", "--quiet", "-b", branch, start)
    return target


def push_branch(workdir: Path, change: str, *, timeout: float = CLONE_TIMEOUT) -> None:
    """Push ``forge/<change>`` to ``origin`` (blocking).

    Raises:
        SourceError: the push was refused or failed.
    """
    branch = branch_of(change)
    _git(workdir, "push", "--quiet", "origin", f"{branch}:{branch}", timeout=timeout)


def _git(cwd: Path, *args: str, timeout: float = 120.0) -> None:
    result = run_git(cwd, *args, timeout=timeout)
    if not result.ok:
        raise SourceError(
            f"git {args[0]} failed: {result.message()}",
            context=(f"in: {cwd}",),
        )
