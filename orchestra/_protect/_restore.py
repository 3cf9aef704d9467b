"""Snapshots of protected content, and putting harmed paths back.

Content is kept by hash (``blobs/<digest>``), so a file that did not change
between iterations is copied once, not once per iteration. A restore never
deletes what the agent made: whatever stands in a harmed path's way (a file
where a directory was, a file added to a frozen directory) is moved to a
quarantine folder first.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs

from ._diff import ADDED, Violation
from ._manifest import DIRECTORY, FILE, LINK, Manifest, Node, file_digest


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


@attrs.frozen
class SnapshotStore:
    """Content-addressed copies of protected files under one folder."""

    folder: Path

    def blob(self, digest: str) -> Path:
        return self.folder / digest

    def keep(self, manifest: Manifest) -> None:
        """Copy every protected file whose content is not stored yet."""
        for path, node in manifest.nodes.items():
            if node.kind != FILE or node.digest is None:
                continue
            blob = self.blob(node.digest)
            if blob.exists():
                continue
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = blob.with_name(f".{blob.name}.tmp")
            try:
                shutil.copyfile(path, tmp)
                # The file may have changed since it was hashed: keep only a true copy.
                if file_digest(str(tmp)) == node.digest:
                    os.replace(tmp, blob)
            finally:
                with contextlib.suppress(OSError):
                    tmp.unlink()

    def prune(self, keep: Manifest) -> None:
        """Drop blobs that ``keep`` no longer refers to."""
        wanted = {n.digest for n in keep.nodes.values() if n.digest is not None}
        if not self.folder.is_dir():
            return
        for blob in self.folder.iterdir():
            if blob.name not in wanted:
                with contextlib.suppress(OSError):
                    blob.unlink()


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
            blob = store.blob(node.digest)
            if not blob.is_file():
                return Repair(violation, "not restored: its snapshot is missing", moved)
            if file_digest(str(blob)) != node.digest:
                return Repair(violation, "not restored: its snapshot was altered", moved)
            _put_back(blob, path, node.permissions)
        else:
            return Repair(violation, "not restored: nothing to restore it from", moved)
    except OSError as exc:
        return Repair(violation, f"not restored: {exc.strerror or exc}", moved)
    return Repair(violation, "restored", quarantined=moved)


def _put_back(blob: Path, path: str, permissions: int) -> None:
    """Copy ``blob`` to ``path`` through a fresh temporary file (never an existing name,
    which could be a symlink planted to redirect the write), then rename it in place."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".forge-restore-")
    try:
        with os.fdopen(fd, "wb") as out, open(blob, "rb") as source:
            shutil.copyfileobj(source, out)
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
