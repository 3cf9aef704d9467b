"""What ``forge init`` finds in a repository: its test and lint commands, its specs, its agents."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from .._sourcepath import holds_python
from ._files import npm_scripts, read_text
from ._lint import other_linter, python_linter
from ._venv import Venv, find_venv

AGENT_CLIS = ("claude", "codex", "gemini")
_MAKE_TEST = re.compile(r"^test\s*:", re.MULTILINE)
_NPM_DEFAULT_TEST = "no test specified"
_PYTEST_ARGS = "-q --junitxml=.forge/junit.xml"
# A src layout's tests import src/ of the checkout they run in, ahead of an
# editable install of another one (the main checkout's, in a loop's worktree).
SRC_LAYOUT_PATH = "PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}"
SRC_LAYOUT_PYTEST = f"{SRC_LAYOUT_PATH} pytest {_PYTEST_ARGS}"
SRC_LAYOUT_SOURCE = (
    "a Python project with tests in a src layout; src/ goes first on the module path, "
    "so a worktree's verify tests the worktree's code"
)
# The lint command of each Python linter, after the tool's own word.
_PYTHON_LINT_ARGS = {"ruff": " check .", "flake8": ""}
# Folders of spec scenarios, and the files that make one count.
_SPEC_FOLDERS = (("specs", ("*.md", "*.markdown", "*.feature")), ("features", ("*.feature",)))


@attrs.frozen
class Detected:
    """A repository as ``forge init`` sees it.

    Attributes:
        test_command: The command that runs its tests ("" when none was found).
        test_source: Where that command was found, in words.
        agents: The agent CLIs on PATH, in the order Forge prefers them.
        lint_command: The command that lints it ("" when no linter was found).
        lint_source: Where the linter was found, in words.
        venv: The project's virtualenv, relative to the root ("" when none), whose
            tools the commands name by path.
        specs: The folders of spec scenarios (none: spec checking is off).
        unfound: Tools the commands name that are neither in the venv nor on PATH.
    """

    test_command: str = ""
    test_source: str = ""
    agents: tuple[str, ...] = ()
    lint_command: str = ""
    lint_source: str = ""
    venv: str = ""
    specs: tuple[str, ...] = ()
    unfound: tuple[str, ...] = ()


def detect(
    root: Path,
    which: Callable[[str], str | None] = shutil.which,
    environ: Mapping[str, str] = os.environ,
) -> Detected:
    """What the repository at ``root`` holds, with ``which`` finding CLIs and ``environ``'s venv."""
    venv = find_venv(root, environ)
    unfound: list[str] = []

    def tool(name: str) -> str:
        """The tool of the project's venv by its path, else its bare name on PATH."""
        if venv is not None and venv.has(name):
            return venv.command(name)
        if which(name) is None:
            unfound.append(name)
        return name

    command, source = _test_command(root, tool)
    lint, lint_source = _lint_command(root, venv, tool)
    return Detected(
        test_command=command,
        test_source=source,
        agents=tuple(name for name in AGENT_CLIS if which(name)),
        lint_command=lint,
        lint_source=lint_source,
        venv="" if venv is None else venv.relative,
        specs=_spec_folders(root),
        unfound=tuple(unfound),
    )


def _test_command(root: Path, tool: Callable[[str], str]) -> tuple[str, str]:
    """The first found: ``make test``, pytest, ``npm test``, ``go test``, ``cargo test``."""
    makefile = root / "Makefile"
    if makefile.is_file() and _MAKE_TEST.search(read_text(makefile)):
        return "make test", "the Makefile's test target"
    if _uses_pytest(root):
        pytest = f"{tool('pytest')} {_PYTEST_ARGS}"
        if holds_python(root / "src"):
            return f"{SRC_LAYOUT_PATH} {pytest}", SRC_LAYOUT_SOURCE
        return pytest, "a Python project with tests"
    test = npm_scripts(root / "package.json").get("test")
    if isinstance(test, str) and _NPM_DEFAULT_TEST not in test:
        return "npm test", "package.json's test script"
    if (root / "go.mod").is_file():
        return "go test ./...", "go.mod"
    if (root / "Cargo.toml").is_file():
        return "cargo test", "Cargo.toml"
    return "", ""


def _lint_command(root: Path, venv: Venv | None, tool: Callable[[str], str]) -> tuple[str, str]:
    """A Makefile's lint target (it knows the project best), then ruff or flake8, JS, Go."""
    other = other_linter(root)
    if other is not None and other[0] == "make lint":
        return other
    in_venv = frozenset(name for name in _PYTHON_LINT_ARGS if venv is not None and venv.has(name))
    found = python_linter(root, in_venv)
    if found is not None:
        name, source = found
        return tool(name) + _PYTHON_LINT_ARGS[name], source
    return other or ("", "")


def _uses_pytest(root: Path) -> bool:
    if (root / "pytest.ini").is_file() or (root / "conftest.py").is_file():
        return True
    for name in ("pyproject.toml", "setup.cfg", "tox.ini"):
        path = root / name
        if path.is_file() and ("pytest" in read_text(path)):
            return True
    tests = root / "tests"
    return (root / "pyproject.toml").is_file() and tests.is_dir() and any(tests.glob("test_*.py"))


def _spec_folders(root: Path) -> tuple[str, ...]:
    """The spec folders that hold spec files: checking specs nobody wrote only adds notes."""
    return tuple(
        f"{name}/"
        for name, patterns in _SPEC_FOLDERS
        if any(next((root / name).rglob(pattern), None) for pattern in patterns)
    )
