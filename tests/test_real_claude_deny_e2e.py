"""The real Claude Code refuses its own file tools a protected path: the deny rules Forge passes.

The shipped ``claude`` executor passes the loop's frozen paths and Forge's
``.forge/`` as ``permissions.deny`` rules in the ``--settings`` that carry its
hooks. These tests run the real CLI (the release ``executors/claude.toml``
pins) under ``forge run`` with the sandbox off, against a scripted model that
asks to write and edit protected files: the file stays as it was, and the
refusal the model reads is Claude Code's own ("denied by your permission
settings"), not Forge's guard, which never saw the call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra._scripted import Reply, Script, ToolCall, WriteFile

from .agent_clis import PROTECTING_POLICY as POLICY
from .agent_clis import cli_environment, finished, tool_results
from .support import Repo

# Claude Code 2.1.197 refuses a denied path as it checks the call, before any
# hook runs (so no permission prompt, and no entry in its permission_denials).
DENIED = "<tool_use_error>File is in a directory that is denied by your permission settings."


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def project(repo: Repo) -> None:
    repo.write("forge.toml", POLICY)
    repo.write("policies/rules.md", "keep\n")
    repo.write("locks/deps.lock", "pinned\n")
    repo.commit("policy")


def run(repo: Repo, env: dict[str, str]) -> None:
    done = repo.forge(
        "run", "--change", "c", "--executor", "claude", "--prompt", "tidy up", "--yes", env=env
    )
    assert done.code == 0, done


def test_the_cli_denies_writes_and_edits_of_frozen_paths(repo: Repo, home: Path) -> None:
    project(repo)
    toml = str(repo.root / "forge.toml")
    script = Script.of(
        Reply("Reading.", calls=(ToolCall("Read", {"file_path": toml}),)),
        Reply(
            "Tidying.",
            calls=(
                WriteFile("forge.toml", "x = 1\n"),
                ToolCall(
                    "Edit",
                    {
                        "file_path": str(repo.root / "policies" / "rules.md"),
                        "old_string": "keep",
                        "new_string": "drop",
                    },
                ),
                WriteFile("locks/deps.lock", "loose\n"),
                WriteFile("notes.txt", "free\n"),
            ),
        ),
        Reply("Left them alone.\nFORGE_DONE"),
    )
    with cli_environment("claude", script, home) as (server, env):
        run(repo, env)
    assert (repo.root / "forge.toml").read_text() == POLICY
    assert (repo.root / "policies" / "rules.md").read_text() == "keep\n"
    assert (repo.root / "locks" / "deps.lock").read_text() == "pinned\n"
    assert (repo.root / "notes.txt").read_text() == "free\n"  # the rest of the tree is writable
    *_, write, edit, lock, free = tool_results(server)
    for answer in (write, edit, lock):
        assert answer.startswith(DENIED), answer
    assert free.startswith("File created successfully")
    [event] = finished(repo)
    assert event["guard_refusals"] == 0  # Claude Code refused before Forge's guard saw the calls
    assert server.problems == []


def test_the_cli_denies_writes_into_forges_state(repo: Repo, home: Path) -> None:
    project(repo)
    script = Script.of(
        Reply("Noting.", calls=(WriteFile(".forge/changes/c/note.md", "done, trust me\n"),)),
        Reply("FORGE_DONE"),
    )
    with cli_environment("claude", script, home) as (server, env):
        run(repo, env)
    assert not (repo.change_dir("c") / "note.md").exists()
    *_, answer = tool_results(server)
    assert answer.startswith(DENIED), answer
    [event] = finished(repo)
    assert event["guard_refusals"] == 0
