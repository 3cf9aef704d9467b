"""Ctrl-C and SIGTERM: the command's process tree is stopped and forge exits 130."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from .support import Repo, spawn_forge
from .test_process import alive


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_interrupting_verify_stops_its_command(repo: Repo, sig: signal.Signals) -> None:
    pid_file = repo.root / "pid"
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "echo $$ > pid; echo started; exec sleep 300"\n',
    )
    forge = spawn_forge(["verify", "--change", "c"], cwd=repo.root)
    try:
        _wait_for(pid_file, forge)
        command_pid = int(pid_file.read_text())
        assert alive(command_pid)
        forge.send_signal(sig)
        _out, err = forge.communicate(timeout=60)
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.communicate()
    assert forge.returncode == 130, err
    assert "interrupted" in err
    assert "Traceback" not in err
    assert not alive(command_pid)
    # An interrupted verify records no verdict.
    assert not (repo.change_dir("c") / "verify-attempts.yaml").exists()


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:

    for _ in range(2000):
        if path.exists() and path.read_text().strip():
            return
        if process.poll() is not None:
            raise AssertionError(f"forge ended early: {process.communicate()}")
        time.sleep(0.01)  # polling a real process's progress; no clock to mock here
    raise AssertionError("the verify command never started")
