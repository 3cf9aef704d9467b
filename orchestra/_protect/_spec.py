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
# Append-only: may grow at its end, never shrink, vanish or change what it held
# (every change's timeline: the log of record).
GROWS = "grows"
CHANGES = ".forge/changes"
TIMELINE = "timeline.jsonl"
TIMELINES = f"{CHANGES}/*/{TIMELINE}"
FORGE_STATE = "Forge's own state"
"""The rule of a frozen entry under ``.forge/``: Forge's own state, not the project's list."""

# Forge's own state, frozen whatever the policy says: the verdicts, circuits
# and spend that decide whether a loop may go on, the human's waivers, and the
# bash that puts Forge's guard in front of an agent's shell (shell_guard).
# Guarded in every change's folder (another loop's too).
FORGE_STATE_FILES = (
    "verify-attempts.yaml",
    "breaker.yaml",
    "spend.yaml",
    "secscan-markers.json",
    "shell-guard/bash",
)
# A person's requests of a change's loop: its pause or stop, its guidance (an
# agent's git clean would lift a pause). Guarded in the loop's own folder; in
# other changes' folders the sandbox keeps them out of an agent's reach, as
# looking them up there, for every other change at every iteration, cost a
# fifth of a supervised iteration's CPU (bench/supervisor_overhead.py, 20 loops).
PERSON_FILES = ("controls.yaml", "guidance.yaml")
WAIVERS_FILE = ".forge/secscan-waivers.yaml"
# Forge's state that must not appear during an iteration either, unless Forge
# itself wrote it (its journal says so): a waivers file or an open breaker an
# agent creates is its decision, not a person's. The shell guard's bash is not
# among them: Forge writes it as the executor starts, after the manifest.
SEALED_STATE_FILES = (
    *(name for name in FORGE_STATE_FILES if name != "shell-guard/bash"),
    *PERSON_FILES,
)


def sealed_state(name: str, waivers: str = WAIVERS_FILE) -> bool:
    """Whether ``name`` (relative to the project) is Forge state that must not appear."""
    if name == normalize(waivers):
        return True
    prefix = f"{CHANGES}/"
    if not name.startswith(prefix):
        return False
    change, _, file = name[len(prefix) :].partition("/")
    return bool(change) and file in SEALED_STATE_FILES


def forge_state_entries(change: str = "*", waivers: str = WAIVERS_FILE) -> tuple[str, ...]:
    """Forge's own frozen state, for one change or (``*``) every change."""
    files = tuple(f"{CHANGES}/{change}/{name}" for name in (*FORGE_STATE_FILES, *PERSON_FILES))
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
        # ``**`` is special only as a whole segment; elsewhere it is ``*``.
        whole = index == 0 or pattern[index - 1] == "/"
        if whole and pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if whole and pattern.startswith("**", index) and index + 2 == len(pattern):
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


def _segment_match(pattern: str, name: str) -> bool:
    """``*`` and ``?`` within one path segment (a hand matcher: compiling a regex
    per entry costs the agent hooks more than all their other work)."""
    p = n = 0
    star, mark = -1, 0
    while n < len(name):
        if p < len(pattern) and pattern[p] in ("?", name[n]):
            p += 1
            n += 1
        elif p < len(pattern) and pattern[p] == "*":
            star, mark = p, n
            p += 1
        elif star != -1:
            p = star + 1
            mark += 1
            n = mark
        else:
            return False
    while p < len(pattern) and pattern[p] == "*":
        p += 1
    return p == len(pattern)


def _parts_match(pattern: list[str], parts: list[str]) -> bool:
    """Segments against segments; a ``**`` segment matches any number of them."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        if not rest:  # a trailing ``/**``: something below, not the folder itself
            return bool(parts)
        return any(_parts_match(rest, parts[index:]) for index in range(len(parts) + 1))
    return bool(parts) and _segment_match(head, parts[0]) and _parts_match(rest, parts[1:])


class Entry:
    """One ``[protect]`` entry, ready to match paths (already casefolded when ``fold``)."""

    __slots__ = ("body", "glob", "literal", "mode", "origin", "pattern", "regex", "rule", "text")

    def __init__(self, text: str, mode: str, *, fold: bool = False) -> None:
        self.text = text
        self.mode = mode
        written = normalize(text) or ""
        # Which rule protects what it covers: ``exist``, ``frozen``, or Forge's own state.
        own = mode == FROZEN and (written == ".forge" or written.startswith(".forge/"))
        self.rule = FORGE_STATE if own else mode
        body = written.casefold() if fold else written
        self.body = body
        self.glob = any(c in body for c in "*?[")
        # The literal prefix: the directory every match lies under, as written
        # (``origin``: where a walk of the disk starts) and as matched.
        origin = written
        if self.glob:
            head = re.split(r"[*?\[]", written, maxsplit=1)[0]
            origin = head.rsplit("/", 1)[0] if "/" in head else ""
        self.origin = origin
        self.literal = origin.casefold() if fold else origin
        self.pattern = body.split("/")
        # Character classes are rare: only they pay for a regex.
        self.regex = re.compile(f"{_glob_regex(body)}(?:/.*)?", re.DOTALL) if "[" in body else None

    def covers(self, path: str) -> bool:
        """Whether ``path`` is this entry or lies under it."""
        body = self.body
        if not body:
            return True
        if not self.glob:
            return path == body or path.startswith(body + "/")
        if self.regex is not None:
            return self.regex.fullmatch(path) is not None
        parts = path.split("/")
        return any(_parts_match(self.pattern, parts[:end]) for end in range(1, len(parts) + 1))


class ProtectSpec:
    """The compiled ``[protect]`` lists.

    ``fold`` compares case-insensitively, for a repository on a filesystem
    that does (``SPECS/x`` is ``specs/x`` there).
    """

    __slots__ = ("entries", "fold")

    def __init__(
        self,
        exist: tuple[str, ...] = (),
        frozen: tuple[str, ...] = (),
        *,
        grows: tuple[str, ...] = (),
        fold: bool = False,
    ) -> None:
        self.fold = fold
        # Strictest first: it wins where several match.
        self.entries = (
            tuple(Entry(text, FROZEN, fold=fold) for text in frozen)
            + tuple(Entry(text, GROWS, fold=fold) for text in grows)
            + tuple(Entry(text, EXIST, fold=fold) for text in exist)
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
