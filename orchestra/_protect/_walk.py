"""Finding a scope's protected paths: one walk of the disk, compiled matchers, pruned folders.

:class:`~._spec.ProtectSpec` matches one path at a time with a hand matcher,
which suits the agent hooks (one path, no regex to compile). The loop's
integrity check asks about every path under every entry, each iteration, and
Forge's own folders grow every iteration (``.forge/changes/<c>/runs/`` gains a
log per iteration). So here the spec is compiled once: one regex per
protection (``frozen``, then ``grows``, then ``exist``: the strictest wins, as
in ``mode_of``), and per entry the segments a folder must match for anything
below it to be covered. The tree is walked once from the entries' starting
folders, and a folder no entry can reach below (``runs/``, a change's
``protect/`` snapshots) is not entered at all: the cost of a manifest follows
what is protected, not what Forge has logged.

The paths found, and their protection, are exactly ``ProtectSpec.mode_of``'s
over the walks of ``_manifest``'s earlier per-entry walk;
``tests/test_protect_walk.py`` checks the two agree.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator

from ._spec import EXIST, FROZEN, GROWS, Entry, ProtectSpec, _glob_regex, normalize

_MODES = (FROZEN, GROWS, EXIST)


class _Reach:
    """Which folders one entry may cover something at or below."""

    __slots__ = ("any", "literal", "segments")

    def __init__(self, entry: Entry) -> None:
        body = entry.body
        self.literal = entry.literal
        # A character class may hold a ``/``: its segments cannot be split
        # apart, so only its literal prefix prunes (walking more is safe).
        self.any = not body or "[" in body
        self.segments: tuple[re.Pattern[str] | None, ...] = tuple(
            None if part == "**" else re.compile(_glob_regex(part), re.DOTALL)
            for part in body.split("/")
        )

    def below(self, parts: list[str], key: str) -> bool:
        """Whether the entry may cover the folder ``key`` (split: ``parts``) or inside it."""
        literal = self.literal
        if literal and not (
            key == literal or key.startswith(literal + "/") or literal.startswith(key + "/")
        ):
            return False
        if self.any:
            return True
        segments = self.segments
        for index, part in enumerate(parts):
            if index == len(segments):
                return True  # an ancestor is covered: so is all below it
            segment = segments[index]
            if segment is None:
                return True  # ``**``: anything deeper may match
            if segment.fullmatch(part) is None:
                return False
        return True


class CompiledSpec:
    """A protect spec compiled for walking a tree: see the module's docstring."""

    __slots__ = ("_modes", "_reach", "fold", "origins")

    def __init__(self, spec: ProtectSpec) -> None:
        self.fold = spec.fold
        self._modes: list[tuple[str, re.Pattern[str]]] = []
        for mode in _MODES:
            bodies = [entry.body for entry in spec.entries if entry.mode == mode]
            if not bodies:
                continue
            if "" in bodies:  # the root: everything
                pattern = ".*"
            else:
                pattern = "(?:" + "|".join(_glob_regex(body) for body in bodies) + ")(?:/.*)?"
            self._modes.append((mode, re.compile(pattern, re.DOTALL)))
        self._reach = tuple(_Reach(entry) for entry in spec.entries)
        # Where walks start: each entry's literal folder, less those inside another.
        starts = sorted({normalize(entry.origin) or "" for entry in spec.entries})
        origins: list[str] = []
        for start in starts:
            if not any(_under(start, kept) for kept in origins):
                origins.append(start)
        self.origins = tuple(origins)

    def mode_of(self, key: str) -> str | None:
        """The protection of ``key`` (normal, casefolded when the spec folds), or None."""
        if not key:
            return None
        for mode, regex in self._modes:
            if regex.fullmatch(key) is not None:
                return mode
        return None

    def enters(self, key: str) -> bool:
        """Whether anything inside the folder ``key`` may be protected."""
        parts = key.split("/") if key else []
        return any(reach.below(parts, key) for reach in self._reach)

    def walk(self, base: str) -> Iterator[tuple[str, str, str]]:
        """(absolute path, relative name, protection) of every protected path under ``base``."""
        fold = self.fold
        for start in self.origins:
            if _climbs_a_link(base, start):
                # A protected name reached through a symlinked folder is the link's
                # business, not ours: record nothing beyond the repository.
                continue
            start_path = os.path.join(base, start) if start else base
            try:
                info = os.lstat(start_path)
            except OSError:
                continue
            if start:
                mode = self.mode_of(start.casefold() if fold else start)
                if mode is not None:
                    yield start_path, start, mode
            if not stat.S_ISDIR(info.st_mode):
                continue
            stack = [(start_path, start)]
            while stack:
                folder, folder_relative = stack.pop()
                if not self.enters(folder_relative.casefold() if fold else folder_relative):
                    continue
                try:
                    items = sorted(os.scandir(folder), key=lambda item: item.name)
                except OSError:
                    continue
                for item in items:
                    if item.name == ".git" and not folder_relative:
                        continue
                    relative = f"{folder_relative}/{item.name}" if folder_relative else item.name
                    mode = self.mode_of(relative.casefold() if fold else relative)
                    if mode is not None:
                        yield item.path, relative, mode
                    if item.is_dir(follow_symlinks=False):
                        stack.append((item.path, relative))


def _under(path: str, folder: str) -> bool:
    return not folder or path == folder or path.startswith(folder + "/")


def _climbs_a_link(base: str, relative: str) -> bool:
    """Whether a folder on the way to ``relative`` (excluding itself) is a symlink."""
    parts = relative.split("/")[:-1] if relative else []
    current = base
    for part in parts:
        current = os.path.join(current, part)
        if os.path.islink(current):
            return True
    return False
