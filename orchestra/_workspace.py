"""The project Forge works in: where its root and policy are, and what state its tree is in."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._errors import ConfigError
from ._project_root import find_root

if TYPE_CHECKING:
    from ._treestatus import PathStatus, TreeStatus

_CHUNK = 1 << 20


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
    the root is that repository's top (or ``start`` outside git). The search
    is :func:`orchestra._project_root.find_root`'s, which the agent hooks
    share.

    Raises:
        ConfigError: when an explicit ``config`` is not a file.
    """
    explicit = None if config is None else os.fspath(config)
    root, found = find_root(os.fspath(start), explicit)
    if explicit is not None and (found is None or not os.path.isfile(found)):
        raise ConfigError("the policy file does not exist", problems=[str(found)])
    return Project(root=Path(root), config=None if found is None else Path(found))


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
    """Read the commit and fingerprint of ``root`` (both None outside git).

    Two git commands (where ``root`` sits in its repository, and one
    ``git status``) plus reading the files that differ from the commit.
    """
    # Here, not at the top: finding the project (every command) never runs git.
    from ._treestatus import read_status

    status = read_status(root)
    if status is None:
        # Half a fingerprint would call a changed tree unchanged: better none at all.
        return TreeState(commit=None, fingerprint=None)
    return tree_state_from(status)


def tree_state_from(status: TreeStatus) -> TreeState:
    """The commit and fingerprint of the tree ``status`` describes, without running git.

    The fingerprint hashes the commit and, for each path that differs from it,
    the path with its mode and content (as a git object name) or a deletion
    marker; a path whose content and mode are back to the commit's counts as
    unchanged. Only the files the status lists are read, so a caller holding a
    fresh status gets the same value :func:`tree_state` would compute.
    """
    import hashlib  # here: finding the project (every command) must not pay for it

    if not status.work_tree:
        return TreeState(commit=None, fingerprint=None)
    digest = hashlib.sha256((status.head or "unborn").encode())
    for entry in status.entries:
        state = _working_state(status.workdir, entry, status.head)
        if state is not None:
            digest.update(b"\0" + os.fsencode(entry.path) + b"\0" + state.encode())
    return TreeState(commit=status.head, fingerprint=f"sha256:{digest.hexdigest()[:16]}")


def _working_state(workdir: Path, entry: PathStatus, head: str | None) -> str | None:
    """What ``entry`` holds in the work tree; None when that is what HEAD holds."""
    full = workdir / entry.path
    try:
        info = os.lstat(full)
        if stat.S_ISLNK(info.st_mode):
            mode, oid = "120000", _object_name(entry, head, [os.fsencode(os.readlink(full))])
        elif stat.S_ISREG(info.st_mode):
            mode = "100755" if info.st_mode & 0o111 else "100644"
            oid = _file_object_name(full, entry, head)
        elif stat.S_ISDIR(info.st_mode):
            # A submodule or a nested repository: what git says of it stands for it.
            return f"folder {entry.code} {entry.submodule}"
        else:
            return "special"
    except (FileNotFoundError, NotADirectoryError):
        return "deleted" if entry.in_head else None
    except OSError:
        return "unreadable"
    if entry.in_head and (mode, oid) == (entry.head_mode, entry.head_oid):
        return None
    return f"{mode} {oid}"


def _file_object_name(path: Path, entry: PathStatus, head: str | None) -> str:
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        chunks = iter(partial(handle.read, _CHUNK), b"")
        return _object_name(entry, head, chunks, size)


def _object_name(
    entry: PathStatus, head: str | None, chunks: Iterable[bytes], size: int | None = None
) -> str:
    """git's name for a blob of this content, in the repository's hash (SHA-1 or SHA-256)."""
    import hashlib

    known = entry.head_oid or head or ""
    if size is None:
        chunks = list(chunks)
        size = sum(len(chunk) for chunk in chunks)
    name: hashlib._Hash = hashlib.new(
        "sha256" if len(known) == 64 else "sha1", usedforsecurity=False
    )
    name.update(b"blob %d\0" % size)
    for chunk in chunks:
        name.update(chunk)
    return name.hexdigest()


def default_change(root: Path) -> str:
    """The change a command works on when none is named: the git branch, as a change name.

    ``feature/Add-Billing`` becomes ``feature-add-billing``; outside git, or on a
    detached HEAD, it is ``default``.
    """
    from ._git import git_output

    branch = git_output(root, "rev-parse", "--abbrev-ref", "HEAD")
    name = branch.decode().strip() if branch else ""
    if not name or name == "HEAD":
        return "default"
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).lstrip("._-")[:64].rstrip("-")
    return slug or "default"
