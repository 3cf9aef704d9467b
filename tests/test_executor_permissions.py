"""The protected paths Forge tells an agent CLI's own permission system.

The shipped ``claude`` definition passes the loop's ``[protect] frozen`` and
Forge's ``.forge/`` as ``permissions.deny`` rules in its ``--settings``
(proven against the real CLI in tests/test_real_claude_deny_e2e.py); a
``--cmd`` and the definitions whose CLI cannot express it get nothing. The
shipped ``gemini`` definition passes a policy file (``--policy``) denying
them to its file tools (tests/test_real_gemini_deny_e2e.py).
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from orchestra._errors import ConfigError
from orchestra._executor import ProtectedPaths, claude_deny_rules, load_executor, state_paths
from orchestra._executor._definition import shell_command
from orchestra._executor._denials import gemini_policy, write_policy

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


def test_codex_is_not_told(tmp_path: Path) -> None:
    # Its workspace-write sandbox has no read-only path inside the tree that
    # Forge could name (docs/executors.md): the sandbox, guard and check hold.
    executor = load_executor("codex", tmp_path)
    told = executor.protecting(ProtectedPaths(tmp_path, ("forge.toml",), (tmp_path / ".forge",)))
    assert told == executor
    assert "denied" not in (told.describe_permission() or "")


def test_gemini_is_told_with_a_policy_file_in_the_changes_state(tmp_path: Path) -> None:
    executor = load_executor("gemini", tmp_path)
    state = tmp_path / ".forge" / "changes" / "c"
    values = {"prompt": "p", "state_dir": str(state)}
    assert "--policy" not in executor.argv(values)  # not told yet
    told = executor.protecting(ProtectedPaths(tmp_path, ("forge.toml",), (tmp_path / ".forge",)))
    argv = told.argv(values)
    assert argv[argv.index("--policy") + 1] == str(state / "deny-policy" / "protected.toml")
    assert told.describe_permission() == (
        "edit-and-run (--approval-mode auto_edit --allowed-tools run_shell_command); "
        "every bash -c checked by Forge's guard; 2 protected paths denied with --policy"
    )


def _patterns(protected: ProtectedPaths) -> list[re.Pattern[str]]:
    rules = tomllib.loads(gemini_policy(protected))["rule"]
    assert all(rule["decision"] == "deny" for rule in rules)
    assert all(rule["toolName"] == ["write_file", "replace"] for rule in rules)
    return [re.compile(rule["argsPattern"]) for rule in rules]


def test_the_gemini_policy_matches_the_file_path_as_the_model_writes_it() -> None:
    patterns = _patterns(
        ProtectedPaths(ROOT, ("forge.toml", "policies/", "locks/*.lock"), (ROOT / ".forge",))
    )

    def denied(path: str) -> bool:
        # The CLI's stable JSON of the arguments: keys in order, no spaces.
        args = {"content": 'x "file_path":"forge.toml"', "file_path": path}
        text = json.dumps(args, separators=(",", ":"), sort_keys=True)
        return any(pattern.search(text) for pattern in patterns)

    for path in (
        "forge.toml",
        "./forge.toml",
        f"{ROOT}/forge.toml",
        "policies/a/b.md",
        "locks/deps.lock",
        ".forge/changes/c/note.md",
        f"{ROOT}/.forge/x",
    ):
        assert denied(path), path
    for path in ("forge.toml.bak", "docs/forge.toml", "policies", "locks/a/deps.lock", "notes.txt"):
        assert not denied(path), path


def test_the_gemini_policy_passes_the_clis_redos_check() -> None:
    # Gemini CLI 0.61 drops a pattern with a quantified group, or over 2,048 characters.
    nested = re.compile(r"\([^)]*[*+?{].*\)[*+?{]")
    long_folder = "a/" * 300
    for pattern in _patterns(ProtectedPaths(ROOT, ("forge.toml", "p/", "*.lock", long_folder))):
        assert not nested.search(pattern.pattern), pattern.pattern
        assert len(pattern.pattern) <= 2048


def test_a_changed_policy_is_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "state" / "deny-policy" / "protected.toml"
    write_policy(path, "one")
    write_policy(path, "two")
    assert path.read_text() == "two"
    assert sorted(p.name for p in path.parent.iterdir()) == ["protected.toml"]


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


def test_deny_protected_is_a_known_way_and_claudes_needs_its_hooks(tmp_path: Path) -> None:
    (tmp_path / "executors").mkdir()
    (tmp_path / "executors" / "mine.toml").write_text(
        'argv = ["mine"]\ndeny_protected = "claude-settings"\n'
    )
    with pytest.raises(ConfigError) as error:
        load_executor("mine", tmp_path)
    assert "deny_protected" in str(error.value.problems)
    (tmp_path / "executors" / "mine.toml").write_text('argv = ["mine"]\ndeny_protected = "x"\n')
    with pytest.raises(ConfigError) as error:
        load_executor("mine", tmp_path)
    assert "claude-settings, gemini-policy" in str(error.value.problems)


def test_the_plan_counts_the_protected_paths_denied(repo: Repo) -> None:
    repo.write("forge.toml", '[protect]\nfrozen = ["forge.toml", "policies/", "*.lock"]\n')
    plan = repo.forge("run", "--change", "c", "--executor", "claude")
    assert plan.code == 0, plan
    [line] = [line for line in plan.lines if line.startswith("  permission:")]
    assert line.endswith(
        "; Forge's guard and Stop hooks passed with --settings; 4 protected paths denied"
    )
    plan = repo.forge("run", "--change", "c", "--executor", "gemini")
    assert "4 protected paths denied with --policy" in plan.out
    assert "deny-policy/protected.toml" in plan.out
    plan = repo.forge("run", "--change", "c", "--cmd", "true")
    assert "denied" not in plan.out
