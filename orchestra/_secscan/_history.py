"""The secret scan of a commit range: the lines its commits added.

A secret committed and removed in the next commit is gone from the tree and
still in the history a push would publish. ``forge secscan --history`` reads
``git log -p`` of a range (by default the commits not yet on the upstream,
else the last 50) and scans each commit's added lines per file, with the same
rules, fingerprints (so the tree's waivers apply) and previews.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from .._errors import UsageError
from .._git import git_output, run_git
from ._findings import Finding, secret_fingerprint
from ._match import find_secrets, preview
from ._rules import Ruleset

DEFAULT_DEPTH = 50
# git log of a range can take a while on a large history: minutes, not seconds.
_LOG_TIMEOUT = 600.0
_COMMIT = "\0commit "
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@attrs.frozen
class HistoryFinding:
    """A secret a commit added: the commit, and the finding as the tree scan would show it."""

    commit: str
    finding: Finding

    def as_dict(self) -> dict[str, object]:
        return {"commit": self.commit, **self.finding.as_dict()}


@attrs.frozen
class HistoryScan:
    """What a range's commits added: its findings, the range and how many commits."""

    range: str
    commits: int
    findings: tuple[HistoryFinding, ...]


def default_range(root: Path) -> tuple[str, tuple[str, ...]]:
    """The commits not yet on the upstream (``@{upstream}..HEAD``), else the last 50.

    Returns what to show, and the arguments that select them for ``git log``.
    """
    upstream = git_output(root, "rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}")
    if upstream is not None and upstream.strip():
        return "@{upstream}..HEAD", ("@{upstream}..HEAD",)
    return f"the last {DEFAULT_DEPTH} commits", (f"-n{DEFAULT_DEPTH}", "HEAD")


def scan_history(root: Path, ruleset: Ruleset, commit_range: str | None = None) -> HistoryScan:
    """Scan the lines added by the commits of ``commit_range`` (None: :func:`default_range`).

    Raises:
        UsageError: git does not know the range.
    """
    revisions: tuple[str, ...]
    if commit_range:
        shown, revisions = commit_range, (commit_range,)
    else:
        shown, revisions = default_range(root)
    if git_output(root, "rev-parse", "--verify", "-q", "HEAD") is None:
        return HistoryScan(shown, 0, ())  # no commit yet: no history
    result = run_git(
        root,
        "log",
        "-p",
        "--no-color",
        "--no-ext-diff",
        "--no-renames",
        "--unified=0",
        "--format=%x00commit %H",
        *revisions,
        "--",
        timeout=_LOG_TIMEOUT,
    )
    if not result.ok:
        detail = os.fsdecode(result.stderr).strip().splitlines()
        raise UsageError(
            f"secscan --history: git log {shown} failed" + (f" ({detail[-1]})" if detail else ""),
            hint="give a range git knows, e.g. origin/main..HEAD",
        )
    text = result.stdout.decode("utf-8", "surrogateescape")
    findings: list[HistoryFinding] = []
    commits = 0
    for commit, path, lines in _added_lines(text):
        if path is None:
            commits += 1
            continue
        findings.extend(_scan_added(commit, path, lines, ruleset))
    return HistoryScan(shown, commits, tuple(findings))


def _added_lines(text: str) -> Iterator[tuple[str, str | None, list[tuple[int, str]]]]:
    """Each commit (path None), then each of its files with the lines it added."""
    commit = ""
    path: str | None = None
    added: list[tuple[int, str]] = []
    number = 0
    for line in text.split("\n"):
        if line.startswith(_COMMIT):
            if path is not None and added:
                yield commit, path, added
            commit, path, added = line[len(_COMMIT) :].strip(), None, []
            yield commit, None, []
        elif line.startswith("+++ "):
            if path is not None and added:
                yield commit, path, added
            target = line[4:]
            path = target[2:] if target.startswith("b/") else None
            added = []
        elif line.startswith("@@"):
            hunk = _HUNK.match(line)
            number = int(hunk.group(1)) if hunk else 0
        elif line.startswith("+") and path is not None:
            added.append((number, line[1:]))
            number += 1
    if path is not None and added:
        yield commit, path, added


def _scan_added(
    commit: str, path: str, lines: list[tuple[int, str]], ruleset: Ruleset
) -> Iterator[HistoryFinding]:
    data = "\n".join(text for _, text in lines).encode("utf-8", "surrogateescape")
    # The NUL bytes of a binary file's text parts read as line ends, as in the tree scan.
    data = data.replace(b"\0", b"\n")
    rules = {rule.id: rule for rule in ruleset.rules}
    starts = [0]
    for _, text in lines:
        starts.append(starts[-1] + len(text.encode("utf-8", "surrogateescape")) + 1)
    index = 0
    for hit in find_secrets(data, ruleset, path=path):
        while index + 1 < len(lines) and starts[index + 1] <= hit.start:
            index += 1
        rule = rules[hit.rule_id]
        finding = Finding(
            rule.id,
            rule.description,
            rule.severity,
            path,
            lines[index][0],
            secret_fingerprint(rule.id, path, hit.secret),
            preview(hit.secret),
        )
        yield HistoryFinding(commit, finding)
