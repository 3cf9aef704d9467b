"""``forge init`` through the real command in a temporary git repository."""

from __future__ import annotations

import json
import os
import tomllib
from typing import Any

from .support import Repo


def path_with(repo: Repo, *clis: str) -> dict[str, str]:
    """PATH holding stand-ins named after agent CLIs (only their presence matters)."""
    bin_dir = repo.root.parent / "bin"
    bin_dir.mkdir(exist_ok=True)
    for cli in clis:
        (bin_dir / cli).write_text("#!/bin/sh\nexit 0\n")
        (bin_dir / cli).chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}


def test_init_detects_the_test_command_and_the_agents_and_writes_a_commented_policy(
    repo: Repo,
) -> None:
    repo.write("Makefile", "lint:\n\truff check .\n\ntest:\n\tpytest -q\n")
    env = path_with(repo, "codex", "claude")
    done = repo.forge("init", env=env)
    assert done.code == 0, done
    assert done.lines[:5] == [
        "test command: make test (the Makefile's test target)",
        "lint command: make lint (the Makefile's lint target)",
        "spec folders: none (scenario coverage off)",
        "agent CLIs on PATH: claude, codex",
        "forge.toml: written",
    ]
    text = (repo.root / "forge.toml").read_text()
    assert text.startswith("#:schema ./forge.schema.json\n# forge.toml, written by `forge init`.")
    policy = tomllib.loads(text)
    assert policy["verify"]["command"] == "make test"
    assert policy["verify"]["lint"] == "make lint"
    assert policy["run"]["executor"] == "claude"
    assert "FORGE_DONE" in policy["run"]["prompt"]
    checked = repo.forge("policy", "check")
    assert checked.code == 0, checked
    again = repo.forge("init", env=env)
    assert "forge.toml: exists; left as it is" in again.lines
    assert (repo.root / "forge.toml").read_text() == text


def test_init_finds_each_kind_of_project(repo: Repo) -> None:
    cases = [
        ("go.mod", "module x\n", "go test ./..."),
        ("Cargo.toml", "[package]\nname = 'x'\n", "cargo test"),
        ("package.json", json.dumps({"scripts": {"test": "vitest run"}}), "npm test"),
        ("pyproject.toml", "[tool.pytest.ini_options]\n", "pytest -q --junitxml=.forge/junit.xml"),
    ]
    for name, content, expected in cases:
        (repo.root / "forge.toml").unlink(missing_ok=True)
        for other, _, _ in cases:
            (repo.root / other).unlink(missing_ok=True)
        repo.write(name, content)
        done = repo.forge("init", "--json", env=path_with(repo))
        report = json.loads(done.out)
        assert report["test_command"] == expected, name
        assert report["agents"] == []


def test_init_finds_each_kind_of_linter(repo: Repo) -> None:
    cases = [
        ("ruff.toml", "line-length = 100\n", "ruff check ."),
        (".ruff.toml", "line-length = 100\n", "ruff check ."),
        ("pyproject.toml", "[tool.ruff]\nline-length = 100\n", "ruff check ."),
        (
            "pyproject.toml",
            "[dependency-groups]\ndev = ['pytest>=8', 'ruff>=0.6']\n",
            "ruff check .",
        ),
        ("pyproject.toml", "[project.optional-dependencies]\ntest = ['flake8']\n", "flake8"),
        (".flake8", "[flake8]\nmax-line-length = 100\n", "flake8"),
        ("setup.cfg", "[metadata]\nname = x\n\n[flake8]\nextend-ignore = E203\n", "flake8"),
        ("package.json", json.dumps({"scripts": {"lint": "eslint src"}}), "npm run lint"),
        ("eslint.config.mjs", "export default [];\n", "npx eslint ."),
        (".golangci.yml", "linters:\n  enable: [govet]\n", "golangci-lint run"),
        ("pyproject.toml", "[project]\nname = 'x'\n", None),
    ]
    for name, content, expected in cases:
        for other, _, _ in cases:
            (repo.root / other).unlink(missing_ok=True)
        repo.write(name, content)
        done = repo.forge("init", "--json", "--dry-run", env=path_with(repo))
        assert json.loads(done.out)["lint_command"] == expected, (name, content)


def test_init_dry_run_writes_nothing(repo: Repo) -> None:
    done = repo.forge("init", "--dry-run", "--claude-hooks", env=path_with(repo, "gemini"))
    assert done.code == 0, done
    assert "forge.toml: would be written:" in done.lines
    assert '  executor = "gemini"' in done.lines
    assert ".claude/settings.json: would be:" in done.lines
    assert "forge.schema.json: would be written (the schema editors check forge.toml against)" in (
        done.lines
    )
    assert not (repo.root / "forge.toml").exists()
    assert not (repo.root / "forge.schema.json").exists()
    assert not (repo.root / ".forge").exists()
    assert not (repo.root / ".claude").exists()


def test_claude_hooks_are_merged_without_clobbering_and_only_once(repo: Repo) -> None:
    existing: dict[str, Any] = {
        "model": "opus",
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
            "PostToolUse": [{"hooks": [{"type": "command", "command": "fmt"}]}],
        },
    }
    repo.write(".claude/settings.json", json.dumps(existing))
    done = repo.forge("init", "--claude-hooks", env=path_with(repo))
    assert done.code == 0, done
    [added] = [line for line in done.lines if line.startswith(".claude/settings.json:")]
    assert added.startswith(".claude/settings.json: Forge's PreToolUse guard and Stop hook added")
    assert "these stand aside so each stop verifies once" in added
    merged = json.loads((repo.root / ".claude/settings.json").read_text())
    assert merged["model"] == "opus"
    assert merged["permissions"] == existing["permissions"]
    assert merged["hooks"]["PostToolUse"] == existing["hooks"]["PostToolUse"]
    pre = merged["hooks"]["PreToolUse"]
    assert pre[0] == existing["hooks"]["PreToolUse"][0]
    assert pre[1]["hooks"][0]["command"] == "forge hook pre-tool-use"
    assert merged["hooks"]["Stop"][0]["hooks"][0] == {
        "type": "command",
        "command": "forge hook stop",
        "timeout": 900,
    }
    before = (repo.root / ".claude/settings.json").read_bytes()
    again = repo.forge("init", "--claude-hooks", env=path_with(repo))
    assert ".claude/settings.json: Forge's hooks are already there; left as it is" in again.lines
    assert (repo.root / ".claude/settings.json").read_bytes() == before


def test_unreadable_claude_settings_are_reported_not_replaced(repo: Repo) -> None:
    repo.write(".claude/settings.json", "{not json")
    done = repo.forge("init", "--claude-hooks", env=path_with(repo))
    assert done.code == 2
    assert ".claude/settings.json cannot be read" in done.err
    assert "Traceback" not in done.err
    assert (repo.root / ".claude/settings.json").read_text() == "{not json"
