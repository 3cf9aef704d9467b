"""A working tree's state as one ``git status`` reports it.

One ``git status --porcelain=v2 -z --branch --untracked-files=all
--no-renames`` tells everything an iteration needs about a quiet repository:
the HEAD commit (from the ``# branch.oid`` header, None on an unborn branch)
and every path that differs from HEAD, tracked or untracked (ignored files
are not listed). :class:`TreeStatus` is that answer, parsed, with paths made
relative to the folder Forge works in (which may be a subfolder of the
repository) and Forge's own ``.forge/`` left out.

Comparing two statuses (:func:`tree_delta`) says which paths may have changed
between them; only when HEAD moved does that take another git command.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

import attrs

from ._git import git_output
from ._state import STATE_DIR

STATUS_ARGS = (
    "status",
    "--porcelain=v2",
    "-z",
    "--branch",
    "--no-ahead-behind",  # the upstream comparison can be slow and is never used
    "--untracked-files=all",
    "--no-renames",
)
_NO_MODE = "000000"


@attrs.frozen
class PathStatus:
    """One path that differs from HEAD.

    Attributes:
        path: Relative to the workdir, ``/``-separated (a trailing ``/`` marks
            an untracked nested repository).
        code: git's two-letter code (``.M``, ``A.``, ``D.``, ``UU``; ``??`` for
            an untracked file).
        in_index: Whether the index holds the path (git lists it as tracked).
        untracked: Whether git lists it as untracked (and not ignored).
        head_mode: Its mode in HEAD; None when HEAD does not hold it.
        head_oid: Its object name in HEAD; None when HEAD does not hold it.
        submodule: git's submodule field (``N...`` for an ordinary file).
    """

    path: str
    code: str
    in_index: bool
    untracked: bool = False
    head_mode: str | None = None
    head_oid: str | None = None
    submodule: str = "N..."

    @property
    def in_head(self) -> bool:
        """Whether the HEAD commit holds this path."""
        return self.head_oid is not None


@attrs.frozen
class TreeStatus:
    """A working tree as one ``git status`` saw it.

    Attributes:
        workdir: The folder the status was taken in.
        work_tree: Whether ``workdir`` is inside a git work tree at all; when
            not, the other fields are empty.
        prefix: ``workdir``'s path below the top of the repository (``""`` at
            the top, else ending in ``/``).
        head: The HEAD commit; None on an unborn branch.
        branch: The branch checked out; None when HEAD is detached.
        entries: The paths that differ from HEAD, sorted by path.
    """

    workdir: Path
    work_tree: bool
    prefix: str = ""
    head: str | None = None
    branch: str | None = None
    entries: tuple[PathStatus, ...] = ()
    _by_path: Mapping[str, PathStatus] = attrs.field(
        init=False, eq=False, repr=False, default=MappingProxyType({})
    )

    def __attrs_post_init__(self) -> None:
        # A lookup table made once; frozen classes set it through object.
        by_path = MappingProxyType({entry.path: entry for entry in self.entries})
        object.__setattr__(self, "_by_path", by_path)

    @classmethod
    def outside(cls, workdir: Path) -> TreeStatus:
        """The status of a folder that is not in a git work tree."""
        return cls(workdir=workdir, work_tree=False)

    @property
    def paths(self) -> frozenset[str]:
        """Every path that differs from HEAD."""
        return frozenset(self._by_path)

    def get(self, path: str) -> PathStatus | None:
        """The entry of ``path``; None when it does not differ from HEAD."""
        return self._by_path.get(path)

    def __iter__(self) -> Iterator[PathStatus]:
        return iter(self.entries)


@attrs.frozen
class TreeDelta:
    """The paths that may have changed between two statuses of one work tree.

    Attributes:
        listed: Paths git lists now (tracked, or untracked and not ignored).
        unlisted: Paths git does not list now (deleted, dropped from the
            index, or untracked and now ignored).
    """

    listed: frozenset[str]
    unlisted: frozenset[str]

    @property
    def paths(self) -> frozenset[str]:
        """Every path that may have changed."""
        return self.listed | self.unlisted


def work_tree_prefix(workdir: Path) -> str | None:
    """``workdir``'s path below the top of its repository; None outside a work tree."""
    out = git_output(workdir, "rev-parse", "--is-inside-work-tree", "--show-prefix")
    if out is None:
        return None
    lines = os.fsdecode(out).split("\n")
    if lines[0].strip() != "true":
        return None  # inside a .git folder, say
    return lines[1] if len(lines) > 1 else ""


def read_status(workdir: Path, prefix: str | None = None) -> TreeStatus | None:
    """The status of ``workdir`` now.

    Args:
        workdir: The folder to read.
        prefix: Its :func:`work_tree_prefix`, when the caller already knows it
            (else it costs one more git command).

    Returns:
        The status; :meth:`TreeStatus.outside` when ``workdir`` is not in a
        work tree; None when git did not answer.
    """
    if prefix is None:
        prefix = work_tree_prefix(workdir)
        if prefix is None:
            return TreeStatus.outside(workdir)
    out = git_output(workdir, *STATUS_ARGS, "--", ".", f":(exclude){STATE_DIR}")
    if out is None:
        return None
    return parse_status(out, workdir=workdir, prefix=prefix)


def parse_status(raw: bytes, *, workdir: Path, prefix: str = "") -> TreeStatus:
    """Parse ``git status --porcelain=v2 -z --branch`` output (run in ``workdir``).

    Paths outside ``prefix`` (the workdir's place in the repository) and
    Forge's own ``.forge/`` are left out. A path git reports twice (removed
    from the index yet still on disk: ``D.`` and ``??``) becomes one entry.

    Raises:
        ValueError: a record that is not porcelain v2.
    """
    head: str | None = None
    branch: str | None = None
    found: dict[str, PathStatus] = {}
    records = iter(raw.split(b"\0"))
    for record in records:
        if not record:
            continue
        line = os.fsdecode(record)
        kind = line[:2]
        if kind == "# ":
            head, branch = _header(line, head, branch)
            continue
        if kind == "? ":
            _add(found, prefix, PathStatus(line[2:], "??", in_index=False, untracked=True))
        elif kind == "! ":
            continue  # ignored files: never asked for, never wanted
        elif kind == "1 ":
            fields = _fields(line, 9)
            _, code, sub, head_mode, _, _, head_oid, _, path = fields
            in_head = head_mode != _NO_MODE
            entry = PathStatus(
                path,
                code,
                in_index=code[0] != "D",
                head_mode=head_mode if in_head else None,
                head_oid=head_oid if in_head else None,
                submodule=sub,
            )
            _add(found, prefix, entry)
        elif kind == "2 ":
            fields = _fields(line, 10)
            _, code, sub, head_mode, _, _, head_oid, _, _, path = fields
            original = os.fsdecode(next(records, b""))
            # The new name is not in HEAD; the old one is, and left the index.
            _add(found, prefix, PathStatus(path, code, in_index=True, submodule=sub))
            gone = PathStatus(
                original,
                "D.",
                in_index=False,
                head_mode=head_mode,
                head_oid=head_oid,
                submodule=sub,
            )
            _add(found, prefix, gone)
        elif kind == "u ":
            fields = _fields(line, 11)
            _, code, sub, _, ours_mode, _, _, _, ours_oid, _, path = fields
            # Stage 2 ("ours") is HEAD's side in a merge, rebase or cherry-pick.
            in_head = ours_mode != _NO_MODE
            entry = PathStatus(
                path,
                code,
                in_index=True,
                head_mode=ours_mode if in_head else None,
                head_oid=ours_oid if in_head else None,
                submodule=sub,
            )
            _add(found, prefix, entry)
        else:
            raise ValueError(f"not a porcelain v2 status record: {line[:80]!r}")
    entries = tuple(found[path] for path in sorted(found))
    return TreeStatus(workdir, True, prefix, head, branch, entries)


def _header(line: str, head: str | None, branch: str | None) -> tuple[str | None, str | None]:
    name, _, value = line[2:].partition(" ")
    if name == "branch.oid":
        head = None if value == "(initial)" else value
    elif name == "branch.head":
        branch = None if value == "(detached)" else value
    return head, branch


def _fields(line: str, count: int) -> list[str]:
    fields = line.split(" ", count - 1)
    if len(fields) != count:
        raise ValueError(f"a status record with {len(fields)} fields: {line[:80]!r}")
    return fields


def _add(found: dict[str, PathStatus], prefix: str, entry: PathStatus) -> None:
    if not entry.path.startswith(prefix):
        return  # outside the workdir (a pathspec keeps these out; this keeps it true)
    path = entry.path[len(prefix) :]
    if not path or path.split("/", 1)[0] == STATE_DIR:
        return
    entry = attrs.evolve(entry, path=path)
    earlier = found.get(path)
    if earlier is not None:
        entry = PathStatus(
            path,
            earlier.code if earlier.code != "??" else entry.code,
            in_index=earlier.in_index or entry.in_index,
            untracked=earlier.untracked or entry.untracked,
            head_mode=earlier.head_mode or entry.head_mode,
            head_oid=earlier.head_oid or entry.head_oid,
            submodule=earlier.submodule,
        )
    found[path] = entry


# Commits never change, so what changed between two of them is kept (a few
# pairs: a loop asks about the last move only, the probe and the scan alike).
# Loops probe from worker threads: the table is shared, so it is locked.
_COMMITTED: dict[tuple[str, str, str], Mapping[str, str]] = {}
_COMMITTED_KEPT = 16
_COMMITTED_LOCK = threading.Lock()


def committed_changes(workdir: Path, old: str, new: str) -> Mapping[str, str] | None:
    """The paths under ``workdir`` that differ between commits ``old`` and ``new``.

    Returns:
        Each path (relative to ``workdir``) with git's letter: ``A`` added in
        ``new``, ``D`` deleted, ``M`` modified, ``T`` type changed. None when
        git did not answer.
    """
    key = (str(workdir), old, new)
    with _COMMITTED_LOCK:
        known = _COMMITTED.get(key)
    if known is not None:
        return known
    out = git_output(
        workdir, "diff", "--name-status", "-z", "--no-renames", "--relative", old, new, "--"
    )
    if out is None:
        return None
    fields = [os.fsdecode(field) for field in out.split(b"\0")]
    changes = MappingProxyType(
        {path: letter[:1] for letter, path in zip(fields[::2], fields[1::2], strict=False) if path}
    )
    with _COMMITTED_LOCK:
        if len(_COMMITTED) >= _COMMITTED_KEPT:
            _COMMITTED.pop(next(iter(_COMMITTED)))
        _COMMITTED[key] = changes
    return changes


def tree_delta(before: TreeStatus, after: TreeStatus) -> TreeDelta | None:
    """What may have changed from ``before`` to ``after`` (two statuses of one workdir).

    A path may have changed when it differs from HEAD in either status, or
    when HEAD moved and the commits differ in it (one ``git diff`` then).
    None when that cannot be told: either status is outside a work tree, they
    are of different folders, a branch was born, or git did not answer.
    """
    if not (before.work_tree and after.work_tree):
        return None
    if before.workdir != after.workdir or before.prefix != after.prefix:
        return None
    committed: Mapping[str, str] = {}
    if before.head != after.head:
        if before.head is None or after.head is None:
            return None  # every file of the new commit would count: list them all
        found = committed_changes(after.workdir, before.head, after.head)
        if found is None:
            return None
        committed = {p: s for p, s in found.items() if p.split("/", 1)[0] != STATE_DIR}
    listed: set[str] = set()
    unlisted: set[str] = set()
    for path in before.paths | after.paths | set(committed):
        (listed if _listed_now(path, before, after, committed) else unlisted).add(path)
    return TreeDelta(frozenset(listed), frozenset(unlisted))


def _listed_now(
    path: str, before: TreeStatus, after: TreeStatus, committed: Mapping[str, str]
) -> bool:
    """Whether ``git ls-files --cached --others --exclude-standard`` lists ``path`` now."""
    now = after.get(path)
    if now is not None:
        return now.in_index or now.untracked
    # Not listed by the status: the path is as HEAD has it, so listed iff HEAD holds it.
    if path in committed:
        return committed[path] != "D"
    earlier = before.get(path)
    return earlier is not None and earlier.in_head
