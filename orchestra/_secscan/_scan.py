"""Scanning a working tree, incrementally, and putting its findings together."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import time
from collections.abc import Iterable
from pathlib import Path

import attrs

from ._cache import (
    CacheEntry,
    CacheRow,
    ScanCache,
    StatKey,
    discard_corrupt,
    is_corruption,
    open_cache,
)
from ._filescan import FileScan, scan_bytes
from ._findings import (
    ALLOW_MARKER_DESCRIPTION,
    ALLOW_MARKER_RULE,
    Finding,
    ScanResult,
    secret_fingerprint,
)
from ._rules import Ruleset
from ._walk import list_files

DEFAULT_MAX_BYTES = 1_000_000
ALLOW_MARKER_SEVERITY = "high"
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@attrs.define
class _Tally:
    considered: int = 0
    read: int = 0
    cached: int = 0
    skipped: int = 0
    bytes_read: int = 0
    skipped_large: list[str] = attrs.Factory(list)


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
        max_bytes: Files larger than this are skipped and listed in
            ``skipped_large``.
        trusted_markers: None honours every inline allow marker. A set of
            marker fingerprints (a loop's ``markers`` from its first scan)
            honours only those: any other marker is itself a finding, and the
            secret on its line is reported.

    The cache never hides a finding: a corrupt cache is moved aside and every
    file is read; an unusable one is ignored (``cache_note`` says why).
    """
    started = time.perf_counter()
    start_ns = time.time_ns()
    paths = list_files(root)
    cache, entries, note = open_cache(cache_path) if cache_path else (None, {}, None)
    tally = _Tally()
    scans: list[tuple[str, FileScan]] = []
    rows: list[CacheRow] = []
    try:
        for path in paths:
            scanned = _scan_path(root, path, entries.get(path), ruleset, max_bytes, start_ns, tally)
            if scanned is None:
                continue
            scans.append((path, scanned[0]))
            if scanned[1] is not None:
                rows.append(scanned[1])
        if cache is not None:
            note = _save(cache, rows, set(entries).difference(paths)) or note
    finally:
        if cache is not None:
            cache.close()
    findings, suppressed, markers = assemble(scans, ruleset, trusted_markers)
    return ScanResult(
        findings=findings,
        suppressed=suppressed,
        markers=markers,
        files_considered=tally.considered,
        files_read=tally.read,
        files_cached=tally.cached,
        files_skipped=tally.skipped,
        skipped_large=tuple(tally.skipped_large),
        bytes_read=tally.bytes_read,
        duration=time.perf_counter() - started,
        ruleset_digest=ruleset.digest,
        cache_note=note,
    )


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


def _scan_path(
    root: Path,
    path: str,
    entry: CacheEntry | None,
    ruleset: Ruleset,
    max_bytes: int,
    start_ns: int,
    tally: _Tally,
) -> tuple[FileScan, CacheRow | None] | None:
    full = os.path.join(root, path)
    try:
        info = os.lstat(full)
    except OSError:  # listed by git but deleted from the work tree
        return None
    if not stat.S_ISREG(info.st_mode):  # symlinks are not followed out of the tree
        return None
    tally.considered += 1
    if info.st_size > max_bytes:
        tally.skipped += 1
        tally.skipped_large.append(path)
        return None
    if entry is not None and entry.trusted(_stat_key(info), ruleset.digest):
        try:
            cached = FileScan.from_json(entry.result)
        except ValueError:
            cached = None
        if cached is not None:
            tally.cached += 1
            return cached, None
    read = _read(full, max_bytes)
    if read is None:
        tally.skipped += 1
        return None
    data, opened = read
    tally.read += 1
    tally.bytes_read += len(data)
    if len(data) > max_bytes:  # grew since it was listed
        tally.skipped += 1
        tally.skipped_large.append(path)
        return None
    content_hash = hashlib.blake2b(data, digest_size=16).hexdigest()
    scanned = _reuse(entry, content_hash, ruleset.digest) or scan_bytes(data, path, ruleset)
    if scanned.binary:
        tally.skipped += 1
    row = CacheRow(
        path, _stat_key(opened), content_hash, ruleset.digest, start_ns, scanned.to_json()
    )
    return scanned, row


def _reuse(entry: CacheEntry | None, content_hash: str, digest: str) -> FileScan | None:
    """A cached result for identical content under identical rules (a touched file)."""
    if entry is None or entry.content_hash != content_hash or entry.ruleset != digest:
        return None
    try:
        return FileScan.from_json(entry.result)
    except ValueError:
        return None


def _read(full: str, max_bytes: int) -> tuple[bytes, os.stat_result] | None:
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
            return handle.read(max_bytes + 1), opened
        except OSError:
            return None


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
