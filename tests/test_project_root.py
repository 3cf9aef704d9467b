"""Finding the project: one search, shared by the agent hooks and every other command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestra._errors import ConfigError
from orchestra._project_root import find_root
from orchestra._workspace import Project, find_project

from .support import Repo


def both(start: Path, config: Path | None = None) -> tuple[str, str | None]:
    """find_root's answer, checked against find_project's."""
    root, found = find_root(str(start), None if config is None else str(config))
    project = find_project(start, config)
    assert project == Project(Path(root), None if found is None else Path(found))
    return root, found


def test_the_nearest_policy_file_above_the_start_wins(repo: Repo) -> None:
    repo.write("forge.toml", "")
    repo.write("service/forge.toml", "")
    deep = repo.root / "service" / "src" / "pkg"
    deep.mkdir(parents=True)
    root = str(repo.root.resolve())
    assert both(deep) == (f"{root}/service", f"{root}/service/forge.toml")
    assert both(repo.root / "service") == (f"{root}/service", f"{root}/service/forge.toml")
    (repo.root / "docs").mkdir()
    assert both(repo.root / "docs") == (root, f"{root}/forge.toml")


def test_the_search_stops_at_the_top_of_the_git_repository(repo: Repo, tmp_path: Path) -> None:
    (tmp_path / "forge.toml").write_text("")  # above the repository: not its policy
    (repo.root / "src").mkdir()
    assert both(repo.root / "src") == (str(repo.root.resolve()), None)


def test_outside_git_and_without_a_policy_the_start_is_the_root(tmp_path: Path) -> None:
    if any((parent / ".git").exists() for parent in tmp_path.resolve().parents):
        pytest.skip("the temporary folder is inside a git repository")
    if any((parent / "forge.toml").is_file() for parent in tmp_path.resolve().parents):
        pytest.skip("the temporary folder is inside a Forge project")
    start = tmp_path / "loose"
    start.mkdir()
    assert both(start) == (str(start.resolve()), None)


def test_an_explicit_policy_file_names_the_root(repo: Repo, tmp_path: Path) -> None:
    policy = tmp_path / "elsewhere" / "policy.toml"
    policy.parent.mkdir()
    policy.write_text("")
    elsewhere = str(policy.parent.resolve())
    assert both(repo.root, policy) == (elsewhere, f"{elsewhere}/policy.toml")


def test_a_missing_explicit_policy_file_is_a_configuration_error(repo: Repo) -> None:
    missing = repo.root / "nope.toml"
    assert find_root(str(repo.root), str(missing))[1] == str(missing.resolve())
    with pytest.raises(ConfigError, match="does not exist") as raised:
        find_project(repo.root, missing)
    assert raised.value.problems == (str(missing.resolve()),)


def test_symlinks_are_resolved(repo: Repo, tmp_path: Path) -> None:
    repo.write("forge.toml", "")
    (repo.root / "src").mkdir()
    link = tmp_path / "link"
    os.symlink(repo.root / "src", link)
    root = str(repo.root.resolve())
    assert both(link) == (root, f"{root}/forge.toml")
