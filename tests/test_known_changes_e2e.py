"""A mistyped change name never creates a phantom change.

Real ``forge`` in a scratch git repository: every command that names a change
without starting one refuses a change with no state (exit 2) and writes
nothing; the commands that start a change still create it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .support import Repo

# Each command that names a change but does not start one; "{c}" is the name.
REFUSING = {
    "event": ["event", "--change", "{c}", "forge.blocked", "--detail", "needs the tax table"],
    "spend --reset": ["spend", "{c}", "--reset"],
    "spend": ["spend", "{c}"],
    "circuit --reset": ["circuit", "{c}", "--reset", "--reason", "reviewed"],
    "circuit": ["circuit", "{c}"],
    "verify --reset-breaker": ["verify", "--reset-breaker", "--change", "{c}"],
    "checkpoint": ["checkpoint", "--change", "{c}", "--stage", "iteration-1"],
    "resume": ["resume", "--change", "{c}"],
    "timeline": ["timeline", "{c}"],
    "policy simulate": ["policy", "simulate", "--change", "{c}"],
    "policy simulate --sweep": [
        "policy",
        "simulate",
        "--change",
        "{c}",
        "--sweep",
        "stagnation.no_progress=2,3",
    ],
}


@pytest.fixture
def project(repo: Repo) -> Repo:
    repo.write("forge.toml", '[verify]\ncommand = "true"\n')
    repo.commit("policy")
    # One real change, begun the ordinary way.
    started = repo.forge("verify", "--change", "billing")
    assert started.code == 0, started.out + started.err
    return repo


def _tree(root: Path) -> list[str]:
    forge = root / ".forge"
    return sorted(str(p.relative_to(root)) for p in forge.rglob("*"))


def _listed(repo: Repo) -> list[str]:
    done = repo.forge("status", "--json")
    assert done.code == 0, done.err
    return [row["change"] for row in json.loads(done.out)["changes"]]


@pytest.mark.parametrize("words", REFUSING.values(), ids=list(REFUSING))
def test_a_mistyped_change_is_refused_and_nothing_is_created(
    project: Repo, words: list[str]
) -> None:
    before = _tree(project.root)
    done = project.forge(*(w.format(c="biling") for w in words))
    assert done.code == 2, done.out + done.err
    assert 'no change "biling"' in done.err
    assert "known changes: billing" in done.err
    assert "hint: " in done.err
    assert not project.change_dir("biling").exists()
    assert _tree(project.root) == before
    assert _listed(project) == ["billing"]


@pytest.mark.parametrize("words", REFUSING.values(), ids=list(REFUSING))
def test_the_same_commands_work_on_a_change_that_exists(project: Repo, words: list[str]) -> None:
    if words[0] in ("checkpoint", "resume"):
        start = project.forge(
            "loop", "start", "--change", "billing", "--goal", "totals", "--rubric", "R1: sums"
        )
        assert start.code == 0, start.out + start.err
    done = project.forge(*(w.format(c="billing") for w in words))
    assert done.code == 0, done.out + done.err


def test_with_no_change_at_all_the_refusal_says_so(repo: Repo) -> None:
    done = repo.forge("event", "--change", "nope", "forge.blocked")
    assert done.code == 2
    assert "known changes: none yet" in done.err
    assert not (repo.root / ".forge").exists()
    assert repo.forge("status").lines == ["no changes yet: nothing under .forge/changes/"]


def test_a_change_known_only_by_a_corrupt_file_moved_aside_can_be_reset(repo: Repo) -> None:
    folder = repo.change_dir("c")
    folder.mkdir(parents=True)
    (folder / "spend.yaml.corrupt-20260101T000000.000000Z").write_text("{{{")
    done = repo.forge("spend", "c", "--reset")
    assert done.code == 0, done.out + done.err


def test_an_empty_folder_is_no_change(repo: Repo) -> None:
    # A folder left with only a lock file (an earlier forge's) has no state.
    folder = repo.change_dir("ghost")
    folder.mkdir(parents=True)
    (folder / ".lock").touch()
    done = repo.forge("spend", "ghost", "--reset")
    assert done.code == 2
    assert "known changes: none yet" in done.err
    assert sorted(p.name for p in folder.iterdir()) == [".lock"]


def test_the_starting_commands_still_create_a_change(repo: Repo) -> None:
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\n\n[rate_limit]\nbackend = "memory"\n\n'
        '[[loop]]\nchange = "looped"\ncmd = "echo FORGE_DONE"\nmax_iterations = 1\n',
    )
    repo.commit("policy")
    assert repo.forge("verify", "--change", "verified").code == 0
    assert repo.forge("run", "--yes", "--change", "ran", "--cmd", "echo FORGE_DONE").code == 0
    started = repo.forge(
        "loop", "start", "--change", "contracted", "--goal", "g", "--rubric", "R1: r"
    )
    assert started.code == 0, started.out + started.err
    supervised = repo.forge("supervise")
    assert supervised.code == 0, supervised.out + supervised.err
    assert _listed(repo) == ["contracted", "looped", "ran", "verified"]
    # Once begun, the other commands accept it.
    blocked = (
        "event",
        "--change",
        "contracted",
        "forge.blocked",
        "--detail",
        "needs the tax table",
    )
    assert repo.forge(*blocked).code == 0
    assert repo.forge("spend", "ran", "--reset").code == 0
