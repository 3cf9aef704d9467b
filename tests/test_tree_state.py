"""The verify fingerprint: the same for the same tree, different for any other."""

from __future__ import annotations

import os
from pathlib import Path

from orchestra._treestatus import read_status
from orchestra._workspace import TreeState, tree_state, tree_state_from

from .support import Repo


def fingerprint(root: Path) -> str:
    state = tree_state(root)
    assert state.fingerprint is not None
    status = read_status(root)
    assert status is not None
    # A caller holding a fresh status gets the very same value without git.
    assert tree_state_from(status) == state
    return state.fingerprint


def test_every_kind_of_change_shows_and_going_back_restores_it(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\nbuild/\n")
    repo.write("app.py", "A = 1\n")
    repo.write("tool.sh", "echo hi\n")
    repo.commit("start")
    clean = fingerprint(repo.root)
    seen = {clean}

    def changed() -> str:
        value = fingerprint(repo.root)
        assert value not in seen
        seen.add(value)
        return value

    repo.write("app.py", "A = 2\n")
    changed()  # a tracked edit
    repo.write("notes/new file.txt", "n")
    changed()  # an untracked file in a new folder
    repo.write("notes/new file.txt", "m")
    changed()  # its content
    (repo.root / "tool.sh").unlink()
    deleted = changed()  # a deletion
    repo.write("debug.log", "ignored")
    repo.write("build/out.o", "ignored")
    repo.write(".forge/changes/c/breaker.yaml", "forge's own state")
    assert fingerprint(repo.root) == deleted  # ignored files and .forge/ do not count
    repo.write("tool.sh", "echo hi\n")
    os.chmod(repo.root / "tool.sh", 0o755)
    changed()  # back, but executable now
    os.chmod(repo.root / "tool.sh", 0o644)
    (repo.root / "notes" / "new file.txt").unlink()
    repo.write("app.py", "A = 1\n")
    assert fingerprint(repo.root) == clean  # the same tree as at the start


def test_staging_does_not_change_the_tree(repo: Repo) -> None:
    repo.write("app.py", "A = 1\n")
    repo.commit("start")
    clean = fingerprint(repo.root)
    repo.write("app.py", "A = 2\n")
    edited = fingerprint(repo.root)
    repo.git("add", "app.py")
    assert fingerprint(repo.root) == edited  # the same content, staged
    repo.write("app.py", "A = 1\n")
    assert fingerprint(repo.root) == clean  # staged edit, work tree back as committed


def test_equal_trees_in_two_clones_have_equal_fingerprints(repo: Repo, tmp_path: Path) -> None:
    repo.write("app.py", "A = 1\n")
    repo.commit("start")
    clone = Repo(tmp_path / "clone")
    repo.git("clone", "-q", str(repo.root), str(clone.root))
    for copy in (repo, clone):
        copy.write("app.py", "A = 2\n")
        copy.write("new.txt", "same")
    assert fingerprint(repo.root) == fingerprint(clone.root)
    clone.write("new.txt", "different")
    assert fingerprint(repo.root) != fingerprint(clone.root)


def test_a_commit_changes_the_state_and_an_unborn_branch_has_one(tmp_path: Path) -> None:
    fresh = Repo(tmp_path / "fresh")
    fresh.root.mkdir()
    fresh.git("init", "-q")
    fresh.git("config", "user.email", "tests@forge.invalid")
    fresh.git("config", "user.name", "Forge tests")
    fresh.write("first.txt", "1")
    unborn = tree_state(fresh.root)
    assert unborn.commit is None
    assert unborn.fingerprint is not None
    fresh.git("add", "-A")
    fresh.git("commit", "-q", "-m", "first")
    born = tree_state(fresh.root)
    assert born.commit is not None
    assert born.fingerprint != unborn.fingerprint


def test_outside_git_there_is_no_state(tmp_path: Path) -> None:
    assert tree_state(tmp_path) == TreeState(commit=None, fingerprint=None)
