"""Parsing ``git status --porcelain=v2 -z``, and what two statuses say changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra._treestatus import (
    PathStatus,
    TreeStatus,
    parse_status,
    read_status,
    tree_delta,
    work_tree_prefix,
)

from .support import Repo

HEAD = "a" * 40
BLOB = "b" * 40
ZERO = "0" * 40


def records(*lines: str) -> bytes:
    return b"".join(line.encode() + b"\0" for line in lines)


def test_parse_every_record_kind() -> None:
    raw = records(
        f"# branch.oid {HEAD}",
        "# branch.head main",
        "# branch.upstream origin/main",
        "# branch.ab +1 -0",
        f"1 .M N... 100644 100644 100644 {BLOB} {BLOB} src/app.py",
        f"1 A. N... 000000 100644 100644 {ZERO} {BLOB} new file.txt",
        f"1 D. N... 100644 000000 000000 {BLOB} {ZERO} dropped.txt",
        f"1 .D N... 100755 100755 000000 {BLOB} {BLOB} gone.sh",
        f"u UU N... 100644 100644 100644 100644 {BLOB} {BLOB} {BLOB} clash.txt",
        f"u AU N... 000000 000000 100644 100644 {ZERO} {ZERO} {BLOB} theirs-only.txt",
        "? dir/with new/file.txt",
        "! ignored.log",
    )
    status = parse_status(raw, workdir=Path("/w"))
    assert (status.work_tree, status.head, status.branch) == (True, HEAD, "main")
    assert [e.path for e in status] == [
        "clash.txt",
        "dir/with new/file.txt",
        "dropped.txt",
        "gone.sh",
        "new file.txt",
        "src/app.py",
        "theirs-only.txt",
    ]
    assert status.get("src/app.py") == PathStatus(
        "src/app.py", ".M", in_index=True, head_mode="100644", head_oid=BLOB
    )
    added = status.get("new file.txt")
    assert added is not None
    assert (added.in_index, added.in_head) == (True, False)
    dropped = status.get("dropped.txt")
    assert dropped is not None
    assert (dropped.in_index, dropped.in_head) == (False, True)
    clash = status.get("clash.txt")
    assert clash is not None
    assert (clash.code, clash.in_index, clash.in_head) == ("UU", True, True)
    theirs = status.get("theirs-only.txt")
    assert theirs is not None
    assert not theirs.in_head
    untracked = status.get("dir/with new/file.txt")
    assert untracked is not None
    assert (untracked.untracked, untracked.in_index) == (True, False)
    assert status.get("ignored.log") is None


def test_a_rename_record_is_a_new_path_and_a_dropped_one() -> None:
    raw = records(
        f"# branch.oid {HEAD}",
        f"2 R. N... 100644 100644 100644 {BLOB} {BLOB} R100 new name.py",
        "old name.py",
        "? after.txt",
    )
    status = parse_status(raw, workdir=Path("/w"))
    assert sorted(status.paths) == ["after.txt", "new name.py", "old name.py"]
    new, old = status.get("new name.py"), status.get("old name.py")
    assert new is not None
    assert (new.in_index, new.in_head) == (True, False)
    assert old is not None
    assert (old.in_index, old.in_head, old.head_oid) == (False, True, BLOB)


def test_unborn_head_and_detached_head() -> None:
    unborn = parse_status(
        records("# branch.oid (initial)", "# branch.head main", "? a"), workdir=Path("/w")
    )
    assert (unborn.head, unborn.branch, sorted(unborn.paths)) == (None, "main", ["a"])
    detached = parse_status(
        records(f"# branch.oid {HEAD}", "# branch.head (detached)"), workdir=Path("/w")
    )
    assert (detached.head, detached.branch, detached.entries) == (HEAD, None, ())


def test_a_subfolder_keeps_its_own_paths_relative_to_itself() -> None:
    raw = records(
        f"# branch.oid {HEAD}",
        f"1 .M N... 100644 100644 100644 {BLOB} {BLOB} service/app.py",
        f"1 .M N... 100644 100644 100644 {BLOB} {BLOB} other/x.py",
        "? service/.forge/changes/c/state.yaml",
        "? service/new/deep.py",
    )
    status = parse_status(raw, workdir=Path("/w/service"), prefix="service/")
    assert sorted(status.paths) == ["app.py", "new/deep.py"]  # .forge/ is Forge's own


def test_names_with_newlines_and_a_path_listed_twice() -> None:
    raw = records(
        f"# branch.oid {HEAD}",
        f"1 D. N... 100644 000000 000000 {BLOB} {ZERO} line\nbreak.txt",
        "? line\nbreak.txt",
    )
    (entry,) = parse_status(raw, workdir=Path("/w")).entries
    assert entry.path == "line\nbreak.txt"
    assert (entry.in_index, entry.untracked, entry.in_head) == (False, True, True)


def test_something_else_is_refused() -> None:
    with pytest.raises(ValueError, match="porcelain v2"):
        parse_status(b" M v1 style\0", workdir=Path("/w"))
    with pytest.raises(ValueError, match="fields"):
        parse_status(b"1 .M N... short\0", workdir=Path("/w"))


def test_read_a_real_repository(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("tracked.py", "A = 1\n")
    repo.write("doomed.py", "D = 1\n")
    repo.commit("start")
    head = repo.git("rev-parse", "HEAD").strip()
    repo.write("tracked.py", "A = 2\n")
    (repo.root / "doomed.py").unlink()
    repo.write("brand/new/folder/file with space.txt", "x")
    repo.write("odd\nname.txt", "y")
    repo.write("debug.log", "ignored")
    repo.write(".forge/changes/c/breaker.yaml", "state: closed\n")
    status = read_status(repo.root)
    assert status is not None
    assert status.work_tree
    assert status.head == head
    assert sorted(status.paths) == [
        "brand/new/folder/file with space.txt",
        "doomed.py",
        "odd\nname.txt",
        "tracked.py",
    ]
    doomed = status.get("doomed.py")
    assert doomed is not None
    assert (doomed.code, doomed.in_index) == (".D", True)


def test_read_from_a_subfolder_and_outside_git(repo: Repo, tmp_path: Path) -> None:
    repo.write("service/app.py", "A = 1\n")
    repo.write("other/x.py", "X = 1\n")
    repo.commit("two folders")
    repo.write("service/app.py", "A = 2\n")
    repo.write("service/sub/new.py", "N = 1\n")
    repo.write("other/x.py", "X = 2\n")
    service = repo.root / "service"
    assert work_tree_prefix(service) == "service/"
    status = read_status(service)
    assert status is not None
    assert sorted(status.paths) == ["app.py", "sub/new.py"]
    plain = tmp_path / "plain"
    plain.mkdir()
    assert work_tree_prefix(plain) is None
    assert read_status(plain) == TreeStatus.outside(plain)


def test_an_unborn_branch(tmp_path: Path) -> None:
    fresh = Repo(tmp_path / "fresh")
    fresh.root.mkdir()
    fresh.git("init", "-q")
    fresh.write("first.txt", "1")
    status = read_status(fresh.root)
    assert status is not None
    assert status.head is None
    assert sorted(status.paths) == ["first.txt"]


def test_a_delta_lists_what_git_lists_now(repo: Repo) -> None:
    repo.write(".gitignore", "*.log\n")
    repo.write("kept.py", "K = 1\n")
    repo.write("edited.py", "E = 1\n")
    repo.commit("start")
    repo.write("edited.py", "E = 2\n")
    repo.write("notes.txt", "untracked")
    repo.write("later.txt", "will be ignored")
    before = read_status(repo.root)
    repo.write("edited.py", "E = 1\n")  # back as committed: clean, still tracked
    (repo.root / "notes.txt").unlink()  # gone
    repo.write(".gitignore", "*.log\nlater.txt\n")  # untracked, now ignored
    repo.write("fresh.txt", "new")
    after = read_status(repo.root)
    assert before is not None
    assert after is not None
    delta = tree_delta(before, after)
    assert delta is not None
    assert delta.listed == {"edited.py", "fresh.txt", ".gitignore"}
    assert delta.unlisted == {"notes.txt", "later.txt"}
    assert tree_delta(after, after) == type(delta)(
        frozenset({".gitignore", "fresh.txt"}), frozenset()
    )


def test_a_delta_across_commits(repo: Repo) -> None:
    repo.write("a.py", "A = 1\n")
    repo.write("b.py", "B = 1\n")
    repo.commit("start")
    before = read_status(repo.root)
    repo.write("a.py", "A = 2\n")
    (repo.root / "b.py").unlink()
    repo.write("c.py", "C = 1\n")
    repo.commit("the agent committed")
    repo.write("dirty.txt", "x")
    after = read_status(repo.root)
    assert before is not None
    assert after is not None
    delta = tree_delta(before, after)
    assert delta is not None
    assert delta.listed == {"a.py", "c.py", "dirty.txt"}
    assert delta.unlisted == {"b.py"}
    assert tree_delta(before, TreeStatus.outside(repo.root)) is None
