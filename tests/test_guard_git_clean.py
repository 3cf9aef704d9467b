"""``forge guard`` messages through the real command: ``git clean`` judged by what git
says it would remove, and refusals that list every protected path with its rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import Repo, run_forge

POLICY = """\
[verify]
command = "true"

[protect]
exist = ["specs/", "memory/", "AGENTS.md"]
frozen = ["forge.toml"]
"""


@pytest.fixture
def project(repo: Repo) -> Repo:
    """Every protected path tracked; ``.forge/`` (the hooks' cache) and ``*.local`` ignored."""
    repo.write("forge.toml", POLICY)
    repo.write(".gitignore", ".forge/\n*.local\n")
    repo.write("specs/cart.md", "# cart\n")
    repo.write("memory/notes.md", "notes\n")
    repo.write("AGENTS.md", "be careful\n")
    repo.write("src/app.py", "print('hi')\n")
    repo.commit("protected content")
    repo.write("build/out.o", "junk\n")  # untracked, unprotected: git clean's job
    return repo


def guard(repo: Repo, command: str, *extra: str) -> tuple[int, list[str]]:
    done = repo.forge("guard", *extra, "--", command)
    return done.code, done.err.splitlines()


def test_git_clean_spares_tracked_protected_files(project: Repo) -> None:
    assert guard(project, "git clean -fd") == (0, [])
    assert guard(project, "git clean -fd src specs") == (0, [])
    # What the guard allowed deletes only the untracked, unprotected files.
    project.git("clean", "-fd")
    assert not (project.root / "build").exists()
    assert (project.root / "forge.toml").exists()


def test_git_clean_refuses_an_untracked_protected_file_and_names_only_it(project: Repo) -> None:
    project.write("specs/draft.md", "# draft\n")
    code, lines = guard(project, "git clean -fd")
    assert code == 2
    assert lines == [
        'forge guard: refused — git clean would delete "specs/draft.md" (protected: exist)'
    ]
    # Without -d (and a pathspec) an untracked folder stays.
    project.write("memory/new/idea.md", "idea\n")
    assert guard(project, "git clean -f")[1] == lines
    _, lines = guard(project, "git clean -fd memory")
    assert lines == [
        'forge guard: refused — git clean would delete "memory/new" (protected: exist)'
    ]


def test_git_clean_x_refuses_an_ignored_protected_path(project: Repo) -> None:
    project.write("specs/keys.local", "k\n")  # ignored, protected by specs/
    assert guard(project, "git clean -fd")[0] == 0
    code, lines = guard(project, "git clean -fdx")
    assert code == 2
    # The hooks' own cache under the ignored .forge/ is Forge's state, and says so.
    assert lines == [
        'forge guard: refused — git clean would delete ".forge/cache" inside ".forge" '
        "(protected: frozen, Forge's own state)",
        'forge guard: refused — git clean would delete "specs/keys.local" (protected: exist)',
    ]
    _, only_ignored = guard(project, "git clean -fX specs")
    assert only_ignored == [lines[1]]


def test_git_clean_after_another_git_command_is_judged_by_everything_in_reach(
    project: Repo,
) -> None:
    # git rm --cached would untrack forge.toml first: what git says now would not hold.
    code, lines = guard(project, "git rm -q --cached forge.toml && git clean -f")
    assert code == 2
    assert (
        'forge guard: refused — git clean after another git command would delete "forge.toml" '
        "(protected: frozen)" in lines
    )


def test_git_clean_fails_closed_when_git_cannot_answer(tmp_path: Path) -> None:
    (tmp_path / "forge.toml").write_text(POLICY)  # a project, but no repository
    done = run_forge(["guard", "--", "git clean -fd"], cwd=tmp_path)
    assert done.code == 2
    assert done.err.startswith("forge guard: refused — git clean: git cannot say which files")
    assert "not a git repository" in done.err


def test_a_refusal_lists_every_protected_path_with_its_rule(project: Repo) -> None:
    code, lines = guard(project, "rm -rf specs memory")
    assert code == 2
    assert lines == [
        'forge guard: refused — rm would delete "specs" (protected: exist)',
        'forge guard: refused — rm would delete "memory" (protected: exist)',
    ]
    _, everything = guard(project, "rm -rf .")
    assert 'forge guard: refused — rm would delete "forge.toml" inside "." (protected: frozen)' in (
        everything
    )
    assert {"specs", "memory", "AGENTS.md", ".forge/cache"} <= {
        line.split('"')[1] for line in everything
    }


def test_a_long_refusal_is_bounded_and_counts_the_rest(project: Repo) -> None:
    for index in range(14):
        project.write(f"specs/s{index:02}.md", "#\n")
    code, lines = guard(project, "rm -f specs/*.md")
    assert code == 2
    assert len(lines) == 11
    assert lines[0] == 'forge guard: refused — rm would delete "specs/cart.md" (protected: exist)'
    assert lines[-1] == "forge guard: … and 5 more (forge guard --json lists every one)"
    done = project.forge("guard", "--json", "--", "rm -f specs/*.md")
    assert done.code == 2
    assert done.out.count('"rule": "exist"') == 15
