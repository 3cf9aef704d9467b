"""Shared fixtures."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .redis_server import redis_server as redis_server  # a real server per test
from .support import SUPERVISED, Repo, Supervised, option, options, project_policy, run_forge


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
    """``forge policy simulate --run <the batch's run>`` moves no change.

    The run is replayed under the policy files as they were when it ran (a test
    may have rewritten them for a later run). A ``--batch FILE`` run is replayed
    under the batch's own layering: a candidate file that extends the project's
    policy and then the batch file, which ``--policy`` layers as ``forge
    supervise --batch`` did (the defaults, the project's file, the batch file,
    the loop tables of the last file that declares any, ``--set`` on top), so
    each loop is judged under its own policy.

    Not replayed: a run whose records the test removed (to run the batch again
    from scratch); ``--dry-run`` ran nothing; a ``--fleet`` worker keeps its
    changes' timelines on the fleet's Redis server (``RedisChangeStore``), not
    in ``.forge/changes``, and runs the batch submitted there: ``forge policy
    simulate`` reads neither.
    """
    if any(arg in ("--dry-run", "--fleet") for arg in batch.args) or batch.run_id is None:
        return
    if not (batch.cwd / ".forge" / "runs" / batch.run_id / "summary.json").is_file():
        return  # the test removed this run's records
    config = option(batch.args, "--config")
    overlay = option(batch.args, "--batch")
    settings = [text for value in options(batch.args, "--set") for text in ("--set", value)]
    with tempfile.TemporaryDirectory() as folder, _as_it_ran(batch.policy_files):
        candidate = []
        if overlay is not None:
            candidate = ["--policy", _batch_policy(batch, overlay, Path(folder))]
        done = run_forge(
            [
                "policy",
                "simulate",
                "--run",
                batch.run_id,
                "--json",
                *(["--config", config] if config is not None else []),
                *candidate,
                *settings,
            ],
            cwd=batch.cwd,
            env=batch.env,
        )
    assert done.code == 0, f"the batch's replay failed: {done}"
    moved = [row for row in json.loads(done.out)["changes"] if row["moved"]]
    assert not moved, f"replayed under its own policy, the batch {batch.args} moved: {moved}"


@contextlib.contextmanager
def _as_it_ran(files: tuple[tuple[Path, str], ...]) -> Iterator[None]:
    """The policy files with the text they had when the batch ran, then as they are."""
    now = {path: path.read_text(encoding="utf-8") if path.is_file() else None for path, _ in files}
    try:
        for path, text in files:
            path.write_text(text, encoding="utf-8")
        yield
    finally:
        for path, was in now.items():
            if was is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(was, encoding="utf-8")


def _batch_policy(batch: Supervised, overlay: str, folder: Path) -> str:
    """A policy file layered as ``forge supervise [--config C] --batch FILE`` layers its loops."""
    config = project_policy(batch.cwd, batch.args)
    tops = [] if config is None else [config.resolve()]
    tops.append((batch.cwd / overlay).resolve())
    path = folder / "batch-as-run.toml"
    path.write_text(f"extends = {json.dumps([str(top) for top in tops])}\n", encoding="utf-8")
    return str(path)
