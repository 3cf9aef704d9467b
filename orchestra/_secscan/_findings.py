"""What a scan reports: findings, their fingerprints, and the scan's counts.

Nothing here holds a secret. A finding carries a fingerprint (a short hash of
its rule, its file and a hash of the secret) and a preview of at most four
leading characters; its line number is for display and not part of the
fingerprint, so a waiver survives edits above the secret.
"""

from __future__ import annotations

import hashlib
from typing import Any

import attrs

from ._rules import severity_at_least

ALLOW_MARKER_RULE = "allow-marker"
ALLOW_MARKER_DESCRIPTION = (
    "an inline allow-secret marker that was not there when the loop started: "
    "an agent must not waive its own leak (a person reviews it, or records a waiver)"
)


def secret_fingerprint(rule_id: str, path: str, secret: str) -> str:
    """The stable id of one secret in one file under one rule (16 hex digits)."""
    secret_hash = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()
    return _short_hash(rule_id, path, secret_hash)


def marker_fingerprint(path: str, line: bytes) -> str:
    """The stable id of an inline allow marker: its file and its line's stripped text."""
    return _short_hash("marker", path, hashlib.sha256(line.strip()).hexdigest())


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


@attrs.frozen
class Finding:
    """One secret (or one untrusted allow marker) in one file.

    Attributes:
        rule_id: The rule that found it (``allow-marker`` for a marker).
        description: What kind of secret it is.
        severity: ``low``, ``medium``, ``high`` or ``critical``.
        path: The file, relative to the scanned root, with ``/`` separators.
        line: Where it starts (1-based), for display only.
        fingerprint: What waivers name; stable across edits elsewhere in the file.
        preview: A redacted form such as ``ghp_…[redacted]``.
    """

    rule_id: str
    description: str
    severity: str
    path: str
    line: int
    fingerprint: str
    preview: str

    def at_least(self, threshold: str) -> bool:
        """Whether this finding's severity is ``threshold`` or worse."""
        return severity_at_least(self.severity, threshold)

    def as_dict(self) -> dict[str, Any]:
        """The finding as plain data, for JSON output and the timeline."""
        return attrs.asdict(self)


@attrs.frozen
class ScanResult:
    """The outcome of one scan of a tree.

    Attributes:
        findings: Secrets not suppressed by an honoured inline marker, and any
            untrusted markers; waivers are applied separately
            (:func:`apply_waivers`).
        suppressed: Findings on a line carrying an honoured inline marker.
        markers: Fingerprints of every inline allow marker seen; a loop records
            them at its start and passes them as ``trusted_markers`` later.
        files_considered: Regular files listed for scanning.
        files_read: Files read and hashed (not trusted from the cache).
        files_cached: Files whose cached result was used without reading them.
        files_skipped: Files not scanned: binary, over the size limit or unreadable.
        skipped_large: The files skipped for their size.
        bytes_read: Bytes read from the files read.
        duration: Wall-clock seconds the scan took.
        ruleset_digest: The digest of the rules the scan applied.
        cache_note: Why the cache could not be used, when it could not.
    """

    findings: tuple[Finding, ...]
    suppressed: tuple[Finding, ...]
    markers: frozenset[str]
    files_considered: int
    files_read: int
    files_cached: int
    files_skipped: int
    skipped_large: tuple[str, ...]
    bytes_read: int
    duration: float
    ruleset_digest: str
    cache_note: str | None = None

    def at_least(self, threshold: str) -> tuple[Finding, ...]:
        """The findings of severity ``threshold`` or worse."""
        return tuple(finding for finding in self.findings if finding.at_least(threshold))

    def as_dict(self) -> dict[str, Any]:
        """The result as plain data (markers sorted), for JSON output."""
        data = attrs.asdict(self)
        data["markers"] = sorted(self.markers)
        return data
