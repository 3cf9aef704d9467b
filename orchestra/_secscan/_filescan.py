"""Scanning one file's bytes: its secrets and its inline allow markers.

The result holds no secret — only fingerprints, previews and line numbers — so
it can be cached on disk as it is, and it does not depend on which markers a
scan trusts: that is decided when the tree's results are put together.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from ._findings import marker_fingerprint, secret_fingerprint
from ._match import find_secrets, preview
from ._rules import Ruleset

# Markers other scanners honour, and Forge's own; compared without regard to case.
ALLOW_MARKERS = ("gitleaks:allow", "pragma: allowlist secret", "forge:allow-secret")
_MARKER_BYTES = tuple(marker.encode() for marker in ALLOW_MARKERS)
# Git's own test for a binary file: a NUL byte in the first 8000 bytes or so.
BINARY_SNIFF_BYTES = 8192


@attrs.frozen
class FileHit:
    """A secret in a file, as cached: no secret, only how to report it."""

    rule_id: str
    line: int
    fingerprint: str
    preview: str


@attrs.frozen
class FileScan:
    """What one file holds: its secrets and its markers (line -> fingerprint)."""

    hits: tuple[FileHit, ...] = ()
    markers: tuple[tuple[int, str], ...] = ()
    binary: bool = False

    def to_json(self) -> str:
        """A compact form for the cache."""
        return json.dumps(
            {
                "b": self.binary,
                "h": [[h.rule_id, h.line, h.fingerprint, h.preview] for h in self.hits],
                "m": [list(marker) for marker in self.markers],
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> FileScan:
        """Read :meth:`to_json` back.

        Raises:
            ValueError: the text is not what :meth:`to_json` writes.
        """
        try:
            data: Any = json.loads(text)
            hits = tuple(
                FileHit(str(rule), int(line), str(fingerprint), str(shown))
                for rule, line, fingerprint, shown in data["h"]
            )
            markers = tuple((int(line), str(fingerprint)) for line, fingerprint in data["m"])
            return cls(hits=hits, markers=markers, binary=bool(data["b"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a cached file scan: {exc}") from exc


def is_binary(data: bytes) -> bool:
    """Whether content is binary by git's test: a NUL byte near the start."""
    return b"\0" in data[:BINARY_SNIFF_BYTES]


def scan_bytes(data: bytes, path: str, ruleset: Ruleset) -> FileScan:
    """Scan one file's content.

    A binary file (a NUL byte near its start) is scanned too: its text parts,
    each NUL read as a line end, so a secret after a NUL byte is found.

    Args:
        data: The content.
        path: The file's path relative to the scanned root, ``/``-separated.
        ruleset: The rules to apply.
    """
    binary = is_binary(data)
    scanned = scan_chunk(data, path, ruleset)
    return attrs.evolve(scanned, binary=binary) if binary else scanned


def scan_chunk(
    data: bytes,
    path: str,
    ruleset: Ruleset,
    *,
    first_line: int = 1,
    offset: int = 0,
    markers_from: int = 0,
    seen: set[tuple[str, int]] | None = None,
) -> FileScan:
    """Scan a part of a file: the bytes from ``offset``, starting at line ``first_line``.

    For a large file read in overlapping chunks: ``seen`` holds the hits
    already reported (rule, offset in the file), and markers are taken only on
    the lines that begin at or after ``markers_from`` (the lines before were
    in the previous chunk, whole).
    """
    text = data.replace(b"\0", b"\n") if b"\0" in data else data
    hits: list[FileHit] = []
    line, counted_to = first_line, 0
    for hit in find_secrets(text, ruleset, path=path):
        if seen is not None:
            key = (hit.rule_id, offset + hit.start)
            if key in seen:
                continue
            seen.add(key)
        line += text.count(b"\n", counted_to, hit.start)
        counted_to = hit.start
        fingerprint = secret_fingerprint(hit.rule_id, path, hit.secret)
        hits.append(FileHit(hit.rule_id, line, fingerprint, preview(hit.secret)))
    before = text.count(b"\n", 0, markers_from)
    markers = tuple(
        (number + first_line - 1, fingerprint)
        for number, fingerprint in find_markers(text, path)
        if number > before
    )
    return FileScan(hits=tuple(hits), markers=markers)


def find_markers(data: bytes, path: str) -> tuple[tuple[int, str], ...]:
    """The lines carrying an inline allow marker, with each marker's fingerprint."""
    lowered = data.lower()
    if not any(marker in lowered for marker in _MARKER_BYTES):
        return ()
    found: dict[int, str] = {}
    for marker in _MARKER_BYTES:
        position = lowered.find(marker)
        while position >= 0:
            start = data.rfind(b"\n", 0, position) + 1
            end = data.find(b"\n", position)
            end = len(data) if end < 0 else end
            line = data.count(b"\n", 0, start) + 1
            found[line] = marker_fingerprint(path, data[start:end])
            position = lowered.find(marker, end)
    return tuple(sorted(found.items()))
