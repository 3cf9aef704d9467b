"""Which repository paths are protected, and how: the pure matching core.

A protect spec is two lists of entries from ``[protect]``:

- ``exist``: the path must not be deleted; edits are allowed.
- ``frozen``: the path must not change at all.

An entry is a path relative to the project root. A trailing ``/`` names a
directory and everything under it; an entry without one names a file or, when
it is a directory, its whole subtree; ``*`` and ``?`` match within one path
segment and ``**`` across segments. ``frozen`` wins when both lists match.

This module runs on every tool call of an agent (``forge guard``): it imports
nothing beyond ``re`` and does no I/O.
"""

from __future__ import annotations

import re

EXIST = "exist"
FROZEN = "frozen"

# Forge's own state, frozen whatever the policy says: the verdicts, circuits
# and spend that decide whether a loop may go on, and the human's waivers.
_FORGE_STATE_FILES = ("verify-attempts.yaml", "breaker.yaml", "spend.yaml")
WAIVERS_FILE = ".forge/secscan-waivers.yaml"


def forge_state_entries(change: str = "*", waivers: str = WAIVERS_FILE) -> tuple[str, ...]:
    """Forge's own frozen state, for one change or (``*``) every change."""
    files = tuple(f".forge/changes/{change}/{name}" for name in _FORGE_STATE_FILES)
    return (*files, waivers)


def normalize(path: str) -> str | None:
    """A relative path in canonical form (``a/b``), or None when it leaves the root.

    ``.`` segments and doubled slashes go; ``..`` is resolved lexically and a
    path that climbs above the root is None. The root itself is ``""``.
    """
    parts: list[str] = []
    for part in path.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", index + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[index + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


class Entry:
    """One ``[protect]`` entry, compiled."""

    __slots__ = ("literal", "mode", "regex", "text")

    def __init__(self, text: str, mode: str, *, fold: bool = False) -> None:
        self.text = text
        self.mode = mode
        body = normalize(text) or ""
        if fold:
            body = body.casefold()
        glob = any(c in body for c in "*?[")
        # The literal prefix: the directory every match lies under.
        literal = body
        if glob:
            head = re.split(r"[*?\[]", body, maxsplit=1)[0]
            literal = head.rsplit("/", 1)[0] if "/" in head else ""
        self.literal = literal
        # A match is the entry itself or anything under it.
        core = _glob_regex(body) if glob else re.escape(body)
        flags = re.IGNORECASE if fold else 0
        self.regex = re.compile(f"{core}(?:/.*)?" if body else ".*", flags | re.DOTALL)

    def covers(self, path: str) -> bool:
        return self.regex.fullmatch(path) is not None


class ProtectSpec:
    """The compiled ``[protect]`` lists.

    ``fold`` compares case-insensitively, for a repository on a filesystem
    that does (``SPECS/x`` is ``specs/x`` there).
    """

    __slots__ = ("entries", "fold")

    def __init__(
        self, exist: tuple[str, ...] = (), frozen: tuple[str, ...] = (), *, fold: bool = False
    ) -> None:
        self.fold = fold
        # Frozen first: it is the stricter mode and wins where both match.
        self.entries = tuple(Entry(text, FROZEN, fold=fold) for text in frozen) + tuple(
            Entry(text, EXIST, fold=fold) for text in exist
        )

    def _key(self, path: str) -> str | None:
        normal = normalize(path)
        if normal is None:
            return None
        return normal.casefold() if self.fold else normal

    def mode_of(self, path: str) -> str | None:
        """``frozen``, ``exist`` or None for a path relative to the root."""
        key = self._key(path)
        if key is None or key == "":
            return None
        for entry in self.entries:
            if entry.covers(key):
                return entry.mode
        return None

    def entry_for(self, path: str) -> Entry | None:
        key = self._key(path)
        if key is None or key == "":
            return None
        return next((entry for entry in self.entries if entry.covers(key)), None)
