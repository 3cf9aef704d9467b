"""The real Gemini CLI refuses its file tools a protected path: the policy Forge passes.

``write_file`` and ``replace`` do not go through a shell, so Forge's guard
never sees them. The shipped ``gemini`` executor writes a policy file denying
them the loop's frozen paths and Forge's ``.forge/`` and passes it with
``--policy``. These tests run the real CLI (the release
``executors/gemini.toml`` pins) under ``forge run`` with the sandbox off,
against a scripted model that writes protected files by relative and by
absolute path: the files stay as they were, the model reads the CLI's own
"denied by policy" with Forge's reason, and the check after the iteration
finds nothing to restore.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestra._scripted import Reply, Script, ToolCall, WriteFile

from .agent_clis import PROTECTING_POLICY as POLICY
from .agent_clis import cli_environment, events, finished, tool_results
from .support import Repo

FLASH = "gemini-3.8-flash"
DENIED = "Tool execution denied by policy. Forge protects this path"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_the_cli_denies_its_file_tools_the_protected_paths(repo: Repo, home: Path) -> None:
    repo.write("forge.toml", POLICY)
    repo.write("policies/rules.md", "keep\n")
    repo.write("locks/deps.lock", "pinned\n")
    repo.commit("policy")
    rules = str(repo.root / "policies" / "rules.md")
    script = Script.of(
        Reply(
            "Tidying.",
            calls=(
                WriteFile("forge.toml", "x = 1\n"),
                WriteFile(str(repo.root / "forge.toml"), "x = 2\n"),
                ToolCall(
                    "replace",
                    {
                        "file_path": rules,
                        "instruction": "Drop the rule.",
                        "old_string": "keep",
                        "new_string": "drop",
                    },
                ),
                WriteFile("./locks/deps.lock", "loose\n"),
                WriteFile(".forge/changes/c/note.md", "done, trust me\n"),
                WriteFile("notes.txt", "free\n"),
            ),
            model=FLASH,
        ),
        Reply("Left them alone.\nFORGE_DONE", model=FLASH),
    )
    with cli_environment("gemini", script, home) as (server, env):
        done = repo.forge(
            "run", "--change", "c", "--executor", "gemini", "--prompt", "tidy", "--yes", env=env
        )
    assert done.code == 0, done
    assert (repo.root / "forge.toml").read_text() == POLICY
    assert (repo.root / "policies" / "rules.md").read_text() == "keep\n"
    assert (repo.root / "locks" / "deps.lock").read_text() == "pinned\n"
    assert not (repo.change_dir("c") / "note.md").exists()
    assert (repo.root / "notes.txt").read_text() == "free\n"  # the rest of the tree is writable
    *denied, free = tool_results(server)
    assert len(denied) == 5
    for answer in denied:
        assert answer.startswith(DENIED), answer
    assert free.startswith("Successfully created")
    assert events(repo, kind="protect.violation") == []  # nothing got through to restore
    [event] = finished(repo)
    assert event["done"] is True
    assert server.problems == []
