"""A fleet loop's pushed branch brought into the project: which remote, and the fetch.

A fleet ``repo`` loop pushes its branch ``forge/<change>`` to the loop's
repository. When that repository is one of the project's git remotes, the
branch is fetched into ``refs/remotes/<remote>/forge/<change>`` and the local
``forge/<change>`` is made (or fast-forwarded) to it, so the change lands as
any local one. A local branch with commits the fetched one lacks is never
moved: that change is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from .._git import run_git
from ._repo import checked_out_branch, checked_out_elsewhere, git, head_of

FETCH_TIMEOUT = 600.0

# scheme://… or scp-like user@host:path (not a Windows drive letter).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://|^[^/:]+@[^/:]+:|^[^/:]{2,}:")


def normalise_url(url: str, root: Path) -> str:
    """``url`` as compared with another: no trailing ``/`` or ``.git``; a path made absolute.

    A local path (or a ``file://`` URL) is resolved from ``root``, as git
    resolves a relative remote path from the working tree.
    """
    text = url.strip()
    if text.startswith("file://"):
        text = text.removeprefix("file://")
    if not _URL.match(text):
        text = str((root / text).resolve()) if text else ""
    text = text.rstrip("/")
    text = text.removesuffix(".git")
    return text.rstrip("/")


def remote_urls(root: Path) -> dict[str, list[str]]:
    """Each git remote of the project and its URLs (fetch and push)."""
    done = git(root, "config", "--get-regexp", r"^remote\..*\.(url|pushurl)$")
    remotes: dict[str, list[str]] = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        key, _, value = line.partition(" ")
        name = key.removeprefix("remote.").rpartition(".")[0]
        remotes.setdefault(name, []).append(value)
    return remotes


def remote_for(root: Path, repo: str) -> str | None:
    """The project's remote whose URL is ``repo`` (normalised), or None."""
    wanted = normalise_url(repo, root)
    if not wanted:
        return None
    for name, urls in sorted(remote_urls(root).items()):
        if any(normalise_url(url, root) == wanted for url in urls):
            return name
    return None


@attrs.frozen
class Fetched:
    """What fetching one change's branch did.

    Attributes:
        change: The change.
        remote: The remote it was fetched from.
        commit: The fetched branch's head ("" when the fetch failed).
        moved: ``created``, ``fast-forwarded`` or ``unchanged`` (the local
            ``forge/<change>``), or ``""`` when it was skipped.
        why: Why the change is skipped ("" when it was fetched).
    """

    change: str
    remote: str
    commit: str = ""
    moved: str = ""
    why: str = ""


def fetch_change(root: Path, remote: str, change: str) -> Fetched:
    """Fetch ``forge/<change>`` from ``remote`` into the local branch, never clobbering it."""
    branch = f"forge/{change}"
    tracking = f"refs/remotes/{remote}/{branch}"
    refspec = f"+refs/heads/{branch}:{tracking}"
    done = run_git(root, "fetch", "--quiet", "--no-tags", remote, refspec, timeout=FETCH_TIMEOUT)
    if not done.ok:
        return Fetched(change, remote, why=f"git fetch {remote} {branch} failed: {done.message()}")
    fetched = git(root, "rev-parse", "--verify", "-q", f"{tracking}^{{commit}}")
    commit = fetched.stdout.decode().strip()
    local = head_of(root, branch)
    if local == commit:
        return Fetched(change, remote, commit, "unchanged")
    if local is not None:
        if not git(root, "merge-base", "--is-ancestor", local, commit).ok:
            return Fetched(
                change,
                remote,
                commit,
                why=f"the local {branch} has commits that {remote}'s lacks "
                "(not a fast-forward): not clobbered",
            )
        where = checked_out_elsewhere(root, branch)
        if where is None and checked_out_branch(root) == branch:
            where = root
        if where is not None:
            # Moving it would leave that tree's files behind its branch.
            return Fetched(change, remote, commit, why=f"{branch} is checked out in {where}")
    # A compare-and-swap: another process moving the branch meanwhile is not overwritten.
    moved = git(root, "update-ref", f"refs/heads/{branch}", commit, local or "")
    if not moved.ok:
        return Fetched(change, remote, commit, why=f"{branch} not updated: {moved.message()}")
    return Fetched(change, remote, commit, "created" if local is None else "fast-forwarded")
