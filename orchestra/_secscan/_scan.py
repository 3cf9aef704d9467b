"""Scanning a working tree, incrementally, and putting its findings together.

Two kinds of incremental: across processes, the sqlite cache lets a scan trust
an unchanged file without reading it; within one loop, :func:`rescan` starts
from the previous scan's outcomes and looks only at the paths that may have
changed since (what two ``git status`` runs tell), without listing the tree.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import BinaryIO

import attrs

from .._treestatus import TreeDelta
from ._cache import (
    CacheEntry,
    CacheRow,
    ScanCache,
    StatKey,
    discard_corrupt,
    is_corruption,
    open_cache,
)
from ._filescan import FileHit, FileScan, is_binary, scan_bytes, scan_chunk
from ._findings import (
    ALLOW_MARKER_DESCRIPTION,
    ALLOW_MARKER_RULE,
    Finding,
    ScanResult,
    secret_fingerprint,
)
from ._rules import Ruleset
from ._walk import FORGE_DIR, listed_files, tracked_state_files, wanted

DEFAULT_MAX_BYTES = 1_000_000
# What a chunk of a large file shares with the next: longer than any secret a
# rule finds (a 4096-bit RSA key block is about 3.3 KB).
OVERLAP_BYTES = 16 * 1024
ALLOW_MARKER_SEVERITY = "high"
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@attrs.frozen
class PathOutcome:
    """What one listed path added to a scan.

    Attributes:
        scan: Its secrets and markers; None when it was not scanned (gone, not
            a regular file, unreadable).
        considered: Whether it was a regular file when the scan looked.
        large: Whether it was skipped for its size. No file is any more (a
            large one is scanned in chunks); kept for ``skipped_large``.
    """

    scan: FileScan | None = None
    considered: bool = False
    large: bool = False

    @property
    def skipped(self) -> bool:
        """Considered but not scanned: unreadable (binaries and large files are scanned)."""
        return self.considered and (self.large or self.scan is None)

    @property
    def settled(self) -> bool:
        """Whether an unchanged file's outcome can stand without looking again.

        A file with findings or markers, or one that could not be read, is
        always looked at again: a finding must never outlive its secret.
        """
        if self.scan is None:
            return not self.considered or self.large
        return not (self.scan.hits or self.scan.markers)


@attrs.frozen
class TreeScan:
    """A scan's result and each listed path's outcome (what an incremental scan builds on).

    Attributes:
        result: The scan's result.
        outcomes: Every listed path's outcome, by path.
        from_git: Whether git listed the files (else the folder was walked).
    """

    result: ScanResult
    outcomes: Mapping[str, PathOutcome]
    from_git: bool


@attrs.define
class _Tally:
    read: int = 0
    cached: int = 0
    bytes_read: int = 0


def scan_tree(
    root: Path,
    ruleset: Ruleset,
    *,
    cache_path: Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    trusted_markers: frozenset[str] | None = None,
) -> ScanResult:
    """Scan the working tree under ``root`` for secrets.

    Args:
        root: The folder to scan (usually the project root).
        ruleset: The rules (:func:`load_rules`).
        cache_path: The sqlite cache (e.g. ``.forge/cache/secscan.sqlite3``);
            None scans every file afresh.
        max_bytes: Files larger than this are scanned in chunks of this size
            (overlapping by ``OVERLAP_BYTES``), never skipped.
        trusted_markers: None honours every inline allow marker. A set of
            marker fingerprints (a loop's ``markers`` from its first scan)
            honours only those: any other marker is itself a finding, and the
            secret on its line is reported.

    The cache never hides a finding: a corrupt cache is moved aside and every
    file is read; an unusable one is ignored (``cache_note`` says why).
    """
    return full_scan(
        root,
        ruleset,
        cache_path=cache_path,
        max_bytes=max_bytes,
        trusted_markers=trusted_markers,
    ).result


def full_scan(
    root: Path,
    ruleset: Ruleset,
    *,
    cache_path: Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    trusted_markers: frozenset[str] | None = None,
) -> TreeScan:
    """:func:`scan_tree`, keeping each path's outcome for a later :func:`rescan`."""
    started = time.perf_counter()
    paths, from_git = listed_files(root)
    scan = _Scan(root, ruleset, cache_path, max_bytes)
    outcomes, note = scan.run(paths, gone_from=None)
    result = _result(outcomes, scan.tally, ruleset, trusted_markers, started, note)
    return TreeScan(result, outcomes, from_git)


def rescan(
    previous: TreeScan,
    delta: TreeDelta,
    root: Path,
    ruleset: Ruleset,
    *,
    cache_path: Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    trusted_markers: frozenset[str] | None = None,
    relist_state: bool = False,
) -> TreeScan:
    """Scan again, looking only at what may have changed since ``previous``.

    ``delta`` names the paths that may have changed since the scan that made
    ``previous`` (:func:`tree_delta` of the work tree's statuses then and now):
    a listed one is scanned (added when it is new), an unlisted one drops out.
    Every other path keeps its outcome, except one with findings or markers,
    which is read again. The result is what :func:`full_scan` would give.
    With ``relist_state`` (HEAD moved: a commit may have added some), the
    files git tracks under ``.forge/`` are listed again and read.
    """
    started = time.perf_counter()
    listing = {p for p in previous.outcomes if p not in delta.unlisted}
    listing.update(p for p in delta.listed if wanted(p))
    relisted: set[str] = set()
    if relist_state:
        # A work tree's status leaves .forge/ out: what git tracks there is asked.
        tracked = tracked_state_files(root)
        if tracked is not None:
            listing = {p for p in listing if p.split("/", 1)[0] != FORGE_DIR} | tracked
            relisted = tracked
    kept = {
        path: outcome
        for path, outcome in previous.outcomes.items()
        if path in listing and path not in delta.listed and path not in relisted and outcome.settled
    }
    scan = _Scan(root, ruleset, cache_path, max_bytes)
    fresh, note = scan.run(sorted(listing.difference(kept)), gone_from=delta.unlisted)
    scan.tally.cached += sum(1 for outcome in kept.values() if outcome.scan is not None)
    outcomes = {path: kept.get(path) or fresh[path] for path in sorted(listing)}
    result = _result(outcomes, scan.tally, ruleset, trusted_markers, started, note)
    return TreeScan(result, outcomes, previous.from_git)


def _result(
    outcomes: Mapping[str, PathOutcome],
    tally: _Tally,
    ruleset: Ruleset,
    trusted_markers: frozenset[str] | None,
    started: float,
    note: str | None,
) -> ScanResult:
    scans = [(path, o.scan) for path, o in outcomes.items() if o.scan is not None]
    findings, suppressed, markers = assemble(scans, ruleset, trusted_markers)
    return ScanResult(
        findings=findings,
        suppressed=suppressed,
        markers=markers,
        files_considered=sum(1 for o in outcomes.values() if o.considered),
        files_read=tally.read,
        files_cached=tally.cached,
        files_skipped=sum(1 for o in outcomes.values() if o.skipped),
        skipped_large=tuple(path for path, o in outcomes.items() if o.large),
        bytes_read=tally.bytes_read,
        duration=time.perf_counter() - started,
        ruleset_digest=ruleset.digest,
        cache_note=note,
    )


@attrs.define
class _Scan:
    """One pass over some listed paths, with the cache."""

    root: Path
    ruleset: Ruleset
    cache_path: Path | None
    max_bytes: int
    tally: _Tally = attrs.Factory(_Tally)

    def run(
        self, paths: list[str], *, gone_from: Collection[str] | None
    ) -> tuple[dict[str, PathOutcome], str | None]:
        """Each path's outcome, and a note when the cache could not be used.

        ``gone_from`` None: ``paths`` is the whole listing, and the cache forgets
        every other file. Otherwise the cache forgets the paths in ``gone_from``.
        """
        outcomes: dict[str, PathOutcome] = {}
        if not paths and not gone_from:
            return outcomes, None
        start_ns = time.time_ns()
        cache, entries, note = open_cache(self.cache_path) if self.cache_path else (None, {}, None)
        rows: list[CacheRow] = []
        try:
            for path in paths:
                outcome, row = self._path(path, entries.get(path), start_ns)
                outcomes[path] = outcome
                if row is not None:
                    rows.append(row)
            if cache is not None:
                gone = set(entries).difference(paths) if gone_from is None else set(gone_from)
                note = _save(cache, rows, gone) or note
        finally:
            if cache is not None:
                cache.close()
        return outcomes, note

    def _path(
        self, path: str, entry: CacheEntry | None, start_ns: int
    ) -> tuple[PathOutcome, CacheRow | None]:
        full = os.path.join(self.root, path)
        try:
            info = os.lstat(full)
        except OSError:  # listed by git but deleted from the work tree
            return PathOutcome(), None
        if not stat.S_ISREG(info.st_mode):  # symlinks are not followed out of the tree
            return PathOutcome(), None
        digest = self.ruleset.digest
        if entry is not None and entry.trusted(_stat_key(info), digest):
            try:
                cached = FileScan.from_json(entry.result)
            except ValueError:
                cached = None
            if cached is not None:
                self.tally.cached += 1
                return PathOutcome(cached, considered=True), None
        read = _read(full, self.max_bytes, path, self.ruleset)
        if read is None:
            return PathOutcome(considered=True), None
        content_hash, size, opened, scan_file = read
        self.tally.read += 1
        self.tally.bytes_read += size
        scanned = _reuse(entry, content_hash, digest) or scan_file(path)
        row = CacheRow(path, _stat_key(opened), content_hash, digest, start_ns, scanned.to_json())
        return PathOutcome(scanned, considered=True), row


def _save(cache: ScanCache, rows: list[CacheRow], gone: set[str]) -> str | None:
    """Record the scan; a cache that cannot be written only costs the next scan time."""
    try:
        cache.update(rows, gone)
    except sqlite3.Error as exc:
        if is_corruption(exc):
            cache.close()
            discard_corrupt(cache.path)
            return f"scan cache {cache.path} became corrupt ({exc}); moved aside"
        return f"scan cache {cache.path} not updated ({exc})"
    return None


def _stat_key(info: os.stat_result) -> StatKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _reuse(entry: CacheEntry | None, content_hash: str, digest: str) -> FileScan | None:
    """A cached result for identical content under identical rules (a touched file)."""
    if entry is None or entry.content_hash != content_hash or entry.ruleset != digest:
        return None
    try:
        return FileScan.from_json(entry.result)
    except ValueError:
        return None


def _read(
    full: str, max_bytes: int, path: str, ruleset: Ruleset
) -> tuple[str, int, os.stat_result, Callable[[str], FileScan]] | None:
    """A file's content hash, size, stat before reading, and how to scan it.

    A file up to ``max_bytes`` is read whole and scanned when asked (not when
    the cache knows its content). A larger one is scanned as it is read, in
    chunks of ``max_bytes``: memory stays bounded, and nothing is skipped.
    """
    try:
        fd = os.open(full, _OPEN_FLAGS)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            # The stat recorded is the one taken before reading: a change made
            # while we read gives the next scan a different stat (or a racy mtime).
            opened = os.fstat(handle.fileno())
            if not stat.S_ISREG(opened.st_mode):
                return None
            data = handle.read(max_bytes + 1)
            if len(data) <= max_bytes:
                content_hash = hashlib.blake2b(data, digest_size=16).hexdigest()
                return content_hash, len(data), opened, partial(scan_bytes, data, ruleset=ruleset)
            content_hash, size, scanned = _scan_large(handle, data, path, ruleset, max_bytes)
            return content_hash, size, opened, lambda _path: scanned
        except OSError:
            return None


def _scan_large(
    handle: BinaryIO, first: bytes, path: str, ruleset: Ruleset, chunk: int
) -> tuple[str, int, FileScan]:
    """Scan a file larger than ``chunk`` bytes, chunk by chunk.

    Each chunk ends at a line end (a token on one line is never cut) and the
    next begins with the last ``OVERLAP_BYTES`` of it, from a line start, so a
    secret across the border (a key block) is found whole; hits found twice
    are reported once.
    """
    hasher = hashlib.blake2b(first, digest_size=16)
    size = len(first)
    hits: list[FileHit] = []
    markers: dict[int, str] = {}
    seen: set[tuple[str, int]] = set()
    carry, carried, offset, line = b"", 0, 0, 1
    block: bytes = first
    binary = is_binary(first)
    while True:
        window = carry + block
        final = not block
        cut = len(window)
        if not final:
            end = window.rfind(b"\n") + 1
            if end > len(carry):
                cut = end
        part = window[:cut]
        scanned = scan_chunk(
            part,
            path,
            ruleset,
            first_line=line,
            offset=offset,
            markers_from=carried,
            seen=seen,
        )
        hits.extend(scanned.hits)
        markers.update(scanned.markers)
        if final:
            break
        tail = max(0, len(part) - OVERLAP_BYTES)
        if tail:
            newline = part.find(b"\n", tail)
            tail = newline + 1 if newline != -1 else tail
        line += part.count(b"\n", 0, tail)
        offset += tail
        carried = len(part) - tail
        carry = part[tail:] + window[cut:]
        block = handle.read(chunk)
        hasher.update(block)
        size += len(block)
    scanned = FileScan(hits=tuple(hits), markers=tuple(sorted(markers.items())), binary=binary)
    return hasher.hexdigest(), size, scanned


def assemble(
    scans: Iterable[tuple[str, FileScan]],
    ruleset: Ruleset,
    trusted_markers: frozenset[str] | None,
) -> tuple[tuple[Finding, ...], tuple[Finding, ...], frozenset[str]]:
    """Turn per-file scans into findings, applying the inline markers a scan honours.

    Returns the findings, the findings suppressed by an honoured marker, and
    every marker fingerprint seen.
    """
    rules = {rule.id: rule for rule in ruleset.rules}
    findings: list[Finding] = []
    suppressed: list[Finding] = []
    seen: set[str] = set()
    for path, scanned in scans:
        on_line = dict(scanned.markers)
        for hit in scanned.hits:
            rule = rules.get(hit.rule_id)
            if rule is None:  # cannot happen under the same digest; never guess
                continue
            finding = Finding(
                rule.id,
                rule.description,
                rule.severity,
                path,
                hit.line,
                hit.fingerprint,
                hit.preview,
            )
            marker = on_line.get(hit.line)
            honoured = marker is not None and (trusted_markers is None or marker in trusted_markers)
            (suppressed if honoured else findings).append(finding)
        for line, marker in scanned.markers:
            seen.add(marker)
            if trusted_markers is not None and marker not in trusted_markers:
                findings.append(
                    Finding(
                        ALLOW_MARKER_RULE,
                        ALLOW_MARKER_DESCRIPTION,
                        ALLOW_MARKER_SEVERITY,
                        path,
                        line,
                        secret_fingerprint(ALLOW_MARKER_RULE, path, marker),
                        "inline allow marker",
                    )
                )
    return (
        tuple(sorted(findings, key=_order)),
        tuple(sorted(suppressed, key=_order)),
        frozenset(seen),
    )


def _order(finding: Finding) -> tuple[str, int, str]:
    return finding.path, finding.line, finding.rule_id
