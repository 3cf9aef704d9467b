"""``forge land``: a batch's done changes onto the base, one at a time, each verified.

The batch state is built as ``forge supervise`` leaves it: a ``summary.json``
under ``.forge/runs/<id>/`` and, per loop, a worktree ``.forge/worktrees/<c>``
on the branch ``forge/<c>`` — made with real git.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.support import Repo, spawn_forge

RUN_ID = "20261204T010000Z-abc123"


def _project(repo: Repo, log: Path, verify: str = "") -> None:
    """A project whose verify lists the tree's ``*.txt`` files into ``log``, then ``verify``."""
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "sh verify.sh"\nspecs = []\ntests = []\n',
    )
    repo.write(
        "verify.sh",
        f'ls *.txt 2>/dev/null | tr "\\n" " " >> "{log}"\necho >> "{log}"\n{verify}\n',
    )
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    repo.git("branch", "-M", "main")


def _change(repo: Repo, name: str, files: dict[str, str], *, commit: bool = True) -> Path:
    tree = repo.root / ".forge" / "worktrees" / name
    tree.parent.mkdir(parents=True, exist_ok=True)
    repo.git("worktree", "add", "-q", "-b", f"forge/{name}", str(tree), "HEAD")
    for relative, text in files.items():
        (tree / relative).write_text(text, encoding="utf-8")
    if commit:
        Repo(tree).commit(f"{name}: work")
    return tree


def _batch(repo: Repo, *loops: tuple[str, str]) -> None:
    folder = repo.root / ".forge" / "runs" / RUN_ID
    folder.mkdir(parents=True, exist_ok=True)
    summary = {"run_id": RUN_ID, "loops": [{"change": c, "reason": r} for c, r in loops]}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


def _events(repo: Repo, change: str) -> list[dict[str, object]]:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    return [json.loads(line) for line in timeline.read_text().splitlines()]


def _head(repo: Repo, ref: str = "main") -> str:
    return repo.git("rev-parse", ref).strip()


def _branches(repo: Repo) -> str:
    return repo.git("branch", "--list", "--format=%(refname:short)", "forge/*")


def test_three_done_changes_land_in_order_each_verified_on_the_combined_tree(
    repo: Repo, tmp_path: Path
) -> None:
    log = tmp_path / "seen.log"
    _project(repo, log)
    _change(repo, "checkout", {"a.txt": "a\n"})
    _change(repo, "billing", {"b.txt": "b\n"})
    # Work the loop left uncommitted is committed on its branch first.
    _change(repo, "search", {"c.txt": "c\n"}, commit=False)
    _change(repo, "stuck", {"d.txt": "d\n"})
    _batch(repo, ("checkout", "done"), ("billing", "done"), ("search", "done"), ("stuck", "max"))
    (repo.root / "notes.local").write_text("mine\n")  # the person's untracked file

    done = repo.forge("land", "--json")

    assert done.code == 0, done.err
    document = json.loads(done.out)
    assert [c["change"] for c in document["changes"]] == ["checkout", "billing", "search"]
    assert document["skipped"] == [{"change": "stuck", "why": "its loop ended max"}]
    # Each verify saw the changes landed before it.
    assert log.read_text().splitlines() == ["a.txt ", "a.txt b.txt ", "a.txt b.txt c.txt "]
    files = repo.git("ls-tree", "--name-only", "main").split()
    assert {"a.txt", "b.txt", "c.txt"} <= set(files)
    assert "d.txt" not in files
    # The working tree followed the base; the person's file is untouched.
    assert (repo.root / "c.txt").read_text() == "c\n"
    assert (repo.root / "notes.local").read_text() == "mine\n"
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""
    for order, change in enumerate(("checkout", "billing", "search"), start=1):
        kinds = [e["event"] for e in _events(repo, change)]
        assert kinds == ["land.done", "land.cleaned"]
        landed = _events(repo, change)[0]
        assert landed["base"] == "main"
        assert landed["verify"] == "PASS"
        assert landed["order"] == order
        assert landed["mode"] == "rebase"
        assert not (repo.root / ".forge" / "worktrees" / change).exists()
    assert _events(repo, "search")[0]["commit"] == _head(repo)
    assert _branches(repo).split() == ["forge/stuck"]
    assert not (repo.root / ".forge" / "land" / "scratch").exists()
    subjects = repo.git("log", "--format=%s", "main").splitlines()
    assert "forge: uncommitted work of search" in subjects

    again = repo.forge("land")
    assert again.code == 0
    assert "land: checkout — skipped: no branch forge/checkout" in again.out


def test_a_conflicting_pair_lands_one_and_reports_the_other_with_its_files(
    repo: Repo, tmp_path: Path
) -> None:
    _project(repo, tmp_path / "seen.log")
    _change(repo, "left", {"README.md": "left\n"})
    _change(repo, "right", {"README.md": "right\n"})
    _batch(repo, ("left", "done"), ("right", "done"))

    done = repo.forge("land", "--plain")

    assert done.code == 1
    assert done.lines[0].startswith("land: left — landed on ")
    assert done.lines[1] == "land: right — CONFLICT in README.md; base unchanged"
    assert repo.git("show", "HEAD:README.md") == "left\n"
    conflict = _events(repo, "right")[-1]
    assert conflict["event"] == "land.conflict"
    assert conflict["files"] == ["README.md"]
    # The conflicting change keeps its worktree and branch for a person.
    assert "forge/right" in _branches(repo)
    assert (repo.root / ".forge" / "worktrees" / "right" / ".git").exists()


def test_a_change_that_passes_alone_but_fails_on_the_new_base_is_refused(
    repo: Repo, tmp_path: Path
) -> None:
    # Either change alone passes; both together fail.
    _project(repo, tmp_path / "seen.log", "test ! -e p.txt || test ! -e q.txt")
    _change(repo, "p", {"p.txt": "p\n"})
    _change(repo, "q", {"q.txt": "q\n"})
    _batch(repo, ("p", "done"), ("q", "done"))

    done = repo.forge("land", "--plain")

    assert done.code == 1
    after_p = _head(repo)
    assert done.lines[1] == "land: q — verify FAIL on the combined tree (tests); base unchanged"
    assert "p.txt" in repo.git("ls-tree", "--name-only", "HEAD")
    assert not (repo.root / "q.txt").exists()
    failed = _events(repo, "q")[-1]
    assert failed["event"] == "land.failed"
    assert failed["checks"] == ["tests"]
    assert failed["verify"] == "FAIL"
    assert _head(repo) == after_p

    alone = repo.forge("land", "q", "--order", "q", "--dry-run")
    assert alone.code == 0
    assert "plan 1: q — rebase onto " in alone.out


def test_merge_and_squash_produce_their_history(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    tree = _change(repo, "merged", {"m.txt": "m\n"})
    (tree / "m2.txt").write_text("m2\n")
    Repo(tree).commit("merged: more")
    squashed = _change(repo, "squashed", {"s.txt": "s\n"})
    (squashed / "s2.txt").write_text("s2\n")
    Repo(squashed).commit("squashed: more")
    before = _head(repo, "HEAD")

    merge = repo.forge("land", "merged", "--merge")
    assert merge.code == 0, merge.err
    parents = repo.git("log", "-1", "--format=%P", "HEAD").split()
    assert len(parents) == 2
    assert parents[0] == before

    squash = repo.forge("land", "squashed", "--squash")
    assert squash.code == 0, squash.err
    assert repo.git("log", "-1", "--format=%P", "HEAD").split() == [_head(repo, "HEAD~1")]
    assert _head(repo, "HEAD~1") != before
    assert repo.git("log", "-1", "--format=%s", "HEAD").strip() == "forge land: squashed"
    assert repo.git("diff", "--name-only", "HEAD~1", "HEAD").split() == ["s.txt", "s2.txt"]
    assert _events(repo, "squashed")[0]["mode"] == "squash"


def test_keep_keeps_the_worktree_and_branch(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    _change(repo, "kept", {"k.txt": "k\n"})

    done = repo.forge("land", "kept", "--keep")

    assert done.code == 0, done.err
    assert (repo.root / ".forge" / "worktrees" / "kept" / "k.txt").exists()
    assert "forge/kept" in _branches(repo)
    assert [e["event"] for e in _events(repo, "kept")] == ["land.done"]
    again = repo.forge("land", "kept")
    assert "land: kept — skipped: already landed" in again.out


def test_bad_input_is_refused_with_exit_2_and_nothing_moves(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    no_batch = repo.forge("land")
    assert no_batch.code == 2
    assert "no batch to land" in no_batch.err
    unknown = repo.forge("land", "nosuch")
    assert unknown.code == 2
    assert "unknown change 'nosuch'" in unknown.err
    _change(repo, "dirty", {"x.txt": "x\n"})
    before = _head(repo)
    repo.write("README.md", "edited, not committed\n")
    refused = repo.forge("land", "dirty")
    assert refused.code == 2
    assert "uncommitted changes (README.md)" in refused.err
    assert "Traceback" not in refused.err
    assert _head(repo) == before
    assert (repo.root / "README.md").read_text() == "edited, not committed\n"
    bad_base = repo.forge("land", "dirty", "--base", "nosuch")
    assert bad_base.code == 2
    assert "no such branch" in bad_base.err


def test_outside_a_git_repository_it_is_a_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "forge.toml").write_text("")
    done = Repo(folder).forge("land")
    assert done.code == 2
    assert "needs a git repository" in done.err


def test_the_verify_is_the_loops_own_from_its_loop_table(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "sh verify.sh"\nspecs = []\ntests = []\n\n'
        '[[loop]]\nchange = "strict"\nworktree = true\nverify.command = "exit 3"\n',
    )
    repo.commit("strict loop")
    _change(repo, "strict", {"s.txt": "s\n"})
    _change(repo, "easy", {"e.txt": "e\n"})
    before = _head(repo)

    done = repo.forge("land", "strict", "easy", "--order", "easy", "--plain")

    assert done.code == 1
    assert done.lines[0].startswith("land: easy — landed on main")
    assert (
        done.lines[1] == "land: strict — verify FAIL on the combined tree (tests); base unchanged"
    )
    assert repo.git("rev-parse", "HEAD~1").strip() == before


def test_conflicting_flags_and_orders_are_usage_errors(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    _change(repo, "one", {"o.txt": "o\n"})
    both = repo.forge("land", "one", "--merge", "--squash")
    assert both.code == 2
    assert "exclude each other" in both.err
    stranger = repo.forge("land", "one", "--order", "two")
    assert stranger.code == 2
    assert "--order names 'two'" in stranger.err
    other = tmp_path / "other"
    repo.git("worktree", "add", "-q", "-b", "side", str(other), "HEAD")
    elsewhere = repo.forge("land", "one", "--base", "side")
    assert elsewhere.code == 2
    assert "checked out in another worktree" in elsewhere.err
    assert "forge/one" in _branches(repo)


def _interrupted(repo: Repo, change: str, files: dict[str, str]) -> tuple[str, str]:
    """The state a kill between ``update-ref`` and ``read-tree`` leaves, made by hand.

    The change is combined onto main in a throwaway worktree, main's ref is
    moved to the result, the checked-out files stay at the old head, and the
    journal says so. Returns ``(old, new)``.
    """
    _change(repo, change, files)
    old = _head(repo)
    side = repo.root.parent / f"combine-{change}"
    repo.git("worktree", "add", "-q", "--detach", str(side), old)
    Repo(side).git("merge", "-q", "--ff-only", f"forge/{change}")
    new = Repo(side).git("rev-parse", "HEAD").strip()
    repo.git("worktree", "remove", "--force", str(side))
    repo.git("update-ref", "refs/heads/main", new, old)
    journal = repo.root / ".forge" / "land" / "pending.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    pending = {
        "change": change,
        "base": "main",
        "old": old,
        "new": new,
        "mode": "rebase",
        "order": 1,
        "keep": False,
        "checked_out": True,
    }
    journal.write_text(json.dumps(pending), encoding="utf-8")
    # A killed run's scratch worktree is left too.
    repo.git("worktree", "add", "-q", "--detach", str(repo.root / ".forge/land/scratch"), old)
    return old, new


def test_a_landing_killed_before_the_tree_followed_is_finished_by_the_next_run(
    repo: Repo, tmp_path: Path
) -> None:
    _project(repo, tmp_path / "seen.log")
    repo.write("README.md", "old readme\n")
    repo.commit("readme")
    _old, new = _interrupted(repo, "half", {"h.txt": "h\n", "README.md": "new readme\n"})
    # The branch moved, the files did not: this is what git sees.
    assert repo.git("status", "--porcelain", "--untracked-files=no") != ""
    assert not (repo.root / "h.txt").exists()
    assert repo.forge("verify", "--change", "half").code == 0  # the change is known
    status = json.loads(repo.forge("status", "--json").out)
    [row] = status["changes"]
    assert row["land"] == "an interrupted landing onto main: forge land finishes it"

    done = repo.forge("land", "half", "--plain")

    assert done.code == 0, done.err
    assert f"land: half — finished an interrupted landing on main ({new[:7]})" in done.out
    assert _head(repo) == new
    assert repo.git("status", "--porcelain") == ""
    assert (repo.root / "h.txt").read_text() == "h\n"
    assert (repo.root / "README.md").read_text() == "new readme\n"
    assert not (repo.root / ".forge" / "land" / "pending.json").exists()
    assert not (repo.root / ".forge" / "land" / "scratch").exists()
    assert "scratch" not in repo.git("worktree", "list")
    landed = [e for e in _events(repo, "half") if str(e["event"]).startswith("land.")]
    assert [e["event"] for e in landed] == ["land.done", "land.cleaned"]
    assert landed[0]["commit"] == new
    assert "forge/half" not in _branches(repo)
    status = json.loads(repo.forge("status", "--json").out)
    assert status["changes"][0]["land"] == f"landed on main ({new[:7]})"

    again = repo.forge("land", "--base", "main", "--dry-run")
    assert again.code == 2  # no batch: and nothing is pending any more
    assert "interrupted" not in again.out


def test_a_half_written_tree_is_finished_but_the_persons_own_edits_stop_it(
    repo: Repo, tmp_path: Path
) -> None:
    _project(repo, tmp_path / "seen.log")
    _old, new = _interrupted(repo, "part", {"p.txt": "p\n", "README.md": "landed\n"})
    # read-tree killed half-way: one of NEW's files written, the index still OLD's.
    (repo.root / "p.txt").write_text("p\n")
    (repo.root / "README.md").write_text("landed\n")
    repo.write("verify.sh", "echo mine\n")  # and the person's own edit

    refused = repo.forge("land", "part")

    assert refused.code == 2
    assert "interrupted landing of part" in refused.err
    assert "uncommitted changes (verify.sh)" in refused.err
    assert "Traceback" not in refused.err
    assert (repo.root / "verify.sh").read_text() == "echo mine\n"
    assert (repo.root / ".forge" / "land" / "pending.json").exists()

    repo.git("checkout", "--", "verify.sh")
    done = repo.forge("land", "part")

    assert done.code == 0, done.err
    assert _head(repo) == new
    assert repo.git("status", "--porcelain") == ""
    assert (repo.root / "README.md").read_text() == "landed\n"
    assert [e["event"] for e in _events(repo, "part")] == ["land.done", "land.cleaned"]


def test_a_landing_killed_before_the_base_moved_is_dropped(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    old, new = _interrupted(repo, "early", {"e.txt": "e\n"})
    repo.git("update-ref", "refs/heads/main", old, new)  # the kill came before update-ref

    done = repo.forge("land", "early", "--plain")

    assert done.code == 0, done.err
    assert done.lines[0] == "land: early — an interrupted landing had not moved main"
    assert done.lines[1].startswith("land: early — landed on main")
    assert [e["event"] for e in _events(repo, "early")] == ["land.done", "land.cleaned"]
    assert repo.git("status", "--porcelain") == ""


def test_a_journal_forge_did_not_write_is_a_usage_error(repo: Repo, tmp_path: Path) -> None:
    _project(repo, tmp_path / "seen.log")
    _change(repo, "any", {"y.txt": "y\n"})
    journal = repo.root / ".forge" / "land" / "pending.json"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_text('{"change": "any"}')
    before = _head(repo)

    done = repo.forge("land", "any")

    assert done.code == 2
    assert "is not a pending landing forge can read" in done.err
    assert "Traceback" not in done.err
    assert _head(repo) == before


def test_a_second_land_run_is_refused_while_one_runs(repo: Repo, tmp_path: Path) -> None:
    started, go = tmp_path / "started", tmp_path / "go"
    os.mkfifo(started)
    os.mkfifo(go)
    # The first run's verify says it started, then waits for the test's word.
    _project(repo, tmp_path / "seen.log", f'echo up > "{started}"\nread word < "{go}"')
    _change(repo, "slow", {"s.txt": "s\n"})
    _batch(repo, ("slow", "done"))
    first = spawn_forge(["land", "--plain"], cwd=repo.root)
    try:
        with open(started, encoding="utf-8") as signal:
            assert signal.read() == "up\n"

        second = repo.forge("land", "--plain")

        assert second.code == 2
        assert "another forge land is running in this project" in second.err
        assert "Traceback" not in second.err
        assert repo.forge("land", "--dry-run").code == 0  # reading the plan is not a run
    finally:
        with open(go, "w", encoding="utf-8") as word:
            word.write("go\n")
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert "land: slow — landed on main" in out
    assert repo.forge("land", "--plain").code == 0  # the lock went with the run
