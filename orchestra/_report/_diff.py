"""What an escalated loop's agent changed, as the report shows it: redacted, then bounded (pure).

The diff is redacted whole before it is cut, so a secret split over two lines
(a private key block) is hidden as the scanner sees it, and the cut can never
leave half a secret behind. The cut keeps the first lines up to a count and a
size, and the report says how much it left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._redact import Redact
from ._model import WorkDiff

MAX_DIFF_LINES = 200
MAX_DIFF_BYTES = 20_000
# The diffstat keeps its per-file lines up to this many (its totals line always).
MAX_STAT_LINES = 40
# New files not yet tracked whose content is read into the diff.
MAX_NEW_FILES = 20


def diffstat(counts: Sequence[tuple[str, int | None, int | None]], *, more: int = 0) -> str:
    """A diffstat from each path's lines added and deleted (None: a binary file).

    ``src/a.py | +3 -1`` a line, then ``2 files changed, +5 -1``; ``more``
    counts files left out of ``counts`` (new files past the ones read).
    """
    lines = []
    added = deleted = 0
    width = max((len(path) for path, _, _ in counts), default=0)
    for path, plus, minus in counts:
        if plus is None or minus is None:
            lines.append(f"{path.ljust(width)} | binary")
            continue
        added, deleted = added + plus, deleted + minus
        lines.append(f"{path.ljust(width)} | +{plus} -{minus}")
    if more:
        lines.append(f"… and {more} more new file(s), not read")
    files = len(counts) + more
    if files:
        lines.append(f"{files} file(s) changed, +{added} -{deleted}")
    return "\n".join(lines)


def bounded_diff(
    base: str,
    stat: str,
    diff: str,
    *,
    redact: Redact | None,
    max_lines: int = MAX_DIFF_LINES,
    max_bytes: int = MAX_DIFF_BYTES,
) -> WorkDiff:
    """The diff as the report shows it.

    Args:
        base: What the diff is against, in words.
        stat: The diffstat (see :func:`diffstat`).
        diff: ``git diff``'s output.
        redact: The project's redaction (its secret-scan rules). None: the
            diff's lines are not shown, only its diffstat (a secret in them
            could not be hidden).
        max_lines, max_bytes: The most of the diff shown.
    """
    stat_lines = [line.rstrip() for line in stat.splitlines() if line.strip()]
    if len(stat_lines) > MAX_STAT_LINES + 1:
        left = len(stat_lines) - MAX_STAT_LINES - 1
        stat_lines = [*stat_lines[:MAX_STAT_LINES], f" … and {left} more file(s)", stat_lines[-1]]
    if redact is None:
        return WorkDiff(
            base=base,
            missing="its lines are not shown: the secret-scan rules that redact them "
            "could not be loaded",
            stat=tuple(stat_lines),
            total_lines=len(diff.splitlines()),
            total_bytes=len(diff.encode()),
        )
    text = redact(diff)
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in lines[:max_lines]:
        cost = len(line.encode()) + 1
        if size + cost > max_bytes:
            if not kept:  # one huge line: its beginning
                kept.append(line.encode()[:max_bytes].decode(errors="ignore") + " …")
            break
        kept.append(line)
        size += cost
    return WorkDiff(
        base=base,
        stat=tuple(redact_each(stat_lines, redact)),
        lines=tuple(kept),
        total_lines=len(lines),
        total_bytes=len(text.encode()),
    )


def redact_each(lines: Sequence[str], redact: Redact | None) -> list[str]:
    """Lines through the redaction (a path may hold a secret too); as they are without one."""
    return [redact(line) for line in lines] if redact is not None else list(lines)


def cut_words(diff: WorkDiff) -> str:
    """How much of the diff is left out, in words, or "" when it is shown whole."""
    if diff.cut_lines <= 0:
        return ""
    return (
        f"the first {len(diff.lines)} of {diff.total_lines} lines; {diff.cut_lines} cut, "
        f"of {_size(diff.total_bytes)} in all"
    )


def _size(count: int) -> str:
    return f"{count / 1000:.1f} KB" if count >= 1000 else f"{count} bytes"
