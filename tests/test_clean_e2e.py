"""``forge clean`` removes what landed and keeps unlanded work.

Real ``forge`` in a scratch git repository with real worktrees and branches
(``.forge/worktrees/<change>`` on ``forge/<change>``, as ``forge supervise``
makes them); the ``land.*`` events ``forge land`` writes are appended to each
change's timeline through the state API.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestra._state import ChangePaths, OtherEvent, append_event, exclusive_lock, read_timeline

from .support import Repo


def _worktree(repo: Repo, change: str) -> Path:
    path = repo.root / ".forge" / "worktrees" / change
    path.parent.mkdir(parents=True, exist_ok=True)
    repo.git("worktree", "add", "-q", "-b", f"forge/{change}", str(path), "main")
    return path


def _commit_in(path: Path, name: str, text: str) -> None:
    (path / name).write_text(text, encoding="utf-8")
    Repo(path).commit(f"add {name}")


def _event(repo: Repo, change: str, name: str, **fields: Any) -> None:
    paths = ChangePaths(repo.root, change)
    with exclusive_lock(paths.lock):
        append_event(paths.timeline, change, OtherEvent(name=name, fields=fields))


def _land(repo: Repo, change: str) -> None:
    """Land the change as ``forge land`` would: merge it into main, record land.done."""
    repo.git("merge", "-q", "--no-ff", "-m", f"land {change}", f"forge/{change}")
    head = repo.git("rev-parse", "HEAD").strip()
    _event(
        repo, change, "land.done", base="main", commit=head, mode="merge", verify="PASS", order=1
    )


def _kinds(repo: Repo, change: str) -> list[dict[str, Any]]:
    records = read_timeline(ChangePaths(repo.root, change).timeline).events
    return [r for r in records if str(r.get("event", "")).startswith("land.")]


def _branches(repo: Repo) -> list[str]:
    return repo.git("for-each-ref", "--format=%(refname:short)", "refs/heads/").split()


def test_clean_removes_landed_and_keeps_unlanded_work(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    landed = _worktree(repo, "demo-login")
    _commit_in(landed, "login.py", "print('login')\n")
    _land(repo, "demo-login")
    pending = _worktree(repo, "demo-search")
    _commit_in(pending, "search.py", "print('search')\n")
    _commit_in(pending, "index.py", "print('index')\n")
    (pending / "draft.txt").write_text("half done\n", encoding="utf-8")

    dry = repo.forge("clean", "--dry-run")
    assert dry.code == 0, dry.err
    assert landed.exists()
    assert "forge/demo-login" in _branches(repo)
    assert "would remove demo-login" in dry.out

    done = repo.forge("clean")
    assert done.code == 0, done.err
    assert not landed.exists()
    assert "forge/demo-login" not in _branches(repo)
    assert "removed demo-login: worktree" in done.out
    assert (
        "kept demo-search: 2 commit(s) not on main and uncommitted changes; "
        "forge land demo-search, or forge clean --abandon demo-search --reason WHY"
    ) in done.out
    assert pending.exists()
    assert "forge/demo-search" in _branches(repo)
    assert "demo-login" not in repo.git("worktree", "list")
    cleaned = _kinds(repo, "demo-login")[-1]
    assert cleaned["event"] == "land.cleaned"
    assert cleaned["branch"] == "forge/demo-login"
    assert cleaned["worktree"].endswith(".forge/worktrees/demo-login")


def test_a_landed_change_with_later_work_is_kept(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    path = _worktree(repo, "demo-api")
    _commit_in(path, "api.py", "v1\n")
    _land(repo, "demo-api")
    _commit_in(path, "api.py", "v2\n")

    done = repo.forge("clean", "--json")
    assert done.code == 0, done.err
    shown = json.loads(done.out)
    assert shown["removed"] == []
    assert shown["kept"][0]["change"] == "demo-api"
    assert shown["kept"][0]["commits"] == 1
    assert path.exists()


def test_a_squashed_change_counts_as_on_the_base(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    path = _worktree(repo, "demo-squash")
    _commit_in(path, "a.py", "a\n")
    _commit_in(path, "b.py", "b\n")
    repo.git("merge", "-q", "--squash", "forge/demo-squash")
    repo.commit("squash demo-squash")
    head = repo.git("rev-parse", "HEAD").strip()
    _event(
        repo,
        "demo-squash",
        "land.done",
        base="main",
        commit=head,
        mode="squash",
        verify="PASS",
        order=1,
    )

    done = repo.forge("clean")
    assert done.code == 0, done.err
    assert "removed demo-squash" in done.out
    assert not path.exists()


def test_abandon_removes_unlanded_work_and_records_why(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    path = _worktree(repo, "demo-search")
    _commit_in(path, "search.py", "x\n")
    (path / "draft.txt").write_text("dirty\n", encoding="utf-8")

    done = repo.forge("clean", "--abandon", "demo-search", "--reason", "superseded", "--json")
    assert done.code == 0, done.err
    assert not path.exists()
    assert "forge/demo-search" not in _branches(repo)
    kinds = _kinds(repo, "demo-search")
    assert [k["event"] for k in kinds] == ["land.abandoned", "land.cleaned"]
    assert kinds[0]["reason"] == "superseded"
    assert kinds[0]["by"] == "Forge tests"
    assert json.loads(done.out)["removed"][0]["why"] == "abandoned"


def test_bad_usage_exits_2_and_removes_nothing(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    path = _worktree(repo, "demo-search")

    without = repo.forge("clean", "--abandon", "demo-search")
    assert without.code == 2
    assert "needs --reason" in without.err
    assert "Traceback" not in without.err
    unknown = repo.forge("clean", "--abandon", "nope", "--reason", "x")
    assert unknown.code == 2
    assert "unknown change 'nope'" in unknown.err
    assert "Traceback" not in unknown.err
    stray = repo.forge("clean", "--reason", "x")
    assert stray.code == 2
    assert path.exists()
    assert _kinds(repo, "demo-search") == []


def test_unlanded_work_is_counted_against_the_loop_s_declared_base(repo: Repo) -> None:
    repo.git("branch", "-M", "main")
    repo.git("branch", "develop")
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n'
        '[[loop]]\nchange = "demo-dev"\ncmd = "true"\nworktree = true\nbase = "develop"\n',
    )
    repo.commit("policy")  # on main only: develop lacks it
    path = repo.root / ".forge" / "worktrees" / "demo-dev"
    path.parent.mkdir(parents=True, exist_ok=True)
    repo.git("worktree", "add", "-q", "-b", "forge/demo-dev", str(path), "develop")
    _commit_in(path, "dev.py", "x\n")

    done = repo.forge("clean")
    assert done.code == 0, done.err
    assert "kept demo-dev: 1 commit(s) not on develop" in done.out
