"""What ``forge init`` finds in a repository: its test command and the agent CLIs on PATH."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import attrs

from .._sourcepath import holds_python

AGENT_CLIS = ("claude", "codex", "gemini")
_MAKE_TEST = re.compile(r"^test\s*:", re.MULTILINE)
_NPM_DEFAULT_TEST = "no test specified"
# A src layout's tests import src/ of the checkout they run in, ahead of an
# editable install of another one (the main checkout's, in a loop's worktree).
SRC_LAYOUT_PYTEST = (
    "PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} pytest -q --junitxml=.forge/junit.xml"
)
SRC_LAYOUT_SOURCE = (
    "a Python project with tests in a src layout; src/ goes first on the module path, "
    "so a worktree's verify tests the worktree's code"
)


@attrs.frozen
class Detected:
    """A repository as ``forge init`` sees it.

    Attributes:
        test_command: The command that runs its tests ("" when none was found).
        test_source: Where that command was found, in words.
        agents: The agent CLIs on PATH, in the order Forge prefers them.
    """

    test_command: str = ""
    test_source: str = ""
    agents: tuple[str, ...] = ()


def detect(root: Path, which: Callable[[str], str | None] = shutil.which) -> Detected:
    """The test command of the repository at ``root`` and the agent CLIs ``which`` finds."""
    command, source = _test_command(root)
    agents = tuple(name for name in AGENT_CLIS if which(name))
    return Detected(test_command=command, test_source=source, agents=agents)


def _test_command(root: Path) -> tuple[str, str]:
    """The first found: ``make test``, pytest, ``npm test``, ``go test``, ``cargo test``."""
    makefile = root / "Makefile"
    if makefile.is_file() and _MAKE_TEST.search(_read(makefile)):
        return "make test", "the Makefile's test target"
    if _uses_pytest(root):
        if holds_python(root / "src"):
            return SRC_LAYOUT_PYTEST, SRC_LAYOUT_SOURCE
        return "pytest -q --junitxml=.forge/junit.xml", "a Python project with tests"
    package = root / "package.json"
    if package.is_file():
        try:
            scripts = json.loads(_read(package)).get("scripts", {})
        except (ValueError, AttributeError):
            scripts = {}
        test = scripts.get("test") if isinstance(scripts, dict) else None
        if isinstance(test, str) and _NPM_DEFAULT_TEST not in test:
            return "npm test", "package.json's test script"
    if (root / "go.mod").is_file():
        return "go test ./...", "go.mod"
    if (root / "Cargo.toml").is_file():
        return "cargo test", "Cargo.toml"
    return "", ""


def _uses_pytest(root: Path) -> bool:
    if (root / "pytest.ini").is_file() or (root / "conftest.py").is_file():
        return True
    for name in ("pyproject.toml", "setup.cfg", "tox.ini"):
        path = root / name
        if path.is_file() and ("pytest" in _read(path)):
            return True
    tests = root / "tests"
    return (root / "pyproject.toml").is_file() and tests.is_dir() and any(tests.glob("test_*.py"))


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
