"""``forge supervise``: one working tree per loop, and worktrees that survive a clean start."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")

SHARED = "share the working tree"
FIX = "set worktree = true on all but one of them, or give each its own dir"


def agent(folder: Path, name: str, *steps: dict[str, Any]) -> str:
    script = folder / f"{name}.json"
    script.write_text(json.dumps({"steps": list(steps)}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def two_loops(repo: Repo, *, first: str = "", second: str = "", head: str = "") -> str:
    busy = agent(
        repo.root.parent, "busy", {"write": {"busy.txt": "edit\n"}, "print": "FORGE_DONE\n"}
    )
    idle = agent(repo.root.parent, "idle", {"print": "FORGE_DONE\n"})
    return (
        f'[verify]\ncommand = ""\nspecs = []\n{head}\n'
        f'[[loop]]\nchange = "busy"\ncmd = {json.dumps(busy)}\n{first}\n'
        f'[[loop]]\nchange = "idle"\ncmd = {json.dumps(idle)}\n{second}\n'
    )


def test_two_loops_on_one_tree_are_refused_naming_them_and_the_fix(repo: Repo) -> None:
    repo.write("forge.toml", two_loops(repo))
    for args in (["supervise"], ["supervise", "--dry-run"], ["policy", "check"]):
        done = repo.forge(*args)
        assert done.code == 2, (args, done)
        assert "two loops cannot share one working tree" in done.err
        assert (
            f"loops busy (forge.toml: loop[0]), idle (forge.toml: loop[1]) {SHARED} "
            f"{repo.root.resolve()} without worktrees" in done.err
        )
        assert FIX in done.err
    assert not (repo.root / ".forge").exists()  # nothing ran
    # One of them alone is not shared.
    assert repo.forge("supervise", "--only", "idle", "--dry-run").code == 0


def test_a_worktree_or_a_folder_of_its_own_is_accepted(repo: Repo) -> None:
    repo.write("forge.toml", two_loops(repo, first="worktree = true"))
    assert repo.forge("supervise", "--dry-run").code == 0
    assert repo.forge("policy", "check").code == 0
    repo.write("a/.keep", "")
    repo.write("b/.keep", "")
    repo.write("forge.toml", two_loops(repo, first='dir = "a"', second='dir = "b"'))
    assert repo.forge("supervise", "--dry-run").code == 0
    checked = repo.forge("policy", "check")
    assert checked.code == 0, checked
    assert SHARED not in checked.out


def test_auto_gives_each_shared_loop_its_own_worktree(repo: Repo) -> None:
    repo.write("forge.toml", two_loops(repo, head='[supervise]\nworktrees = "auto"'))
    note = (
        f"note: loops busy (forge.toml: loop[0]), idle (forge.toml: loop[1]) {SHARED} "
        f"{repo.root.resolve()} without worktrees: each gets its own worktree "
        '([supervise] worktrees = "auto")'
    )
    checked = repo.forge("policy", "check")
    assert checked.code == 0, checked
    assert note in checked.lines
    plan = repo.forge("supervise", "--dry-run")
    assert plan.code == 0, plan
    assert note in plan.lines
    assert any("(worktree .forge/worktrees/idle from HEAD)" in line for line in plan.lines)
    done = repo.forge("supervise")
    assert done.code == 0, done
    assert note in done.lines
    worktrees = repo.root / ".forge" / "worktrees"
    assert (worktrees / "busy" / "busy.txt").is_file()
    assert not (worktrees / "idle" / "busy.txt").exists()  # the idle loop never saw it
    assert not (repo.root / "busy.txt").exists()


def committing_loop(repo: Repo) -> str:
    work = agent(
        repo.root.parent,
        "committer",
        {"shell": "git commit -q --allow-empty -m work", "print": "FORGE_DONE\n"},
    )
    return (
        '[verify]\ncommand = ""\nspecs = []\n'
        f'[[loop]]\nchange = "kept"\nworktree = true\ncmd = {json.dumps(work)}\n'
    )


def test_a_clean_start_remakes_the_worktree_on_its_branch(repo: Repo) -> None:
    repo.write("forge.toml", committing_loop(repo))
    first = repo.forge("supervise")
    assert first.code == 0, first
    assert repo.git("log", "--format=%s", "forge/kept").splitlines()[0] == "work"
    shutil.rmtree(repo.root / ".forge")  # git still registers the worktree
    assert "prunable" in repo.git("worktree", "list", "--porcelain")
    again = repo.forge("supervise")
    assert again.code == 0, again
    assert "cannot create the worktree" not in again.out + again.err
    # The earlier commit carried over: the rerun committed on top of it.
    assert repo.git("log", "--format=%s", "forge/kept").splitlines()[:3] == [
        "work",
        "work",
        "initial",
    ]
    head = subprocess.run(
        ["git", "branch", "--show-current"],
        cwd=repo.root / ".forge" / "worktrees" / "kept",
        capture_output=True,
        text=True,
        check=True,
    )
    assert head.stdout.strip() == "forge/kept"
    assert "prunable" not in repo.git("worktree", "list", "--porcelain")


def test_an_impossible_worktree_ends_worktree_failed_with_gits_message(repo: Repo) -> None:
    repo.write("forge.toml", committing_loop(repo))
    repo.write(".forge/worktrees/kept", "a file where the worktree should go\n")
    done = repo.forge("supervise", "--json")
    assert done.code == 1, done
    [loop] = json.loads(done.out)["loops"]
    assert loop["reason"] == "worktree-failed"
    assert loop["detail"].startswith("cannot create the worktree of loop 'kept': fatal: ")
    assert "already exists" in loop["detail"]  # git's own words
    assert loop["iterations"] == 0
