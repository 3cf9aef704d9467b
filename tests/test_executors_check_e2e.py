"""``forge executors check``: the CLI installed here, run by Forge against the scripted server.

The pinned releases pass every check; a CLI that stopped accepting the
shipped flags, or whose output format changed, fails with a message naming
what broke, and ``forge supervise --check-executors`` then starts nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .agent_clis import agent_bin, proven_version
from .support import Repo

CHECKED = ("version", "flags accepted", "edits permitted", "shell commands run")


def env_with(*folders: Path) -> dict[str, str]:
    """The real CLIs on PATH (after ``folders``, whose programs shadow them)."""
    path = [*map(str, folders), str(agent_bin()), str(Path(sys.executable).parent)]
    return {"PATH": os.pathsep.join([*path, os.environ.get("PATH", "")])}


def shim(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)
    return folder


def row(lines: list[str], check: str) -> str:
    """The table's row of ``check`` (the verdict line names failed checks too)."""
    [found] = [line for line in lines if line.startswith("  ") and check in line]
    return found


def test_the_pinned_clis_pass_every_check(repo: Repo) -> None:
    done = repo.forge("executors", "check", "claude", "codex", "gemini", "--json", env=env_with())
    assert done.code == 0, done
    results = {r["executor"]: r for r in json.loads(done.out)["executors"]}
    for name in ("claude", "codex", "gemini"):
        result = results[name]
        assert result["passed"], result
        assert result["version"] == result["proven"] == proven_version(name)
        statuses = {check["name"]: check["status"] for check in result["checks"]}
        assert all(statuses[name] == "ok" for name in CHECKED), statuses
        assert statuses["output parsed"] == statuses["tokens read"] == "ok", statuses
    # Claude Code gets Forge's hooks: the guard refused the delete inside the CLI.
    claude = {c["name"]: c for c in results["claude"]["checks"]}
    assert claude["hooks honoured"]["status"] == "ok"
    assert (repo.root / "README.md").exists()  # the check ran in a scratch repository
    assert not (repo.root / "forge-check.txt").exists()


def test_a_cli_that_refuses_the_shipped_flags_fails_clearly(repo: Repo, tmp_path: Path) -> None:
    folder = shim(
        tmp_path / "old",
        "claude",
        'case "$1" in --version) echo "9.9.9 (Claude Code)"; exit 0;; esac\n'
        "echo \"error: unknown option '--output-format'\" >&2\nexit 1\n",
    )
    done = repo.forge("executors", "check", "claude", env=env_with(folder))
    assert done.code == 1, done
    assert "claude  9.9.9" in done.lines
    version = row(done.lines, "version")
    assert f"9.9.9 (Forge proved {proven_version('claude')}; checked here instead)" in version
    flags = row(done.lines, "flags accepted")
    assert "failed" in flags
    assert "the CLI never called the model" in flags
    assert "unknown option '--output-format'" in flags
    assert done.lines[-1] == "executors check: claude FAILED (flags accepted)"


def test_a_cli_whose_output_format_changed_fails_the_parse(repo: Repo, tmp_path: Path) -> None:
    real = agent_bin() / "codex"
    # An upgrade that renamed an event: the turn completes, Forge cannot read it.
    folder = shim(
        tmp_path / "renamed",
        "codex",
        f'case "$1" in --version) exec "{real}" "$@";; esac\n'
        f'"{real}" "$@" | sed "s/turn.completed/turn.done/g"\n',
    )
    done = repo.forge("executors", "check", "codex", env=env_with(folder))
    assert done.code == 1, done
    flags = row(done.lines, "flags accepted")
    assert flags.split()[0] == "ok"
    tokens = row(done.lines, "tokens read")
    assert tokens.split()[0] == "failed"
    assert done.lines[-1].startswith("executors check: codex FAILED (")


def test_supervise_check_executors_starts_nothing_when_one_fails(
    repo: Repo, tmp_path: Path
) -> None:
    folder = shim(tmp_path / "broken", "claude", 'echo "9.9.9 (Claude Code)"; exit 1\n')
    repo.write(
        "forge.toml",
        '[verify]\ncommand = "true"\n[[loop]]\nchange = "a"\nexecutor = "claude"\n',
    )
    repo.commit()
    done = repo.forge("supervise", "--check-executors", env=env_with(folder))
    assert done.code == 1, done
    assert "supervise: not started — an executor check failed" in done.lines
    assert not repo.change_dir("a").exists()


def test_an_unknown_executor_is_a_usage_error(repo: Repo) -> None:
    done = repo.forge("executors", "check", "nosuch", env=env_with())
    assert done.code == 2
    assert "no executor named 'nosuch'" in done.err
