"""The real agent CLIs (claude, codex, gemini) for the tests, and a scripted server for each.

The CLIs are the releases the shipped executors pin (``[cli] proven``),
installed from the npm registry into ``.venv/agent-clis`` (``make test`` does
it first; a test run without it installs them here, one worker at a time).
A test never skips for want of them: without npm it fails saying what to install.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from orchestra._errors import ForgeError
from orchestra._scripted import Script, ScriptedServer, profile_for
from orchestra._scripted._install import bin_dir, install, proven_clis

from .support import Repo

REPOSITORY = Path(__file__).resolve().parent.parent
CLI_FOLDER = REPOSITORY / ".venv" / "agent-clis"
_LOCK = REPOSITORY / ".venv" / "agent-clis.lock"


def agent_bin() -> Path:
    """The folder of the installed CLIs' programs, installing what is missing."""
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    with _LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shutil.which("npm") is None and os.geteuid() == 0 and shutil.which("apt-get"):
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "nodejs", "npm"], env=env, check=False
            )
        try:
            install(CLI_FOLDER)
        except ForgeError as error:
            pytest.fail(f"the real agent CLIs cannot be installed: {error}", pytrace=False)
    return bin_dir(CLI_FOLDER)


def proven_version(executor: str) -> str:
    return proven_clis()[executor].proven


@contextmanager
def cli_environment(
    executor: str, script: Script, home: Path
) -> Iterator[tuple[ScriptedServer, dict[str, str]]]:
    """A scripted server for ``executor``'s provider, and the environment that points the CLI at it.

    The environment puts the installed CLIs first on PATH and Forge's own
    interpreter's folder after them, with a scratch home.
    """
    folder = agent_bin()
    profile = profile_for(executor)
    assert profile is not None, executor
    with ScriptedServer(profile.provider(), script) as server:
        env = profile.environment(server.url, home)
        env["PATH"] = os.pathsep.join(
            [str(folder), str(Path(sys.executable).parent), os.environ.get("PATH", "")]
        )
        yield server, env


def events(repo: Repo, change: str = "c", kind: str | None = None) -> list[dict[str, Any]]:
    """The change's timeline events (of one ``kind``, when named), in order."""
    timeline = repo.change_dir(change) / "timeline.jsonl"
    every = [json.loads(line) for line in timeline.read_text().splitlines()]
    return [event for event in every if kind is None or event["event"] == kind]


def finished(repo: Repo, change: str = "c") -> list[dict[str, Any]]:
    """The change's ``iteration.finished`` events."""
    return events(repo, change, "iteration.finished")


def tool_results(server: ScriptedServer) -> list[str]:
    """Everything the CLI's tools answered the model, in order."""
    return [text for r in server.main_exchanges() for text in r.exchange.tool_results]  # type: ignore[union-attr]


# A policy for the tests where the CLI itself is told what it must not write:
# the sandbox off, so that the refusal seen is the CLI's (or the guard's).
PROTECTING_POLICY = """\
[rate_limit]
backend = "memory"
calls = 1000
window = "1m"

[run]
max_iterations = 1

[verify]
command = "true"

[sandbox]
mode = "off"

[protect]
frozen = ["forge.toml", "policies/", "locks/*.lock"]
"""
