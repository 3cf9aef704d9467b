"""``forge init`` in a third-party Python library: the policy it writes verifies the first night.

The library is laid out as such projects are: a pyproject with ``[tool.ruff]``,
a src layout, tests/, and a ``.venv`` holding its pytest and ruff (real ones:
each a small script running this interpreter's). Forge runs with a PATH of
``/usr/bin:/bin`` and no venv active, as under cron.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from orchestra._state import IGNORE_RULES

from .support import Repo, run_forge

CRON_ENV = {"PATH": "/usr/bin:/bin", "VIRTUAL_ENV": ""}
PYPROJECT = """\
[project]
name = "tinylib"
version = "0.1.0"

[tool.ruff]
line-length = 100

[tool.pytest.ini_options]
testpaths = ["tests"]
"""
GOOD_CODE = "def add(a: int, b: int) -> int:\n    return a + b\n"
TEST = "from tinylib import add\n\n\ndef test_add() -> None:\n    assert add(1, 2) == 3\n"


def venv_with_tools(folder: Path) -> None:
    """A virtualenv folder whose pytest and ruff are this interpreter's, by their own path."""
    (folder / "bin").mkdir(parents=True)
    (folder / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    for tool, module in (("pytest", "pytest -p no:cacheprovider"), ("ruff", "ruff")):
        script = folder / "bin" / tool
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m {module} "$@"\n')
        script.chmod(0o755)


def library(repo: Repo, venv: str = ".venv") -> None:
    """The library, committed (its venv ignored, as every project has it)."""
    repo.write("pyproject.toml", PYPROJECT)
    repo.write("src/tinylib/__init__.py", GOOD_CODE)
    repo.write("tests/test_tinylib.py", TEST)
    repo.write(".gitignore", f"/{venv}/\n__pycache__/\n")
    venv_with_tools(repo.root / venv)
    repo.commit("the library")


def verify(root: Path) -> Any:
    """``forge verify --json``'s report, run where ``root`` is."""
    done = run_forge(("verify", "--json"), cwd=root, env=CRON_ENV)
    assert done.code == 0, done
    return json.loads(done.out)


def checks(report: Any) -> dict[str, bool]:
    """Each check of a verify report, and whether it passed."""
    return {check["name"]: check["passed"] for check in report["checks"]}


def test_the_written_policy_verifies_the_library_with_its_venv_not_activated(repo: Repo) -> None:
    library(repo)
    done = repo.forge("init", env=CRON_ENV)
    assert done.code == 0, done
    assert done.lines[1] == (
        'lint command: "$(git rev-parse --git-common-dir)"/../.venv/bin/ruff check .'
        " (pyproject.toml's [tool.ruff])"
    )
    assert "virtualenv: .venv (its tools named by path: no activation needed)" in done.lines
    assert not any(line.startswith("not found") for line in done.lines)
    policy = tomllib.loads((repo.root / "forge.toml").read_text())["verify"]
    assert policy["command"] == (
        "PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} "
        '"$(git rev-parse --git-common-dir)"/../.venv/bin/pytest -q --junitxml=.forge/junit.xml'
    )
    assert policy["lint"] == '"$(git rev-parse --git-common-dir)"/../.venv/bin/ruff check .'
    assert policy["specs"] == []
    assert repo.forge("policy", "check", env=CRON_ENV).code == 0

    shown = repo.forge("verify", env=CRON_ENV)
    assert shown.lines[-1] == "Verdict: PASS", shown
    assert not any("note:" in line for line in shown.lines), shown
    assert checks(verify(repo.root)) == {"tests": True, "lint": True}

    # The linter is the project's ruff, reading the project's [tool.ruff].
    repo.write("src/tinylib/__init__.py", "import os\n" + GOOD_CODE)
    report = verify(repo.root)
    assert checks(report) == {"tests": True, "lint": False}
    assert report["verdict"] == "FAIL"


def test_a_loop_worktree_is_verified_with_the_main_checkouts_venv_and_its_own_code(
    repo: Repo,
) -> None:
    library(repo)
    assert repo.forge("init", env=CRON_ENV).code == 0
    repo.commit("forge init")
    worktree = repo.root / ".forge" / "worktrees" / "fix-add"
    repo.git("worktree", "add", "-q", "-b", "forge/fix-add", str(worktree))
    assert not (worktree / ".venv").exists()
    assert checks(verify(worktree)) == {"tests": True, "lint": True}

    # The worktree's code is the one tested, not the main checkout's.
    (worktree / "src/tinylib/__init__.py").write_text(GOOD_CODE.replace("a + b", "a - b"))
    broken = verify(worktree)
    assert checks(broken) == {"tests": False, "lint": True}
    [tests] = [check for check in broken["checks"] if check["name"] == "tests"]
    assert "FAILED tests/test_tinylib.py::test_add - assert -1 == 3" in tests["failure_lines"]
    assert checks(verify(repo.root)) == {"tests": True, "lint": True}
    # The main checkout's own lint and status skip the worktree: .forge/.gitignore.
    assert repo.git("status", "--porcelain").strip() == ""


def test_an_active_venv_inside_the_project_is_the_one_named(repo: Repo) -> None:
    library(repo, venv="env")
    venv_with_tools(repo.root / ".venv")  # present too, but not the one in use
    active = {**CRON_ENV, "VIRTUAL_ENV": str(repo.root / "env")}
    done = repo.forge("init", "--json", "--dry-run", env=active)
    report = json.loads(done.out)
    assert report["venv"] == "env"
    assert report["lint_command"] == '"$(git rev-parse --git-common-dir)"/../env/bin/ruff check .'

    elsewhere = repo.root.parent / "elsewhere"
    venv_with_tools(elsewhere)
    (repo.root / ".venv").rename(repo.root.parent / "moved")
    done = repo.forge(
        "init", "--json", "--dry-run", env={**CRON_ENV, "VIRTUAL_ENV": str(elsewhere)}
    )
    report = json.loads(done.out)
    assert report["venv"] is None  # a venv outside the project is not the project's
    assert report["lint_command"] == "ruff check ."
    assert report["unfound"] == ["pytest", "ruff"]


def test_spec_checking_is_on_only_where_specs_are(repo: Repo) -> None:
    library(repo)
    repo.write("specs/adding.md", "# Adding\n\n## Scenario: Adding two numbers\n")
    done = repo.forge("init", env=CRON_ENV)
    assert "spec folders: specs/" in done.lines
    assert tomllib.loads((repo.root / "forge.toml").read_text())["verify"]["specs"] == ["specs/"]
    report = verify(repo.root)
    assert report["scenarios"]["uncovered"][0]["id"] == "adding-two-numbers"
    assert report["verdict"] == "FAIL"


def test_the_schema_line_and_the_closing_pointer_name_what_an_installed_forge_has(
    repo: Repo,
) -> None:
    library(repo)
    assert repo.forge("init", env=CRON_ENV).code == 0
    text = (repo.root / "forge.toml").read_text()
    assert text.splitlines()[0] == "#:schema ./forge.schema.json"
    schema = repo.forge("policy", "schema", env=CRON_ENV)
    assert (repo.root / "forge.schema.json").read_text() == schema.out
    assert "`forge policy dump --defaults`" in text
    assert "docs/" not in text
    assert repo.forge("policy", "dump", "--defaults", env=CRON_ENV).code == 0
    assert (repo.root / ".forge/.gitignore").read_text() == IGNORE_RULES

    (repo.root / "forge.toml").unlink()
    (repo.root / "forge.schema.json").write_text("{}\n")  # the user's own: kept
    again = repo.forge("init", env=CRON_ENV)
    assert "forge.schema.json: exists; left as it is" in again.lines
    assert (repo.root / "forge.schema.json").read_text() == "{}\n"
