"""A disk that fills up mid-loop: a gate error in words, state whole, nothing lost.

The project lives on a small tmpfs of its own (Forge's tests run as root on
the machines they are made for, so ``mount`` is there); the agent fills it in
its second iteration, as a runaway build or log would.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import Repo

_FILL = """#!/bin/sh
echo working
if [ "$FORGE_ITERATION" = 2 ]; then
  dd if=/dev/zero of=filler bs=64k 2>/dev/null
  dd if=/dev/zero of=filler2 bs=1k 2>/dev/null
  dd if=/dev/zero of=filler3 bs=1 2>/dev/null
  echo filled
fi
exit 0
"""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Repo]:
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(disk)], check=True)
    try:
        repo = Repo(disk)
        repo.git("init", "-q")
        repo.git("config", "user.email", "disk@example.invalid")
        repo.git("config", "user.name", "disk")
        agent = repo.write("agent.sh", _FILL)
        agent.chmod(0o755)
        yield repo
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _free(repo: Repo) -> None:
    for name in ("filler", "filler2", "filler3"):
        (repo.root / name).unlink(missing_ok=True)


def test_a_run_on_a_full_disk_stops_as_a_gate_error(small_disk: Repo) -> None:
    repo = small_disk
    repo.write("forge.toml", '[verify]\ncommand = "true"\nspecs = []\n')
    repo.commit("policy")
    done = repo.forge(
        "run", "--change", "c", "--cmd", "./agent.sh", "--yes", "--max-iterations", "4"
    )
    assert done.code == 1, done.err
    assert "run: STOPPED after 2 iteration(s) — gate-error" in done.lines, done.err
    assert any("No space left on device" in line or "disk full" in line for line in done.lines)
    assert "Traceback" not in done.out + done.err

    _free(repo)
    # Every state file is whole, and the next run starts where this one stopped.
    status = repo.forge("status", "--json")
    assert status.code in (0, 1), status.err
    assert "Traceback" not in status.err
    json.loads(status.out)
    again = repo.forge("run", "--change", "c", "--cmd", "true", "--yes", "--max-iterations", "1")
    assert again.code == 1, again.err
    assert "run: STOPPED after 1 iteration(s) — iterations-exhausted" in again.lines


def test_a_batch_on_a_full_disk_still_says_each_ending(small_disk: Repo) -> None:
    repo = small_disk
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\nspecs = []\n'
        '[[loop]]\nchange = "a"\ncmd = "./agent.sh"\nmax_iterations = 4\n',
    )
    repo.commit("policy")
    done = repo.forge("supervise", "--plain")
    assert done.code == 1, done.err
    assert "Traceback" not in done.out + done.err
    # The loop's ending is in the table even though the disk is full ...
    assert any(line.split()[:2] == ["a", "gate-error"] for line in done.lines), done.out
    # ... and the summary is in its file or, when that could not be written,
    # on standard error. Which one depends on the page a failed write freed.
    written = [line.split(": ", 1)[1] for line in done.lines if line.startswith("summary: ")]
    if written:
        summary = json.loads(Path(written[0]).read_text())
    else:
        assert "the summary goes to standard error instead" in done.out + done.err
        summary = json.loads(done.err.strip().splitlines()[-1])
    assert [loop["reason"] for loop in summary["loops"]] == ["gate-error"]
    _free(repo)
    assert repo.forge("status").code in (0, 1)
