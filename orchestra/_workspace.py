"""The project Forge works in: where its root and policy are, and what state its tree is in."""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs

from ._errors import ConfigError
from ._state import STATE_DIR

CONFIG_NAME = "forge.toml"
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's well-known empty tree


@attrs.frozen
class Project:
    """A project root and its policy file (None when it runs on built-in defaults)."""

    root: Path
    config: Path | None


def find_project(start: Path, config: Path | None = None) -> Project:
    """Locate the project that ``start`` is in.

    With an explicit ``config``, its folder is the root. Otherwise the nearest
    folder at or above ``start`` that holds a ``forge.toml`` is the root; the
    search stops at the top of the git repository, and with no ``forge.toml``
    the root is that repository's top (or ``start`` outside git).

    Raises:
        ConfigError: when an explicit ``config`` is not a file.
    """
    if config is not None:
        config = config.resolve()
        if not config.is_file():
            raise ConfigError("the policy file does not exist", problems=[str(config)])
        return Project(root=config.parent, config=config)
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_NAME).is_file():
            return Project(root=folder, config=folder / CONFIG_NAME)
        if (folder / ".git").exists():
            return Project(root=folder, config=None)
    return Project(root=start, config=None)


@attrs.frozen
class TreeState:
    """The commit and a fingerprint of the working tree a verdict was taken on.

    ``fingerprint`` covers tracked changes against the commit and the content
    of untracked files that git does not ignore (Forge's own ``.forge/`` aside),
    so two verdicts with the same fingerprint judged the same code.
    """

    commit: str | None
    fingerprint: str | None


def tree_state(root: Path) -> TreeState:
    """Read the commit and fingerprint of ``root`` (both None outside git)."""
    # Imported here, like subprocess in _git: finding the project (every
    # command) must not pay for them.
    import hashlib

    if _git(root, "rev-parse", "--is-inside-work-tree") is None:
        return TreeState(commit=None, fingerprint=None)
    head = _git(root, "rev-parse", "--verify", "-q", "HEAD")
    commit = head.decode().strip() if head else None
    exclude = f":(exclude){STATE_DIR}"
    diff = _git(
        root,
        "diff",
        commit or _EMPTY_TREE,
        "--binary",
        "--no-ext-diff",
        "--no-color",
        "--",
        ".",
        exclude,
    )
    untracked = _git(root, "ls-files", "-o", "--exclude-standard", "-z", "--", ".", exclude)
    digest = hashlib.sha256()
    digest.update((commit or "unborn").encode())
    digest.update(diff or b"")
    if diff is None or untracked is None:
        # Half a fingerprint would call a changed tree unchanged: better none at all.
        return TreeState(commit=commit, fingerprint=None)
    for name in sorted(untracked.split(b"\0")):
        if not name:
            continue
        digest.update(b"\0" + name + b"\0")
        try:
            digest.update(hashlib.sha256((root / os.fsdecode(name)).read_bytes()).digest())
        except OSError:
            digest.update(b"unreadable")
    return TreeState(commit=commit, fingerprint=f"sha256:{digest.hexdigest()[:16]}")


def _git(root: Path, *args: str) -> bytes | None:
    import subprocess

    try:
        completed = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, check=False, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout if completed.returncode == 0 else None


def default_change(root: Path) -> str:
    """The change a command works on when none is named: the git branch, as a change name.

    ``feature/Add-Billing`` becomes ``feature-add-billing``; outside git, or on a
    detached HEAD, it is ``default``.
    """
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD")
    name = branch.decode().strip() if branch else ""
    if not name or name == "HEAD":
        return "default"
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).lstrip("._-")[:64].rstrip("-")
    return slug or "default"
