"""What an iteration of the loop engine costs: git commands; nothing blocking on the trio thread.

The git commands are counted by a ``git`` first on PATH that logs and then
runs the real one; the per-iteration cost is the difference between a longer
and a shorter run, so the one-time costs (the first status, the first full
scan) cancel out. The blocking calls are counted by wrapping ``fcntl.flock``
and ``os.fsync`` and noting the thread each runs on.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from .support import Repo
from .test_supervised_loop import agent as loop_agent
from .test_supervised_loop import policy, supervise_one

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
REAL_GIT = shutil.which("git")


@pytest.fixture
def counting_path(tmp_path: Path) -> tuple[str, Path]:
    """A PATH whose ``git`` logs each command line, and the log."""
    assert REAL_GIT is not None
    folder = tmp_path / "counting-bin"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    wrapper = folder / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(REAL_GIT)} "$@"\n'
    )
    wrapper.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ['PATH']}", log


def working_agent(repo: Repo) -> str:
    """An agent that makes a little progress every iteration and never says done."""
    script = repo.root.parent / "working.json"
    script.write_text(json.dumps({"steps": [{"print": "working\n", "append": {"notes.txt": "x"}}]}))
    return shlex.join([sys.executable, str(FAKE_AGENT), str(script)])


def git_calls(repo: Repo, path_and_log: tuple[str, Path], *args: str) -> list[str]:
    path, log = path_and_log
    log.write_text("")
    done = repo.forge(*args, env={"PATH": path})
    assert done.code in (0, 1), done
    return log.read_text().splitlines()


@pytest.mark.parametrize("supervised", [True, False], ids=["supervise", "run"])
def test_git_commands_per_iteration(
    repo: Repo, counting_path: tuple[str, Path], supervised: bool
) -> None:
    cmd = working_agent(repo)
    costs = {}
    for iterations in (2, 5):
        change = f"c{iterations}"
        if supervised:
            repo.write(
                "forge.toml",
                '[verify]\ncommand = "true"\nspecs = []\n[rate_limit]\nbackend = "memory"\n'
                # The report's git calls come once, after the batch: not an iteration's.
                "[report]\nwrite = false\n"
                f'[[loop]]\nchange = "{change}"\ncmd = {json.dumps(cmd)}\n'
                f"max_iterations = {iterations}\n",
            )
            calls = git_calls(repo, counting_path, "supervise")
        else:
            calls = git_calls(
                repo,
                counting_path,
                "run",
                "--yes",
                "--change",
                change,
                "--cmd",
                cmd,
                "--max-iterations",
                str(iterations),
            )
        costs[iterations] = calls
    per_iteration = (len(costs[5]) - len(costs[2])) / 3
    # supervise: a status after the agent, and one after the verify (whose own
    # writes are not the agent's progress); forge run: one status.
    assert per_iteration <= (2 if supervised else 1), costs[5]
    assert all(line.startswith("status ") for line in costs[5][-3:]), costs[5]


async def test_no_state_file_is_locked_or_fsynced_on_the_trio_thread(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    trio_thread = threading.current_thread()
    on_trio_thread: list[str] = []
    elsewhere: list[str] = []
    real_flock, real_fsync = fcntl.flock, os.fsync

    def flock(fd: Any, operation: int) -> None:
        seen = on_trio_thread if threading.current_thread() is trio_thread else elsewhere
        seen.append("flock")
        real_flock(fd, operation)

    def fsync(fd: Any) -> None:
        seen = on_trio_thread if threading.current_thread() is trio_thread else elsewhere
        seen.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(os, "fsync", fsync)
    work = str(tmp_path / "work.py")
    cmd = loop_agent(
        tmp_path,
        {"print": "trying\n", "write": {work: "v1"}},
        {"print": "still trying\n", "write": {work: "v2"}},
        {"print": "FORGE_DONE\n", "write": {work: "v3"}},
    )
    # A verify that fails once opens the circuit: the cooldown, the half-open
    # probe and the closing are all written too.
    marker = tmp_path / "fixed"

    def fix(_count: int) -> None:
        marker.write_text("yes")

    summary, waited, _ = await supervise_one(
        tmp_path, mock_clock, policy(f"test -f {marker}"), cmd, on_cooldown=fix
    )
    assert summary.reason == "done"
    assert waited == [1800]
    assert on_trio_thread == []
    # The wrappers did see the locks and writes, off the trio thread.
    assert "flock" in elsewhere
    assert "fsync" in elsewhere
