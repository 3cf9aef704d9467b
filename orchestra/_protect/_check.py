"""The integrity check a loop runs around every iteration.

``arm`` before the iteration records the manifest and keeps a snapshot of the
protected content; ``inspect`` after it compares, puts every harmed path back
and reports what it found and did. The loop then stops and escalates.

Per iteration, what did not change since the previous manifest costs a stat:
its hash and its snapshot are reused. What changed (Forge's own state, written
between iterations) is read once, for its hash and its snapshot together; of
an append-only timeline, only what was appended is hashed. Folders nothing
protects (a change's ``runs/``) are never walked: the cost follows what is
protected, not how long the loop has run (the running run's own logs are named, see
``_runlogs``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import ClassVar

import attrs

from .._names import CHANGE_NAME
from .._policy import Policy
from .._state import FORGE_LINES, FORGE_WRITES, ChangePaths
from ._diff import ADDED, MODIFIED, Violation, violations
from ._manifest import (
    FILE,
    LiveDatabase,
    Manifest,
    Scope,
    Settled,
    Tracked,
    content_digest,
    take_manifest,
)
from ._others import OtherChanges
from ._pending import (
    KEPT,
    PENDING,
    DurableCopies,
    Pending,
    armed_for,
    clear_pending,
    read_pending,
    write_pending,
)
from ._restore import Repair, SnapshotStore, repair
from ._runlogs import RunLogs
from ._spec import (
    CHANGES,
    GROWS,
    TIMELINE,
    TIMELINES,
    WAIVERS_FILE,
    ProtectSpec,
    forge_state_entries,
    normalize,
    sealed_state,
)

INTEGRITY = "integrity"


@attrs.frozen
class IntegrityReport:
    """What one iteration did to the protected paths, and what was done about it."""

    checked: int
    repairs: tuple[Repair, ...] = ()

    @property
    def harmed(self) -> bool:
        return bool(self.repairs)

    def detail(self) -> str:
        """One line for the stop summary, naming each harmed path."""
        return "; ".join(r.describe() for r in self.repairs)

    def as_record(self) -> list[dict[str, object]]:
        return [
            {
                "path": r.violation.name,
                "protection": r.violation.protection,
                "harm": r.violation.harm,
                "action": r.action,
                "quarantined": r.quarantined,
            }
            for r in self.repairs
        ]


@attrs.define
class IntegrityCheck:
    """Manifests, snapshots and repairs for one loop's protected paths."""

    scopes: tuple[Tracked, ...]
    store: SnapshotStore
    quarantine: Path
    before: Manifest | None = None
    # The waivers file's name (the policy's): Forge state that must not appear.
    waivers: str = WAIVERS_FILE
    # The change whose loop this is: where the armed check is kept on disk
    # (see _pending) and a check finished after a kill is recorded. None: neither.
    change: ChangePaths | None = None
    # What the first arm found a killed loop's agent did, and put back.
    recovered: IntegrityReport | None = None
    _resumed: bool = attrs.field(default=False, init=False, repr=False)
    _durable: DurableCopies = attrs.field(init=False, repr=False)

    @_durable.default
    def _durable_default(self) -> DurableCopies:
        return DurableCopies(self.store.folder.parent / KEPT)

    # Where each forge-writes journal stood when the manifest was taken.
    journals: dict[str, int] = attrs.field(factory=dict)
    # Small files' content read by the last inspect, by hash: the next arm's
    # snapshot takes what it reuses from there instead of reading it again.
    _seen: dict[str, bytes] = attrs.field(factory=dict, init=False, repr=False)

    def arm(self) -> Manifest:
        """Record the protected paths as they are now (before an iteration).

        The first arm of a loop first finishes the check a killed loop on the
        same change left pending (see :mod:`._pending`).
        """
        if not self._resumed:
            self._resumed = True
            self.recovered = self._finish_pending()
        armed = armed_for(self.change.timeline) if self.change is not None else (None, None)
        for scope in self.scopes:
            if isinstance(scope, RunLogs):
                scope.follow(*armed)
        contents, self._seen = self._seen, {}
        # No agent runs between iterations: an append-only file is read past
        # what the last manifest hashed of it, not whole (see _appendonly).
        manifest = take_manifest(
            self.scopes, self.before, contents, trusted=True, settled=self._settled()
        )
        # Journal positions before the (possibly slow) snapshot copy: a write
        # forge makes meanwhile (a waiver, another run's spend) counts as after.
        # Another loop notes its write before it renames the file into place,
        # so a write whose note came just before this manifest but whose rename
        # came after it is found among the last few entries: they are counted
        # too. At most they let an agent put back what forge wrote last, which
        # is what the files held when the manifest was taken.
        self.journals = {
            folder: max(0, _size(os.path.join(folder, FORGE_WRITES)) - _IN_FLIGHT_BYTES)
            for folder in {os.path.dirname(p) for p in manifest.nodes}
        }
        # The timelines' lines journal too, keyed by its own path: only where a
        # timeline is (a stat per protected folder would grow with the tree).
        for path, mode in manifest.protection.items():
            if mode == GROWS:
                lines = os.path.join(os.path.dirname(path), FORGE_LINES)
                self.journals[lines] = max(0, _size(lines) - _LINES_IN_FLIGHT_BYTES)
        self.store.keep(manifest, contents)
        self.before = manifest
        if self.change is not None:
            try:
                self._durable.keep(manifest, self.store)
                write_pending(self._pending, manifest, self.journals, armed)
            except OSError:
                # Only the kill of Forge is left unguarded: the check itself
                # runs from memory as before.
                clear_pending(self._pending)
        return manifest

    @property
    def _pending(self) -> Path:
        return self.store.folder.parent / PENDING

    def _finish_pending(self) -> IntegrityReport | None:
        """The check a loop armed and never made (it was killed): made now, and recorded."""
        if self.change is None:
            return None
        pending = read_pending(self._pending)
        if pending is None:
            clear_pending(self._pending)  # torn or foreign: nothing to finish from
            return None
        before = pending.manifest
        self.journals = pending.journals
        # The paths recorded, looked at again whatever the policy now protects
        # (a path no longer listed is not thereby gone); additions as it says.
        # The scopes go first: a path they still protect is taken as they say
        # (a live database is never read, whatever an older Forge recorded).
        after = take_manifest([*self.scopes, _Recorded(before)])
        found = [
            v
            for v in violations(before, after, partial(sealed_state, waivers=self.waivers))
            if not self._forge_wrote(v, after)
            and not _only_grew(v, before, self._forge_lines(v.path))
        ]
        if not found:
            clear_pending(self._pending)
            return None
        label = f"{pending.run_id or 'killed'}-{pending.iteration or 0}-after-kill"
        kept = [v for v in found if self._restorable(v, before)]
        repairs = repair(kept, before, self._durable.store(), self.quarantine / label)
        repairs += [
            Repair(v, "not restored: an append-only file's content is not kept on disk")
            for v in found
            if v not in kept
        ]
        report = IntegrityReport(checked=len(after.nodes), repairs=tuple(repairs))
        _record_after_kill(self.change, pending, report)
        clear_pending(self._pending)
        return report

    def _restorable(self, violation: Violation, before: Manifest) -> bool:
        node = before.nodes.get(violation.path)
        if node is None or node.kind != FILE or node.digest is None:
            return True  # an addition, a folder, a link: nothing to read back
        return (self._durable.folder / node.digest).is_file()

    def inspect(self, label: str) -> IntegrityReport:
        """Compare with the armed manifest; restore whatever was harmed."""
        before = self.before if self.before is not None else self.arm()
        seen: dict[str, bytes] = {}
        after = take_manifest(self.scopes, before, seen, settled=self._settled())
        found: Sequence[Violation] = [
            v
            for v in violations(before, after, partial(sealed_state, waivers=self.waivers))
            if not self._forge_wrote(v, after)
            and not _appended(v, before, self.store, self._forge_lines(v.path))
        ]
        if not found:
            self.before = after
            self._seen = seen
            clear_pending(self._pending)
            return IntegrityReport(checked=len(after.nodes))
        repairs = repair(found, before, self.store, self.quarantine / label)
        for done in repairs:
            if done.violation.protection == GROWS and done.restored and done.quarantined:
                path = done.violation.path
                _keep_later_events(path, done.quarantined, self._forge_lines(path))
        self.before = None  # the next arm hashes afresh: the tree was just rewritten
        clear_pending(self._pending)
        return IntegrityReport(checked=len(after.nodes), repairs=tuple(repairs))

    def _settled(self) -> Settled | None:
        """The filesystem's clock now, from a marker file in the loop's protect folder.

        None when the marker cannot be set: the manifest then takes any
        modification in the last second as racing it, and rehashes it.
        """
        marker = self.store.folder.parent / _CLOCK
        try:
            try:
                os.utime(marker)
            except FileNotFoundError:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            info = os.stat(marker)
        except OSError:
            return None
        # Never later than the wall clock: a marker an agent dated ahead of time
        # would have every recent edit taken as settled.
        return Settled(info.st_dev, min(info.st_mtime_ns, time.time_ns()))

    def _forge_wrote(self, violation: Violation, after: Manifest) -> bool:
        """Whether the change is forge's own write since the manifest (not the agent's)."""
        node = after.nodes.get(violation.path)
        if violation.harm not in (MODIFIED, ADDED) or node is None or node.digest is None:
            return False
        folder = os.path.dirname(violation.path)
        start = self.journals.get(folder, 0)
        try:
            with open(os.path.join(folder, FORGE_WRITES), "rb") as journal:
                # A journal shorter than it was (recreated) is read from its start.
                size = os.fstat(journal.fileno()).st_size
                journal.seek(start if start <= size else 0)
                written = journal.read().decode("ascii", "replace").split()
        except OSError:
            return False
        return node.digest in written

    def _forge_lines(self, path: str) -> Callable[[], frozenset[str]]:
        """The hashes of the lines forge journalled for the folder of ``path``, read when asked.

        From a little before where the journal stood at the manifest: a line
        another loop noted just before it and wrote just after is its own.
        """

        def read() -> frozenset[str]:
            lines = os.path.join(os.path.dirname(path), FORGE_LINES)
            start = self.journals.get(lines, 0)
            try:
                with open(lines, "rb") as journal:
                    size = os.fstat(journal.fileno()).st_size
                    journal.seek(start if start <= size else 0)
                    return frozenset(journal.read().decode("ascii", "replace").split())
            except OSError:
                return frozenset()

        return read

    def finish(self) -> None:
        """Drop snapshots on disk the last manifest no longer needs."""
        clear_pending(self._pending)
        if self.change is not None:
            self._durable.drop()
        if self.before is not None:
            self.store.prune(self.before)


def integrity_check(
    policy: Policy, *, workdir: Path, root: Path, state_folder: Path
) -> IntegrityCheck:
    """The check for one change's loop: the policy's paths and Forge's own state.

    Every change's state is guarded, not only the running one's: an agent must
    not clear another change's open breaker or spent budget either. The
    loop's own change (``state_folder``) is walked like any protected tree;
    the others' state files are looked up by name (see :mod:`._others`), so
    that the check costs no more with every other loop and its history.
    """
    protect = policy.protect
    own = _own_change(root, state_folder)
    state = forge_state_entries(own or "*", policy.secscan.waivers)
    timelines = (f"{CHANGES}/{own}/{TIMELINE}",) if own else (TIMELINES,)
    same = _same_folder(workdir, root)
    fold = case_insensitive(workdir)
    scopes: list[Tracked] = [
        Scope(
            workdir,
            ProtectSpec(
                protect.exist,
                protect.frozen + (state if same else ()),
                grows=timelines if same else (),
                fold=fold,
            ),
        )
    ]
    if not same:
        # A loop in a worktree may still reach the main checkout: what must
        # exist there, and forge's state, are guarded too. Its frozen files are
        # not: a human tuning the policy there while loops run is no harm.
        fold = case_insensitive(root)
        root_spec = ProtectSpec(protect.exist, state, grows=timelines, fold=fold)
        scopes.append(Scope(root, root_spec))
    scopes.extend(_rate_limit_log(policy, root))
    if own:
        scopes.append(OtherChanges(root, own, fold=fold))
        scopes.append(RunLogs(state_folder, f"{CHANGES}/{own}"))
    folder = state_folder / "protect"
    return IntegrityCheck(
        scopes=tuple(scopes),
        store=SnapshotStore(folder / "snapshots"),
        quarantine=folder / "quarantine",
        waivers=policy.secscan.waivers,
        change=ChangePaths(root, own) if own else None,
    )


def _rate_limit_log(policy: Policy, root: Path) -> tuple[LiveDatabase, ...]:
    """The sqlite rate-limit log, when it is one inside the project: it must exist.

    Deleting it would forget the calls every loop made in the window; it is
    rewritten all the time, so it is not frozen, and never opened.
    """
    limit = policy.rate_limit
    if limit.backend != "sqlite" or os.path.isabs(limit.path):
        return ()
    entry = normalize(limit.path)
    return (LiveDatabase(root / entry, entry),) if entry else ()


def _own_change(root: Path, state_folder: Path) -> str | None:
    """The change whose folder ``state_folder`` is, when it is one of ``root``'s."""
    name = state_folder.name
    if not CHANGE_NAME.fullmatch(name) or not _same_folder(state_folder.parent, root / CHANGES):
        return None
    return name


def protect_lists(
    root: str, config: str | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], bool]:
    """(exist, frozen, policy files read, case-insensitive) for the hooks' cache.

    Frozen includes Forge's own state of every change: the hooks do not know
    which change an agent works on, and no agent may rewrite any of them.
    """
    from .._policy import load_policy

    loaded = load_policy(Path(config) if config else None, root=Path(root))
    protect = loaded.policy.protect
    # The hooks also refuse edits of forge's caches (this list's own) and snapshots.
    internals = (".forge/cache/", ".forge/changes/*/protect/")
    frozen = protect.frozen + forge_state_entries("*", loaded.policy.secscan.waivers) + internals
    files = tuple(str(path) for path in loaded.files)
    return protect.exist, frozen, files, case_insensitive(Path(root))


# In the loop's protect folder, beside its snapshots: its time is the filesystem's clock.
_CLOCK = ".clock"

# The journal's last entries (41 bytes each: a 40-digit hash and a newline)
# that may belong to writes still in flight when a manifest is taken.
_IN_FLIGHT_BYTES = 4 * 41
# The same for a timeline's lines, which are journalled one hash per line.
_LINES_IN_FLIGHT_BYTES = 64 * 41


def _appended(
    violation: Violation,
    before: Manifest,
    store: SnapshotStore,
    forge_lines: Callable[[], frozenset[str]],
) -> bool:
    """An append-only file that only grew, by forge's lines: what it held is still its beginning.

    Another loop appends to its timeline while this one's manifest reads it, so
    the bytes that were hashed may be more than the size that was recorded:
    the kept snapshot (exactly the hashed bytes) is what the file must start with.
    """
    if violation.protection != GROWS or violation.harm != MODIFIED:
        return False
    node = before.nodes[violation.path]
    if node.digest is None:
        return False
    held = store.in_memory(node.digest)
    length = len(held) if held is not None else node.size
    try:
        with open(violation.path, "rb") as handle:
            head = handle.read(length)
            tail = handle.read()
    except OSError:
        return False
    if held is not None:
        kept = head == held
    else:
        kept = len(head) == node.size and content_digest(head) == node.digest
    return kept and only_forge_lines(tail, forge_lines, _unfinished(head))


def only_forge_lines(
    tail: bytes, forge_lines: Callable[[], frozenset[str]], begun: bytes = b""
) -> bool:
    """Whether every line in what a timeline gained is one forge journalled (see note_forge_lines).

    ``begun`` is the part of a line the recorded bytes ended in (a write in
    flight when they were read): the tail's first line completes it, and it
    is the whole line that must be journalled. A last line without its
    newline is another loop's write still in flight, unless it is already a
    whole event: appended after it, forge's next line would make it one.
    """
    if begun and tail.startswith(b"\n"):
        # Left as it was, a torn line forge's next append began after: not new.
        tail, begun = tail[1:], b""
    *lines, last = (begun + tail).split(b"\n")
    if last and _whole_event(last):
        lines.append(last)
    lines = [line for line in lines if line]
    if not lines:
        return True
    known = forge_lines()
    return all(content_digest(line) in known for line in lines)


def _unfinished(head: bytes) -> bytes:
    """The bytes after the last newline of ``head``: a line it holds only the start of."""
    return head[head.rfind(b"\n") + 1 :]


def _whole_event(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


@attrs.frozen
class _Recorded:
    """The paths a recorded manifest holds, to be taken again as they are now."""

    reads: ClassVar[bool] = True

    manifest: Manifest

    def walk(self) -> Iterator[tuple[str, str, str]]:
        for path, mode in self.manifest.protection.items():
            yield path, self.manifest.names[path], mode


def _only_grew(
    violation: Violation, before: Manifest, forge_lines: Callable[[], frozenset[str]]
) -> bool:
    """An append-only file that still begins with what was recorded of it (by hash),
    and gained only forge's lines."""
    if violation.protection != GROWS or violation.harm != MODIFIED:
        return False
    node = before.nodes[violation.path]
    if node.digest is None:
        return False
    try:
        with open(violation.path, "rb") as handle:
            head = handle.read(node.size)
            tail = handle.read()
    except OSError:
        return False
    kept = len(head) == node.size and content_digest(head) == node.digest
    return kept and only_forge_lines(tail, forge_lines, _unfinished(head))


def _record_after_kill(change: ChangePaths, pending: Pending, report: IntegrityReport) -> None:
    """The ``protect.violation`` the killed loop would have written, marked as found later."""
    from .._state import ProtectViolation, append_event, exclusive_lock

    event = ProtectViolation(
        run_id=pending.run_id or "",
        iteration=pending.iteration or 0,
        harmed=report.as_record(),
        extra={"found": "by the next run on the change: the loop that armed the check was killed"},
    )
    with exclusive_lock(change.lock):
        append_event(change.timeline, change.name, event)


def _keep_later_events(path: str, harmed: str, forge_lines: Callable[[], frozenset[str]]) -> None:
    """After a timeline is restored, keep forge's events appended to it since (a hook's verify).

    The harmed copy's lines that are whole events numbered past the restored
    timeline's last one, and that forge journalled, are appended again; an
    edited or removed earlier line stays as the restored copy holds it, and
    an event the agent added is left out.
    """
    try:
        with open(path, "rb") as handle:
            restored = handle.read()
        with open(harmed, "rb") as handle:
            lines = handle.read().split(b"\n")
    except OSError:
        return
    last = max((_seq(line) or 0 for line in restored.split(b"\n")), default=0)
    known = forge_lines()
    later = [line for line in lines if (_seq(line) or 0) > last and content_digest(line) in known]
    if later:
        with open(path, "ab") as handle:
            handle.write(b"".join(line + b"\n" for line in later))


def _seq(line: bytes) -> int | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    seq = value.get("seq") if isinstance(value, dict) else None
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


def case_insensitive(folder: Path) -> bool:
    """Whether the filesystem under ``folder`` ignores case (``A`` and ``a`` are one file)."""
    name = folder.name
    swapped = name.swapcase()
    if swapped == name:
        return False
    try:
        return os.path.samefile(folder, folder.with_name(swapped))
    except OSError:
        return False
