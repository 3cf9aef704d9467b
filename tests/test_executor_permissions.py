"""The protected paths Forge tells an agent CLI's own permission system.

The shipped ``claude`` definition passes the loop's ``[protect] frozen`` and
Forge's ``.forge/`` as ``permissions.deny`` rules in its ``--settings``
(proven against the real CLI in tests/test_real_claude_deny_e2e.py); a
``--cmd`` and the definitions whose CLI cannot express it get nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestra._errors import ConfigError
from orchestra._executor import ProtectedPaths, claude_deny_rules, load_executor, state_paths
from orchestra._executor._definition import shell_command

from .support import Repo

ROOT = Path("/work/project")


def settings_of(argv: list[str]) -> dict[str, object]:
    return json.loads(argv[argv.index("--settings") + 1])  # type: ignore[no-any-return]


def test_each_frozen_entry_is_one_absolute_edit_rule_and_a_folder_its_subtree() -> None:
    protected = ProtectedPaths(
        workdir=ROOT,
        frozen=("forge.toml", "policies/", "locks/*.lock", "./specs"),
        state=(ROOT / ".forge",),
    )
    assert claude_deny_rules(protected) == [
        "Edit(//work/project/forge.toml)",
        "Edit(//work/project/forge.toml/**)",
        "Edit(//work/project/policies/**)",
        "Edit(//work/project/locks/*.lock)",
        "Edit(//work/project/locks/*.lock/**)",
        "Edit(//work/project/specs)",
        "Edit(//work/project/specs/**)",
        "Edit(//work/project/.forge)",
        "Edit(//work/project/.forge/**)",
    ]
    assert protected.count == 5


def test_the_shipped_claude_executor_passes_them_with_its_hooks(tmp_path: Path) -> None:
    executor = load_executor("claude", tmp_path)
    assert "permissions" not in settings_of(executor.argv({"prompt": "p"}))  # not told yet
    told = executor.protecting(ProtectedPaths(tmp_path, ("forge.toml",), (tmp_path / ".forge",)))
    settings = settings_of(told.argv({"prompt": "p"}))
    assert settings["permissions"] == {"deny": claude_deny_rules(told.protected)}  # type: ignore[arg-type]
    assert "PreToolUse" in settings["hooks"]  # type: ignore[operator]
    assert told.describe_permission() == (
        "edit-and-run (--permission-mode acceptEdits --allowedTools Bash); "
        "Forge's guard and Stop hooks passed with --settings; 2 protected paths denied"
    )


def test_a_long_protect_list_stays_patterns_not_files(tmp_path: Path) -> None:
    for number in range(500):
        (tmp_path / "policies").mkdir(exist_ok=True)
        (tmp_path / "policies" / f"rule-{number}.md").write_text("x\n")
    told = load_executor("claude", tmp_path).protecting(ProtectedPaths(tmp_path, ("policies/",)))
    assert settings_of(told.argv({"prompt": "p"}))["permissions"] == {
        "deny": [f"Edit(/{tmp_path}/policies/**)"]
    }


@pytest.mark.parametrize("name", ["codex", "gemini"])
def test_the_clis_that_cannot_express_it_are_not_told(name: str, tmp_path: Path) -> None:
    executor = load_executor(name, tmp_path)
    told = executor.protecting(ProtectedPaths(tmp_path, ("forge.toml",), (tmp_path / ".forge",)))
    assert told == executor
    assert "denied" not in (told.describe_permission() or "")


def test_a_cmd_is_not_told() -> None:
    executor = shell_command("my-agent")
    assert executor.protecting(ProtectedPaths(ROOT, ("forge.toml",))) == executor


def test_a_worktree_under_forge_is_left_writable(tmp_path: Path) -> None:
    state = tmp_path / ".forge"
    for folder in ("changes/a", "cache", "worktrees/a", "worktrees/b"):
        (state / folder).mkdir(parents=True)
    (state / "secscan-waivers.yaml").write_text("[]\n")
    assert state_paths(state, tmp_path) == (state,)
    assert state_paths(state, state / "worktrees" / "a") == (
        state / "changes",
        state / "cache",
        state / "secscan-waivers.yaml",
        state / "worktrees" / "b",
    )


def test_deny_protected_needs_the_settings_of_claude_hooks(tmp_path: Path) -> None:
    (tmp_path / "executors").mkdir()
    (tmp_path / "executors" / "mine.toml").write_text('argv = ["mine"]\ndeny_protected = true\n')
    with pytest.raises(ConfigError) as error:
        load_executor("mine", tmp_path)
    assert "deny_protected" in str(error.value.problems)


def test_the_plan_counts_the_protected_paths_denied(repo: Repo) -> None:
    repo.write("forge.toml", '[protect]\nfrozen = ["forge.toml", "policies/", "*.lock"]\n')
    plan = repo.forge("run", "--change", "c", "--executor", "claude")
    assert plan.code == 0, plan
    [line] = [line for line in plan.lines if line.startswith("  permission:")]
    assert line.endswith(
        "; Forge's guard and Stop hooks passed with --settings; 4 protected paths denied"
    )
    plan = repo.forge("run", "--change", "c", "--cmd", "true")
    assert "denied" not in plan.out
