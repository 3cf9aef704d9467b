"""The protected paths that exist now: ``[protect]``'s entries found on disk.

A sandbox mounts what exists when the iteration starts. A glob matches the
files and folders there then; a file created later under a frozen glob is no
mount point, and the check after the iteration finds it instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from .._protect import EXIST, FROZEN, Entry, ProtectSpec

# Never walked for a glob: git's own store, and Forge's (read-only in the sandbox).
_NOT_WALKED = frozenset({".git", ".forge"})


@attrs.frozen
class Found:
    """The protected paths under one folder, absolute, by protection."""

    frozen: tuple[Path, ...] = ()
    exist: tuple[Path, ...] = ()


def protected_paths(base: Path, spec: ProtectSpec) -> Found:
    """Every path under ``base`` that ``spec`` protects and that exists (symlinks aside).

    A symlink is never mounted (bubblewrap would mount what it points to):
    the check after the iteration guards it. Each path takes the protection
    :meth:`ProtectSpec.mode_of` gives it, so frozen wins where both match.
    """
    frozen: set[str] = set()
    exist: set[str] = set()
    for entry in spec.entries:
        for relative in _matches(base, entry):
            mode = spec.mode_of(relative)
            if mode == FROZEN:
                frozen.add(relative)
            elif mode == EXIST:
                exist.add(relative)
    return Found(
        frozen=tuple(base / p for p in sorted(frozen)),
        exist=tuple(base / p for p in sorted(exist)),
    )


def _matches(base: Path, entry: Entry) -> Iterator[str]:
    """Relative paths ``entry`` covers under ``base`` (a frozen folder: itself, not its content)."""
    if entry.mode not in (EXIST, FROZEN) or not entry.body:
        return
    whole_tree = entry.mode == EXIST  # every path beneath must exist: each is a mount
    if not entry.glob:
        target = base / entry.origin
        if not os.path.lexists(target) or os.path.islink(target):
            return
        yield entry.origin
        if whole_tree and target.is_dir():
            yield from _below(base, entry.origin, None)
        return
    start = base / entry.origin if entry.origin else base
    if not start.is_dir() or start.is_symlink():
        return
    yield from _below(base, entry.origin, entry, prune=not whole_tree)


def _below(base: Path, origin: str, entry: Entry | None, *, prune: bool = False) -> Iterator[str]:
    """Paths below ``origin`` (those ``entry`` covers, when given); symlinks left out."""
    top = base / origin if origin else base
    for folder, dirs, files in os.walk(top, followlinks=False):
        relative_folder = os.path.relpath(folder, base).replace(os.sep, "/")
        prefix = "" if relative_folder == "." else relative_folder + "/"
        if not prefix:
            dirs[:] = [name for name in dirs if name not in _NOT_WALKED]
        kept_dirs = []
        for name in sorted(dirs):
            path = prefix + name
            if os.path.islink(os.path.join(folder, name)):
                continue
            if entry is None or entry.covers(path):
                yield path
                if prune:
                    continue  # a frozen folder is one read-only mount: its content with it
            kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(files):
            path = prefix + name
            if os.path.islink(os.path.join(folder, name)):
                continue
            if entry is None or entry.covers(path):
                yield path
