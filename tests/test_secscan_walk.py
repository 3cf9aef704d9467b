"""Which files the scan reads: git's view of the work tree, or .gitignore outside git."""

from __future__ import annotations

import os
import random
import string
from pathlib import Path

import pytest

from orchestra._secscan import Ruleset, list_files, load_rules, scan_tree

from .support import Repo


def fake_pat(seed: int = 0) -> str:
    rng = random.Random(seed)
    return "ghp_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


def leak(seed: int = 0) -> str:
    return f"GITHUB_TOKEN={fake_pat(seed)}\n"


@pytest.fixture(scope="module")
def ruleset() -> Ruleset:
    return load_rules()


def found_paths(root: Path, ruleset: Ruleset, *, max_bytes: int = 1_000_000) -> list[str]:
    result = scan_tree(root, ruleset, max_bytes=max_bytes)
    return sorted({finding.path for finding in result.findings})


def test_git_tree_tracked_untracked_and_ignored(repo: Repo, ruleset: Ruleset) -> None:
    repo.write(".gitignore", "ignored/\n*.log\n")
    repo.write("src/tracked.py", leak(1))
    repo.write("src/gone.py", leak(2))
    repo.commit("tracked")
    (repo.root / "src" / "gone.py").unlink()  # tracked but deleted: skipped, no error
    repo.write(".env", leak(3))  # untracked, not ignored: a fresh .env is caught
    repo.write("ignored/build.txt", leak(4))
    repo.write("debug.log", leak(5))
    repo.write(".forge/changes/x/state.yaml", leak(6))  # forge's own state
    assert found_paths(repo.root, ruleset) == [".env", "src/tracked.py"]
    listed = list_files(repo.root)
    assert "src/gone.py" in listed  # listed by git; the scan skips what is not there
    assert not any(path.startswith((".forge/", "ignored/", ".git/")) for path in listed)


def test_binary_and_oversized_files_are_scanned(repo: Repo, ruleset: Ruleset) -> None:
    (repo.root / "blob.bin").write_bytes(b"\x00\x01" + leak(1).encode())
    repo.write("big.txt", "x" * 2000 + "\n" + leak(2))
    repo.write("small.txt", leak(3))
    result = scan_tree(repo.root, ruleset, max_bytes=1000)
    # The text after a NUL byte is read; a file over the limit, in chunks.
    assert [f.path for f in result.findings] == ["big.txt", "blob.bin", "small.txt"]
    assert result.skipped_large == ()
    assert result.files_skipped == 0
    assert found_paths(repo.root, ruleset, max_bytes=10_000) == [
        "big.txt",
        "blob.bin",
        "small.txt",
    ]


def test_symlinks_are_not_followed(repo: Repo, ruleset: Ruleset, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text(leak(1))
    os.symlink(outside, repo.root / "link.txt")
    assert found_paths(repo.root, ruleset) == []


def test_a_linked_worktree_is_scanned_as_its_own_tree(repo: Repo, ruleset: Ruleset) -> None:
    repo.write("app.py", leak(1))
    repo.commit("app")
    worktree = repo.root.parent / "wt"
    repo.git("worktree", "add", "-q", str(worktree))
    (worktree / ".env").write_text(leak(2))
    (worktree / ".gitignore").write_text("secret-notes/\n")
    (worktree / "secret-notes").mkdir()
    (worktree / "secret-notes" / "n.txt").write_text(leak(3))
    assert found_paths(worktree, ruleset) == [".env", "app.py"]


def test_a_subfolder_of_a_repository(repo: Repo, ruleset: Ruleset) -> None:
    repo.write("svc/config.py", leak(1))
    repo.write("other/config.py", leak(2))
    assert found_paths(repo.root / "svc", ruleset) == ["config.py"]


def test_outside_git_the_gitignore_files_are_honoured(tmp_path: Path, ruleset: Ruleset) -> None:
    root = tmp_path / "plain"
    files = {
        ".gitignore": "*.log\nbuild/\n!keep.log\n",
        "app.py": leak(1),
        "debug.log": leak(2),
        "keep.log": leak(3),
        "build/out.txt": leak(4),
        "pkg/.gitignore": "local.cfg\n!debug.log\n",
        "pkg/local.cfg": leak(5),
        "pkg/debug.log": leak(6),  # re-included by the deeper .gitignore
        "pkg/mod.py": leak(7),
        "other/local.cfg": leak(8),  # pkg's patterns do not reach here
        ".git/config": leak(9),
        ".forge/cache/x": leak(10),
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert found_paths(root, ruleset) == [
        "app.py",
        "keep.log",
        "other/local.cfg",
        "pkg/debug.log",
        "pkg/mod.py",
    ]


def test_git_location_variables_from_a_hook_do_not_redirect_the_listing(
    repo: Repo, ruleset: Ruleset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("app.py", leak(1))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(elsewhere))
    monkeypatch.setenv("GIT_INDEX_FILE", str(elsewhere / "index"))
    assert found_paths(repo.root, ruleset) == ["app.py"]
