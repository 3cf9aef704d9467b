"""Shared fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from .redis_server import redis_server as redis_server  # a real server per test
from .support import SUPERVISED, Repo, Supervised, run_forge


def _proven_line() -> str:
    from orchestra._scripted._install import proven_clis

    proven = ", ".join(f"{cli.package} {cli.proven}" for cli in proven_clis().values())
    return f"agent CLIs proven by tests/test_real_*: {proven}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "replay_moves(why): the test's batch cannot be replayed as it ran, and why"
    )


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


@pytest.fixture(autouse=True)
def replays_move_nothing(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every batch a test supervised replays under its own policy with nothing moved.

    The live loop and ``forge policy simulate`` share one decision: replaying a
    batch's recorded iterations under the very policy it ran with must reach
    the same endings at the same iterations. A test whose batch cannot be
    replayed says why with ``@pytest.mark.replay_moves("why")``.
    """
    SUPERVISED.clear()
    yield
    if request.node.get_closest_marker("replay_moves") is not None:
        return
    for batch in list(SUPERVISED):
        check_replay(batch)
    SUPERVISED.clear()


def check_replay(batch: Supervised) -> None:
    """``forge policy simulate --run <the batch's run>`` moves no change."""
    if any(arg in ("--dry-run", "--fleet", "--batch") for arg in batch.args):
        return  # nothing ran here, or the loops' policy is not the project's alone
    runs = sorted((batch.cwd / ".forge" / "runs").glob("*/summary.json"))
    if not runs:
        return
    config = [arg for arg in batch.args if arg.startswith("--config")]
    done = run_forge(
        ["policy", "simulate", "--run", runs[-1].parent.name, "--json", *config],
        cwd=batch.cwd,
        env=batch.env,
    )
    assert done.code == 0, f"the batch's replay failed: {done}"
    moved = [row for row in json.loads(done.out)["changes"] if row["moved"]]
    assert not moved, f"replayed under its own policy, the batch moved: {moved}"
