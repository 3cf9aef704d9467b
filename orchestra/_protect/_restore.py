"""Snapshots of protected content, and putting harmed paths back.

Content is kept by hash, so a file that did not change between iterations is
kept once, not once per iteration. Small files are kept in memory (the bytes
the manifest hashed, handed over without a second read), where no agent can
reach them; larger ones, and whatever exceeds the memory budget, are copied
to a folder (``<digest>``). Either way only what the newest manifest refers to
is kept. A restore never
deletes what the agent made: whatever stands in a harmed path's way (a file
where a directory was, a file added to a frozen directory) is moved to a
quarantine folder first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import BinaryIO

import attrs

from ._appendonly import Held
from ._diff import ADDED, Violation
from ._manifest import (
    DIRECTORY,
    FILE,
    LINK,
    SMALL_FILE,
    Manifest,
    Node,
    content_digest,
    file_digest,
    read_digest,
)

# At most this much protected content is held in memory; the rest goes to disk.
MEMORY_BUDGET = 64 * 1024 * 1024


@attrs.frozen
class Repair:
    """What was done about one violation."""

    violation: Violation
    action: str  # restored | removed (an addition, moved aside) | not restored: <why>
    quarantined: str | None = None

    @property
    def restored(self) -> bool:
        return not self.action.startswith("not restored")

    def describe(self) -> str:
        where = f" (moved to {self.quarantined})" if self.quarantined else ""
        return f"{self.violation.describe()} — {self.action}{where}"


@attrs.define
class SnapshotStore:
    """Content-addressed copies of protected files: small ones in memory, the rest on disk."""

    folder: Path
    memory_budget: int = MEMORY_BUDGET
    _memory: dict[str, bytes] = attrs.field(factory=dict, init=False, repr=False)
    # Append-only files' bytes, held by the kept manifest itself (see _appendonly).
    _held: dict[str, Held] = attrs.field(factory=dict, init=False, repr=False)
    # Blobs this store wrote to the folder and has not dropped since.
    _written: set[str] = attrs.field(factory=set, init=False, repr=False)

    def blob(self, digest: str) -> Path:
        return self.folder / digest

    def in_memory(self, digest: str) -> bytes | None:
        """The content kept in memory for ``digest``, if it is kept there."""
        found = self._memory.get(digest)
        if found is None and (held := self._held.get(digest)) is not None:
            return held.content()
        return found

    def keep(self, manifest: Manifest, contents: Mapping[str, bytes] | None = None) -> None:
        """Hold the content of every protected file of ``manifest``, and only that.

        ``contents`` is content already read, by hash (see ``take_manifest``):
        it is taken as it is, not read again. Content kept for an earlier
        manifest is reused; what ``manifest`` no longer refers to is dropped.
        """
        given = contents or {}
        memory: dict[str, bytes] = {}
        self._held = {held.digest: held for held in manifest.held.values()}
        used = 0
        for path, node in manifest.nodes.items():
            digest = node.digest
            if node.kind != FILE or digest is None or digest in memory or digest in self._held:
                continue
            content = self._memory.get(digest)
            if content is None:
                content = given.get(digest)
            if (
                content is None
                and node.size <= SMALL_FILE
                and used + node.size <= self.memory_budget
            ):
                content = _read_small(path, digest)
            if content is not None and used + len(content) <= self.memory_budget:
                memory[digest] = content
                used += len(content)
            else:
                self._keep_on_disk(path, digest, content)
        self._memory = memory
        # Large content of earlier manifests goes now, not at the end of the
        # loop; only blobs written here: what else is in the folder is prune's.
        if self._written:
            wanted = {n.digest for n in manifest.nodes.values() if n.digest is not None}
            for digest in self._written - wanted:
                with contextlib.suppress(OSError):
                    self.blob(digest).unlink()
            self._written &= wanted

    def _keep_on_disk(self, path: str, digest: str, content: bytes | None) -> None:
        blob = self.blob(digest)
        if blob.exists():
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = blob.with_name(f".{blob.name}.tmp")
        try:
            if content is not None:
                tmp.write_bytes(content)
            else:
                shutil.copyfile(path, tmp)
            # The file may have changed since it was hashed: keep only a true copy.
            if file_digest(str(tmp)) == digest:
                os.replace(tmp, blob)
                self._written.add(digest)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()

    def prune(self, keep: Manifest) -> None:
        """Drop blobs on disk that ``keep`` no longer refers to."""
        wanted = {n.digest for n in keep.nodes.values() if n.digest is not None}
        if not self.folder.is_dir():
            return
        for blob in self.folder.iterdir():
            if blob.name not in wanted:
                with contextlib.suppress(OSError):
                    blob.unlink()


def _read_small(path: str, digest: str) -> bytes | None:
    """The file's content if it is still small and still hashes to ``digest``."""
    try:
        found, content = read_digest(path)
    except OSError:
        return None
    return content if found == digest else None


def repair(
    found: Sequence[Violation], before: Manifest, store: SnapshotStore, quarantine: Path
) -> list[Repair]:
    """Put every harmed path back as ``before`` recorded it."""
    repairs: list[Repair] = []
    # Additions first, deepest first; then restorations, shallowest first, so
    # that folders exist before the files that go in them.
    additions = sorted((v for v in found if v.harm == ADDED), key=lambda v: -v.path.count("/"))
    restorations = sorted((v for v in found if v.harm != ADDED), key=lambda v: v.path.count("/"))
    for violation in additions:
        repairs.append(_quarantine_addition(violation, quarantine))
    for violation in restorations:
        repairs.append(_restore(violation, before.nodes[violation.path], store, quarantine))
    return repairs


def _quarantine_addition(violation: Violation, quarantine: Path) -> Repair:
    try:
        moved = _move_aside(violation.path, violation.name, quarantine)
    except OSError as exc:
        return Repair(violation, f"not restored: cannot move it away ({exc.strerror or exc})")
    return Repair(violation, "removed", quarantined=moved)


def _restore(violation: Violation, node: Node, store: SnapshotStore, quarantine: Path) -> Repair:
    path = violation.path
    moved: str | None = None
    try:
        _make_parents(path, violation.name, quarantine)
        in_place = node.kind == DIRECTORY and os.path.isdir(path) and not os.path.islink(path)
        if os.path.lexists(path) and not in_place:
            moved = _move_aside(path, violation.name, quarantine)
        if node.kind == DIRECTORY:
            os.makedirs(path, exist_ok=True)
            os.chmod(path, node.permissions)
        elif node.kind == LINK and node.target is not None:
            os.symlink(node.target, path)
        elif node.kind == FILE and node.digest is not None:
            content = store.in_memory(node.digest)
            if content is not None:
                if content_digest(content) != node.digest:
                    return Repair(violation, "not restored: its snapshot was altered", moved)
                _put_back(path, node.permissions, lambda out: out.write(content))
            else:
                blob = store.blob(node.digest)
                if not blob.is_file():
                    return Repair(violation, "not restored: its snapshot is missing", moved)
                if file_digest(str(blob)) != node.digest:
                    return Repair(violation, "not restored: its snapshot was altered", moved)
                _put_back(path, node.permissions, partial(_copy_from, blob))
        else:
            return Repair(violation, "not restored: nothing to restore it from", moved)
    except OSError as exc:
        return Repair(violation, f"not restored: {exc.strerror or exc}", moved)
    return Repair(violation, "restored", quarantined=moved)


def _copy_from(blob: Path, out: BinaryIO) -> None:
    with open(blob, "rb") as source:
        shutil.copyfileobj(source, out)


def _put_back(path: str, permissions: int, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` through a fresh temporary file (never an existing name, which
    could be a symlink planted to redirect the write), then rename it in place."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".forge-restore-")
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
            os.fchmod(out.fileno(), permissions)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _make_parents(path: str, name: str, quarantine: Path) -> None:
    """Make the folders between the project and ``path``, moving aside what is not one.

    A symlink standing where a folder was is moved aside too: writing through
    it would restore the file somewhere else entirely.
    """
    base = path[: len(path) - len(name)].rstrip("/")
    parts = name.split("/")[:-1]
    current = base
    for index, part in enumerate(parts):
        current = os.path.join(current, part)
        if os.path.islink(current) or (os.path.lexists(current) and not os.path.isdir(current)):
            _move_aside(current, "/".join(parts[: index + 1]), quarantine)
        if not os.path.lexists(current):
            os.mkdir(current)


def _move_aside(path: str, name: str, quarantine: Path) -> str:
    target = quarantine / name
    suffix = 1
    while os.path.lexists(target):
        target = quarantine / f"{name}.{suffix}"
        suffix += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, target)
    return str(target)
