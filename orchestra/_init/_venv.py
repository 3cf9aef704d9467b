"""The project's own virtualenv, and a command that reaches its tools from any checkout.

A verify run by cron or ``forge supervise`` does not have the project's
virtualenv activated, so ``pytest`` alone is either not found or someone
else's. The tool inside the venv, by its path, is the project's own.

A loop works in a linked worktree, ``.forge/worktrees/<change>``, and its verify
runs there; the venv is not in git, so the worktree has none and a relative
``.venv/bin/pytest`` is not found. An absolute path would work on this machine
only, and forge.toml is committed. ``git rev-parse --git-common-dir`` names the
main checkout's ``.git`` from the main checkout (``.git``, relative) and from
any of its worktrees (absolute), so ``"$(git rev-parse --git-common-dir)"/../.venv/bin/pytest``
is the main checkout's venv wherever the command runs, on any machine that
keeps its venv in the same place. The worktree's own code is still the one
tested: verify puts the worktree's sources first on ``PYTHONPATH``
(see :mod:`orchestra._sourcepath`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

import attrs

# Where projects keep their venv, in the order they are looked for after an
# active $VIRTUAL_ENV inside the project.
VENV_FOLDERS = (".venv", "venv")
GIT_COMMON_DIR = '"$(git rev-parse --git-common-dir)"'


@attrs.frozen
class Venv:
    """A virtualenv inside the project.

    Attributes:
        path: Its folder.
        from_git_top: Its folder relative to the top of the git checkout, or
            None outside a git checkout of its own (its tools are then named
            relative to the project root).
        relative: Its folder relative to the project root, as shown to users.
    """

    path: Path
    from_git_top: str | None
    relative: str

    def has(self, tool: str) -> bool:
        """Whether the venv holds an executable ``tool``."""
        return os.access(self.path / "bin" / tool, os.X_OK)

    def command(self, tool: str) -> str:
        """A shell word naming the venv's ``tool``, valid in the main checkout and its worktrees."""
        if self.from_git_top is None:
            return shlex.quote(f"{self.relative}/bin/{tool}")
        return GIT_COMMON_DIR + "/" + shlex.quote(f"../{self.from_git_top}/bin/{tool}")


def find_venv(root: Path, environ: Mapping[str, str]) -> Venv | None:
    """The project's venv: an active ``$VIRTUAL_ENV`` inside ``root``, else ``.venv``, ``venv``.

    A venv outside the project (pipx's, a global one) is not the project's: a
    cron job on another account would not have it.
    """
    resolved = root.resolve()
    candidates = [resolved / name for name in VENV_FOLDERS]
    active = environ.get("VIRTUAL_ENV", "")
    if active:
        candidates.insert(0, Path(active).resolve())
    for folder in candidates:
        if folder.is_relative_to(resolved) and (folder / "bin").is_dir():
            top = _git_top(resolved)
            return Venv(
                path=folder,
                from_git_top=None if top is None else folder.relative_to(top).as_posix(),
                relative=folder.relative_to(resolved).as_posix(),
            )
    return None


def _git_top(root: Path) -> Path | None:
    """The main checkout ``root`` lies in (a folder holding a ``.git`` folder), or None.

    In a linked worktree or a submodule ``.git`` is a file, and the common
    git folder is not next to this checkout's venv: None, and the venv is
    named relative to the root.
    """
    for folder in (root, *root.parents):
        marker = folder / ".git"
        if marker.is_dir():
            return folder
        if marker.exists():
            return None
    return None
