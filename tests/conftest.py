"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from .redis_server import redis_server as redis_server  # a real server per test
from .support import Repo


def _proven_line() -> str:
    from orchestra._scripted._install import proven_clis

    proven = ", ".join(f"{cli.package} {cli.proven}" for cli in proven_clis().values())
    return f"agent CLIs proven by tests/test_real_*: {proven}"


def pytest_report_header() -> str:
    """The agent CLI releases the real-CLI tests prove (each definition's ``[cli] proven``)."""
    return _proven_line()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The same line at the end, where ``pytest -q`` shows it too."""
    terminalreporter.write_line(_proven_line())


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    root = tmp_path / "project"
    root.mkdir()
    scratch = Repo(root)
    scratch.git("init", "-q")
    scratch.git("config", "user.email", "tests@forge.invalid")
    scratch.git("config", "user.name", "Forge tests")
    scratch.git("config", "commit.gpgsign", "false")
    scratch.write("README.md", "scratch\n")
    scratch.commit("initial")
    return scratch
