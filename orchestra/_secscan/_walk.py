"""Which files a scan looks at: the working tree as git sees it.

In a git work tree (a worktree too) that is every tracked file and every
untracked file that is not ignored, so a freshly written ``.env`` is scanned
while ``node_modules/`` is not. Elsewhere, or when git cannot answer, the
folder is walked and its ``.gitignore`` files are honoured with pathspec's
gitignore matching. Either way ``.git`` internals are left out, and so is
what Forge itself writes in the root's ``.forge/`` (its state); a file there
that git tracks is the project's, and is scanned. Listed paths may not exist (a tracked file
deleted in the work tree); the scan skips them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pathspec

from .._git import git_output

FORGE_DIR = ".forge"


def list_files(root: Path) -> list[str]:
    """The files to scan under ``root``: relative, ``/``-separated, sorted, unique."""
    return listed_files(root)[0]


def listed_files(root: Path) -> tuple[list[str], bool]:
    """:func:`list_files`, and whether git listed them (False: the folder was walked)."""
    listed = _git_files(root)
    from_git = listed is not None
    walked = [(path, False) for path in _walk_files(root)] if listed is None else listed
    return sorted({path for path, tracked in walked if wanted(path, tracked=tracked)}), from_git


def wanted(path: str, *, tracked: bool = False) -> bool:
    """Whether a path git lists is one a scan looks at (not Forge's state, not git's).

    Under ``.forge/`` only a file git tracks: the project committed it.
    """
    if not path or path.endswith("/"):  # an untracked nested repository
        return False
    parts = path.split("/")
    return (tracked or parts[0] != FORGE_DIR) and ".git" not in parts


def tracked_state_files(root: Path) -> set[str] | None:
    """The files under ``.forge/`` that git tracks (one ``git ls-files``); None: git failed."""
    out = git_output(root, "ls-files", "-z", "--cached", "--", FORGE_DIR)
    if out is None:
        return None
    return {
        path for raw in out.split(b"\0") if raw and wanted(path := os.fsdecode(raw), tracked=True)
    }


def _git_files(root: Path) -> list[tuple[str, bool]] | None:
    """Each path git lists, and whether git tracks it (``-t``: ``?`` is untracked)."""
    # None when git is missing, refuses, or root is not a work tree: walk instead.
    out = git_output(root, "ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard")
    if out is None:
        return None
    listed = []
    for raw in out.split(b"\0"):
        if len(raw) > 2:
            listed.append((os.fsdecode(raw[2:]), raw[:1] != b"?"))
    return listed


def _walk_files(root: Path) -> list[str]:
    specs: dict[str, pathspec.GitIgnoreSpec] = {}
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        relative = Path(folder).relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        spec = _read_gitignore(Path(folder) / ".gitignore")
        if spec is not None:
            specs[prefix] = spec
        dirs[:] = sorted(
            name
            for name in dirs
            if name != ".git"
            and not (prefix == "" and name == FORGE_DIR)
            and not _ignored(specs, prefix + name + "/")
        )
        found.extend(prefix + name for name in files if not _ignored(specs, prefix + name))
    return found


def _read_gitignore(path: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None
    return pathspec.GitIgnoreSpec.from_lines(text.splitlines())


def _ignored(specs: dict[str, pathspec.GitIgnoreSpec], path: str) -> bool:
    """Git's rule: the deepest .gitignore with a matching pattern decides."""
    for prefix in sorted((p for p in specs if path.startswith(p)), key=len, reverse=True):
        result = specs[prefix].check_file(path[len(prefix) :])
        if result.include is not None:
            return bool(result.include)
    return False
