"""The manifest: every protected path as found on disk (kind, size, times, content hash).

Taken before an iteration and again after it. Symlinks are recorded as links
(their target text), never followed, so a link cannot lead the walk out of the
repository. A file whose stat is unchanged since the previous manifest keeps
its recorded hash: when nothing changed, a check costs stats, not reads. A
file modified within a second of the previous manifest is hashed anyway (the
"racy git" case: a filesystem clock coarser than the edit). The content of a
small file read for its hash can be handed over with the hash, so that the
snapshot of it costs no second read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import ClassVar, Protocol

import attrs

from ._appendonly import Held, extend, read_held
from ._spec import EXIST, GROWS, ProtectSpec
from ._walk import CompiledSpec

FILE = "file"
DIRECTORY = "directory"
LINK = "symlink"
OTHER = "other"

# Edits this close to the previous manifest may share its timestamp: rehash them.
_RACY_NS = 1_000_000_000
_CHUNK = 1 << 20
# Files up to this size are read whole for their hash, and their snapshot may be
# kept in memory; larger ones are streamed, and snapshotted on disk.
SMALL_FILE = 256 * 1024


def _compile(scope: Scope) -> CompiledSpec:
    return CompiledSpec(scope.spec)


@attrs.frozen
class Node:
    """One protected path as it was on disk."""

    kind: str
    permissions: int
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    digest: str | None = None  # files: content hash
    target: str | None = None  # symlinks: what they point at

    def same_content(self, other: Node) -> bool:
        """Same kind, permissions, content and link target (times may differ)."""
        return (
            self.kind == other.kind
            and self.permissions == other.permissions
            and self.digest == other.digest
            and self.target == other.target
        )


class Tracked(Protocol):
    """Something whose protected paths a manifest records: a :class:`Scope`, or
    other changes' state (``_others.OtherChanges``).

    ``reads`` says whether its files are read for their hash; a tracked thing
    that says no (:class:`LiveDatabase`) is recorded from its stat alone.
    """

    @property
    def reads(self) -> bool:
        """Whether the files it walks are read for their hash."""
        ...

    def walk(self) -> Iterator[tuple[str, str, str]]:
        """(absolute path, display name, protection) of each path to record."""
        ...


@attrs.frozen
class Scope:
    """A tree whose protected paths are tracked: a base folder and its spec."""

    reads: ClassVar[bool] = True

    base: Path
    spec: ProtectSpec
    # The spec compiled for walking, once per scope (a check takes two manifests an iteration).
    compiled: CompiledSpec = attrs.field(
        init=False, eq=False, repr=False, default=attrs.Factory(_compile, takes_self=True)
    )

    def walk(self) -> Iterator[tuple[str, str, str]]:
        """Every protected path under the base (see :meth:`CompiledSpec.walk`)."""
        return self.compiled.walk(str(self.base))


@attrs.frozen
class LiveDatabase:
    """A sqlite database other Forge processes use while the check runs: it must exist.

    It is never opened. Sqlite's locks are POSIX locks, which belong to the
    process and the file: closing *any* descriptor of the file drops every
    lock this process holds on it, the idle connection that keeps the
    write-ahead log alive included. Another process closing its last
    connection then takes itself for the only user, checkpoints and deletes
    the log under the open connections here, whose next read fails with
    ``SQLITE_IOERR_SHORT_READ``. So its kind and stat are recorded (a
    deletion or a swap still shows) and there is no snapshot to restore.
    """

    reads: ClassVar[bool] = False

    path: Path
    name: str  # as the user wrote it: relative to the project

    def walk(self) -> Iterator[tuple[str, str, str]]:
        yield str(self.path), self.name, EXIST


@attrs.frozen
class Manifest:
    """Protected paths by absolute path, with the protection of each."""

    taken_at_ns: int
    nodes: Mapping[str, Node]
    protection: Mapping[str, str]
    # Display names, relative to the scope they were found in.
    names: Mapping[str, str]
    # What was hashed of each append-only file, for the next manifest to carry on.
    held: Mapping[str, Held] = attrs.field(factory=dict)
    settled: Settled | None = None


@attrs.frozen
class Settled:
    """The filesystem's own clock when a manifest began: a marker file's time, just set.

    A file on ``device`` last modified before ``before_ns`` cannot be modified
    again without its time moving: whatever writes it later is stamped at
    least ``before_ns``. So a hash taken then can be trusted while its stat
    stays the same, however coarse the filesystem's clock (git's rule for
    its index). Without a marker, a modification within ``_RACY_NS`` of the
    manifest is taken as possibly racing it.
    """

    device: int
    before_ns: int

    def holds(self, info: os.stat_result, taken_at_ns: int) -> bool:
        """Whether ``info``'s modification time is settled for a manifest begun so."""
        if info.st_dev == self.device:
            return info.st_mtime_ns < self.before_ns
        return info.st_mtime_ns < taken_at_ns - _RACY_NS


class _Read:
    """A state file as some check of this process last read it (see ``_SHARED``)."""

    __slots__ = ("content", "digest", "key", "settled", "taken_at_ns")

    def __init__(
        self,
        key: tuple[int, ...],
        digest: str,
        content: bytes | None,
        settled: Settled | None,
        taken_at_ns: int,
    ) -> None:
        self.key = key
        self.digest = digest
        self.content = content
        self.settled = settled
        self.taken_at_ns = taken_at_ns

    def still(self, key: tuple[int, ...], info: os.stat_result) -> bool:
        """Whether the file is still as read: the same stat, modified before the read began."""
        if key != self.key:
            return False
        if self.settled is not None:
            return self.settled.holds(info, self.taken_at_ns)
        return info.st_mtime_ns < self.taken_at_ns - _RACY_NS


# Forge's state files, as last read by any loop's check in this process. Every
# loop's check records every change's state (see _others), and each loop
# rewrites its own every iteration: without this, each of N loops would read
# each of the others' new files again, N times what one loop's check reads.
# Shared by content hash and stat, it is read once. Entries are immutable and
# replaced whole, so the worker threads of several loops share it without a lock.
_SHARED: dict[str, _Read] = {}
_SHARED_UNDER = os.sep + os.path.join(".forge", "changes") + os.sep


def file_digest(path: str) -> str:
    return read_digest(path)[0]


def content_digest(content: bytes) -> str:
    """The hash of ``content``, as :func:`file_digest` gives it for a file holding it."""
    return hashlib.blake2b(content, digest_size=20).hexdigest()


def read_digest(path: str, size: int = SMALL_FILE) -> tuple[str, bytes | None]:
    """A file's content hash and, when it is no larger than ``SMALL_FILE``, its content.

    ``size`` is what its stat said: a file that small is read with a buffer of
    about its size (one of ``SMALL_FILE`` would be allocated, for every
    few-byte state file); one that grew since its stat is read on.
    """
    want = min(size, SMALL_FILE) + 1
    # Unbuffered: a read of a regular file returns what was asked or what is
    # left, and no buffer of the file object's own is allocated.
    with open(path, "rb", buffering=0) as handle:
        head = handle.read(want)
        if len(head) == want and want <= SMALL_FILE:  # it grew since its stat
            head += handle.read(SMALL_FILE + 1 - want)
        if len(head) <= SMALL_FILE:
            return content_digest(head), head
        digest = hashlib.blake2b(head, digest_size=20)
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest(), None


def take_manifest(
    scopes: Iterable[Tracked],
    previous: Manifest | None = None,
    contents: dict[str, bytes] | None = None,
    *,
    trusted: bool = False,
    settled: Settled | None = None,
) -> Manifest:
    """Record every path the scopes protect, reusing unchanged hashes from ``previous``.

    When ``contents`` is given, the content of every small file read for its
    hash is added to it, by hash: exactly the bytes that were hashed (and the
    whole of an append-only file, held up to its limit). ``trusted`` says no
    agent ran since ``previous``: an append-only file is then read only past
    what ``previous`` hashed of it (see :mod:`._appendonly`). ``settled`` is
    the filesystem's clock as the manifest begins (see :class:`Settled`).
    """
    started = time.time_ns()
    now = (settled, started)
    nodes: dict[str, Node] = {}
    protection: dict[str, str] = {}
    names: dict[str, str] = {}
    held: dict[str, Held] = {}
    for scope in scopes:
        for path, relative, mode in scope.walk():
            if path in nodes:
                continue
            if not scope.reads:
                node = _stat_node(path)
            elif mode == GROWS:
                node = _grown_node(path, previous, contents, held, now, trusted=trusted)
            else:
                node = _node(path, previous, contents, now)
            if node is None:
                continue
            nodes[path] = node
            protection[path] = mode
            names[path] = relative
    return Manifest(
        taken_at_ns=started,
        nodes=nodes,
        protection=protection,
        names=names,
        held=held,
        settled=settled,
    )


def _node(
    path: str,
    previous: Manifest | None,
    contents: dict[str, bytes] | None,
    now: tuple[Settled | None, int],
) -> Node | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    kind = _kind(info.st_mode)
    if kind != FILE:
        return _unread_node(path, info, kind)
    earlier = previous.nodes.get(path) if previous is not None else None
    if earlier is not None and previous is not None and _unchanged(earlier, info, previous):
        return _node_of(info, kind, digest=earlier.digest)
    shared = _SHARED_UNDER in path
    key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)
    if shared and (seen := _SHARED.get(path)) is not None and seen.still(key, info):
        if seen.content is not None and contents is not None:
            contents[seen.digest] = seen.content
        return _node_of(info, kind, digest=seen.digest)
    try:
        digest, content = read_digest(path, info.st_size)
    except OSError:
        # Unreadable (permissions): record it without content; a later change of
        # its stat still shows, and a restore has nothing to restore from.
        return _node_of(info, kind)
    if content is not None and contents is not None:
        contents[digest] = content
    if shared:
        _SHARED[path] = _Read(key, digest, content, *now)
    return _node_of(info, kind, digest=digest)


def _stat_node(path: str) -> Node | None:
    """A path as its stat shows it, never opened (see :class:`LiveDatabase`)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return _unread_node(path, info, _kind(info.st_mode))


def _unread_node(path: str, info: os.stat_result, kind: str) -> Node:
    """A path recorded without reading it: a folder, a link (its target) or a file's stat."""
    if kind == LINK:
        with contextlib.suppress(OSError):
            return _node_of(info, kind, target=os.readlink(path))
    return _node_of(info, kind)


def _grown_node(
    path: str,
    previous: Manifest | None,
    contents: dict[str, bytes] | None,
    held: dict[str, Held],
    now: tuple[Settled | None, int],
    *,
    trusted: bool,
) -> Node | None:
    """An append-only file: hashed on from what ``previous`` held of it, else whole."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if _kind(info.st_mode) != FILE:
        return _node(path, previous, contents, now)
    earlier = previous.held.get(path) if previous is not None else None
    found = None
    if earlier is not None and previous is not None:
        node = previous.nodes.get(path)
        if node is not None and _unchanged(node, info, previous) and node.digest == earlier.digest:
            found = earlier
        else:
            found = extend(path, info, earlier, trusted=trusted)
    if found is None:
        found = read_held(path, info.st_ino)
    if found is None:  # past the limit or unreadable: as any file
        return _node(path, previous, contents, now)
    held[path] = found
    # Its bytes stay with the manifest (``held``): the snapshot store takes them from there.
    return _node_of(info, FILE, digest=found.digest)


def _node_of(
    info: os.stat_result, kind: str, digest: str | None = None, target: str | None = None
) -> Node:
    return Node(
        kind=kind,
        permissions=stat.S_IMODE(info.st_mode),
        size=info.st_size,
        mtime_ns=info.st_mtime_ns,
        ctime_ns=info.st_ctime_ns,
        inode=info.st_ino,
        digest=digest,
        target=target,
    )


def _unchanged(earlier: Node, info: os.stat_result, previous: Manifest) -> bool:
    return (
        earlier.kind == FILE
        and earlier.digest is not None
        and (earlier.size, earlier.mtime_ns, earlier.ctime_ns, earlier.inode)
        == (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
        and (
            previous.settled.holds(info, previous.taken_at_ns)
            if previous.settled is not None
            else info.st_mtime_ns < previous.taken_at_ns - _RACY_NS
        )
    )


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return LINK
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if stat.S_ISREG(mode):
        return FILE
    return OTHER
