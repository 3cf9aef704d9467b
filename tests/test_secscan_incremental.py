"""A loop's scanner reads only what changed since its previous scan, and finds the same."""

from __future__ import annotations

import random
import string
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestra._policy import SecscanPolicy
from orchestra._secscan import _scan as scan_module
from orchestra._secscan import _walk as walk_module
from orchestra._secscan import scan_tree
from orchestra._secscan._project import ProjectScanner, SecscanReport
from orchestra._treestatus import read_status

from .support import Repo


def leak(seed: int) -> str:
    rng = random.Random(seed)
    token = "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))
    return f"GITHUB_TOKEN={token}\n"


def counts(report: SecscanReport) -> tuple[Any, ...]:
    result = report.result
    return (
        result.findings,
        result.suppressed,
        result.markers,
        result.files_considered,
        result.files_skipped,
        result.skipped_large,
    )


class Loop:
    """Scans as a loop does: each time with the work tree's fresh status."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        policy = attrs.evolve(SecscanPolicy(), max_file_bytes=2000)
        self.root = root
        self.scanner = ProjectScanner.for_project(policy, root=root, workdir=root)
        self.first = True
        self.listing_allowed = True
        real = walk_module.listed_files

        def listed_files(root: Path) -> tuple[list[str], bool]:
            if not self.listing_allowed:
                raise AssertionError("an incremental scan listed the whole tree")
            return real(root)

        monkeypatch.setattr(scan_module, "listed_files", listed_files)

    def scan(self) -> SecscanReport:
        status = read_status(self.root)
        report = self.scanner.scan(status)
        if self.first:
            self.first = False
            self.scanner.trusted_markers = report.result.markers
        # From now on the loop never lists the tree again: only what changed is read.
        self.listing_allowed = False
        return report

    def full(self) -> tuple[Any, ...]:
        """What a full scan of the same tree reports (a fresh scanner, no cache)."""
        self.listing_allowed = True
        result = scan_tree(
            self.root,
            self.scanner.ruleset,
            max_bytes=2000,
            trusted_markers=self.scanner.trusted_markers,
        )
        self.listing_allowed = False
        report = SecscanReport(result, result.findings, (), "high")
        return counts(report)


def commit(repo: Repo, *, write: dict[str, str] | None = None, delete: str | None = None) -> None:
    for path, text in (write or {}).items():
        repo.write(path, text)
    if delete is not None:
        (repo.root / delete).unlink()
    repo.commit("the agent committed")


def stage(repo: Repo, path: str, text: str) -> None:
    repo.write(path, text)
    repo.git("add", path)


def paths(report: SecscanReport) -> list[str]:
    return sorted({finding.path for finding in report.kept})


def test_incremental_scans_match_full_scans(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("committed_leak.py", leak(1))
    repo.write("app.py", "A = 1\n")
    repo.write("doomed.py", "D = 1\n")
    repo.write("big.txt", "x" * 3000)
    (repo.root / "blob.bin").write_bytes(b"\x00\x01" + leak(2).encode())
    repo.write("marked.py", f"{leak(3).strip()}  # forge:allow-secret\n")
    repo.commit("start")
    loop = Loop(repo.root, monkeypatch)
    steps: list[tuple[str, Any]] = [
        ("nothing", lambda: None),
        ("an untracked .env", lambda: repo.write(".env", leak(4))),
        ("an ignored log", lambda: repo.write("debug.log", leak(5))),
        ("a leak in a tracked file", lambda: repo.write("app.py", "A = 1\n" + leak(6))),
        ("the leak removed again", lambda: repo.write("app.py", "A = 1\n")),
        ("the committed leak fixed", lambda: repo.write("committed_leak.py", "fixed\n")),
        ("the .env deleted", lambda: (repo.root / ".env").unlink()),
        ("a new folder", lambda: repo.write("new/deep/key.txt", leak(7))),
        ("a new marker", lambda: repo.write("app.py", f"{leak(8).strip()}  # gitleaks:allow\n")),
        ("the new folder ignored", lambda: repo.write(".gitignore", "*.log\nnew/\n")),
        ("a file grown too big", lambda: repo.write("doomed.py", leak(9) + "y" * 3000)),
        ("a file shrunk", lambda: repo.write("big.txt", leak(10))),
        ("a commit", partial(commit, repo, write={"c.py": leak(11)})),
        ("a deletion committed", partial(commit, repo, delete="c.py")),
        ("staged only", partial(stage, repo, "s.py", leak(12))),
        ("removed from the index", partial(repo.git, "rm", "-q", "--cached", "s.py")),
    ]
    for what, change in steps:
        change()
        report = loop.scan()
        assert counts(report) == loop.full(), what
    assert paths(report) == [
        "app.py",  # the marker the agent added is not trusted
        "big.txt",
        "blob.bin",  # the text after a NUL byte is scanned
        "doomed.py",  # over max_file_bytes: scanned in chunks
        "s.py",
    ]


def test_without_a_status_every_scan_lists_the_tree(repo: Repo) -> None:
    repo.write("a.txt", leak(1))
    repo.commit("start")
    scanner = ProjectScanner.for_project(SecscanPolicy(), root=repo.root, workdir=repo.root)
    assert paths(scanner.scan()) == ["a.txt"]
    repo.write("b.txt", leak(2))
    assert paths(scanner.scan()) == ["a.txt", "b.txt"]
    # A status of another folder cannot tell what changed here: a full scan.
    other = repo.root / "sub"
    other.mkdir()
    repo.write("c.txt", leak(3))
    assert paths(scanner.scan(read_status(other))) == ["a.txt", "b.txt", "c.txt"]
