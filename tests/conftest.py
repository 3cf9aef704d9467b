"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from .redis_server import redis_server as redis_server  # a real server per test
from .support import Repo


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
