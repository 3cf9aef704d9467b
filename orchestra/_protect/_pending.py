"""The check a loop armed and has not yet made, kept on disk so that a kill of Forge cannot drop it.

A loop arms its integrity check before each iteration and makes it after.
Should Forge die in between (``kill -9``, the machine's out-of-memory
killer, an agent killing its own loop), the in-memory manifest and
snapshots die with it, and whatever the agent then does to the protected
paths would stand. So arming also writes this record beside the change's
snapshots (``.forge/changes/<change>/protect/pending.json``): the armed
manifest (every protected path's kind, permissions and content hash), the
forge-writes journal positions, and the iteration it was armed for. The
protected files' content is kept on disk too (the snapshot store's blobs).
The check removes the record once it is made; the next loop on the change
that finds one finishes the check the dead loop would have made (restore
and record) before its own first iteration.

An append-only file (a timeline) is recorded by size and hash: it is kept
to have only grown, but its content is not copied at every iteration (it
grows without end), so one rewritten after the kill is reported, not
restored.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import attrs

from ._manifest import FILE, Manifest, Node
from ._restore import SnapshotStore
from ._spec import GROWS

PENDING = "pending.json"
# Beside the snapshots, the copies that outlive Forge, by content hash.
KEPT = "kept"
_VERSION = 1
# The timeline's tail read for the iteration a check is armed for.
_TAIL = 8192


@attrs.frozen
class Pending:
    """A check armed and not made: the manifest and where it was armed."""

    manifest: Manifest
    journals: dict[str, int]
    run_id: str | None
    iteration: int | None


@attrs.define
class DurableCopies:
    """Copies on disk of the armed manifest's protected files, for a check made after a kill.

    The live check restores from memory first (where no agent reaches);
    these copies serve only the next loop, which verifies each by its hash
    before it puts it back. Content already copied costs a set lookup.
    """

    folder: Path
    _copied: set[str] = attrs.field(factory=set, init=False, repr=False)
    _listed: bool = attrs.field(default=False, init=False, repr=False)

    def keep(self, manifest: Manifest, store: SnapshotStore) -> None:
        """Copy what ``manifest`` refers to; drop what it no longer does."""
        wanted: set[str] = set()
        for where, node in manifest.nodes.items():
            digest = node.digest
            if node.kind != FILE or digest is None or manifest.protection[where] == GROWS:
                continue
            wanted.add(digest)
            if digest not in self._copied:
                self._copy(digest, store)
        if not self._listed:
            # A killed loop's copies: those still wanted are reused, the rest go.
            self._listed = True
            with contextlib.suppress(OSError):
                self._copied |= {p.name for p in self.folder.iterdir()} - wanted
        for digest in self._copied - wanted:
            with contextlib.suppress(OSError):
                (self.folder / digest).unlink()
        self._copied &= wanted

    def drop(self) -> None:
        """Remove every copy (the loop ended: no check is pending)."""
        with contextlib.suppress(OSError):
            for path in self.folder.iterdir():
                with contextlib.suppress(OSError):
                    path.unlink()
        self._copied.clear()

    def store(self) -> SnapshotStore:
        """A snapshot store that restores from these copies."""
        return SnapshotStore(self.folder, memory_budget=0)

    def _copy(self, digest: str, store: SnapshotStore) -> None:
        target = self.folder / digest
        if not target.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            content = store.in_memory(digest)
            if content is not None:
                tmp = target.with_name(f".{digest}.tmp")
                try:
                    tmp.write_bytes(content)  # the bytes the manifest hashed
                    os.replace(tmp, target)
                finally:
                    with contextlib.suppress(OSError):
                        tmp.unlink()
            else:
                # A large file, snapshotted on disk: one more name for that blob.
                try:
                    os.link(store.blob(digest), target)
                except OSError:
                    return  # no snapshot of it: the next loop reports it unrestored
        self._copied.add(digest)


def write_pending(
    path: Path, manifest: Manifest, journals: dict[str, int], armed: tuple[str | None, int | None]
) -> None:
    """Record the armed check (atomically: a kill mid-write leaves the previous record or none)."""
    run_id, iteration = armed
    nodes = [
        [
            where,
            manifest.names[where],
            manifest.protection[where],
            node.kind,
            node.permissions,
            node.size,
            node.mtime_ns,
            node.ctime_ns,
            node.inode,
            node.digest,
            node.target,
        ]
        for where, node in manifest.nodes.items()
    ]
    record = {
        "version": _VERSION,
        "run_id": run_id,
        "iteration": iteration,
        "taken_at_ns": manifest.taken_at_ns,
        "journals": journals,
        "nodes": nodes,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def read_pending(path: Path) -> Pending | None:
    """The record left by a loop that died before its check, or None.

    A record that does not parse is None too: it can only be one a kill
    tore (the write is atomic) or one someone else wrote.
    """
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.get("version") != _VERSION:
            return None
        nodes: dict[str, Node] = {}
        protection: dict[str, str] = {}
        names: dict[str, str] = {}
        for where, name, mode, kind, perms, size, mtime, ctime, inode, digest, target in record[
            "nodes"
        ]:
            nodes[where] = Node(kind, perms, size, mtime, ctime, inode, digest, target)
            protection[where] = mode
            names[where] = name
        manifest = Manifest(int(record["taken_at_ns"]), nodes, protection, names)
        journals = {str(k): int(v) for k, v in record["journals"].items()}
        run_id = record.get("run_id")
        iteration = record.get("iteration")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    return Pending(
        manifest,
        journals,
        run_id if isinstance(run_id, str) else None,
        iteration if isinstance(iteration, int) else None,
    )


def clear_pending(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def armed_for(timeline: Path) -> tuple[str | None, int | None]:
    """The run and iteration of the timeline's last ``iteration.started`` (just written)."""
    try:
        with open(timeline, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - _TAIL))
            tail = handle.read()
    except OSError:
        return None, None
    for line in reversed(tail.split(b"\n")):
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "iteration.started":
            run_id, iteration = event.get("run_id"), event.get("iteration")
            return (
                run_id if isinstance(run_id, str) else None,
                iteration if isinstance(iteration, int) else None,
            )
    return None, None
