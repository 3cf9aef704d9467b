"""``.forge/`` keeps its runtime files out of commits: worktrees, caches, logs, databases, locks."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from orchestra._state import IGNORE_RULES

from .support import Repo
from .test_supervise_e2e import agent

# Each change's state a teammate or a later checkout reads: committable.
COMMITTABLE = {
    "breaker.yaml",
    "spend.yaml",
    "verify-attempts.yaml",
    "timeline.jsonl",
    "status.md",
    "secscan-markers.json",
}


def _batch(repo: Repo) -> None:
    done = agent(repo.root.parent, "done", {"print": "working\n"}, {"print": "FORGE_DONE\n"})
    repo.write(
        "forge.toml",
        f"""
[verify]
command = "true"
specs = []
[rate_limit]
calls = 50
window = "2s"

[[loop]]
change = "one"
cmd = {json.dumps(done)}
worktree = true

[[loop]]
change = "two"
cmd = {json.dumps(done)}
worktree = true
""",
    )
    repo.commit("the batch")


def _add_all(repo: Repo) -> tuple[list[str], str]:
    """``git add -A``: the paths it staged under .forge/, and what git said."""
    added = subprocess.run(
        ["git", "add", "-A"], cwd=repo.root, check=True, capture_output=True, text=True
    )
    staged = repo.git("diff", "--cached", "--name-only").splitlines()
    return [path for path in staged if path.startswith(".forge/")], added.stderr


def test_after_a_batch_with_worktrees_git_add_stages_only_the_state_meant_for_commits(
    repo: Repo,
) -> None:
    _batch(repo)
    done = repo.forge("supervise")
    assert done.code == 0, done
    assert (repo.root / ".forge" / "worktrees" / "one" / ".git").exists()
    assert list((repo.root / ".forge" / "runs").glob("*/summary.json"))
    staged, said = _add_all(repo)
    # No worktree embedded as a nested repository, no cache, log, database or lock.
    assert "embedded git repository" not in said
    assert ".forge/.gitignore" in staged
    others = [path for path in staged if path != ".forge/.gitignore"]
    assert others, staged
    for path in others:
        parts = path.split("/")
        assert parts[1] == "changes", path
        assert len(parts) == 4, path
        assert parts[3] in COMMITTABLE, path
    assert {p.split("/")[3] for p in others} >= {"breaker.yaml", "timeline.jsonl"}
    ignored = [
        ".forge/worktrees/one/README.md",
        ".forge/ratelimit.sqlite3",
        ".forge/cache/x.sqlite3",
        ".forge/changes/one/.lock",
        ".forge/changes/one/.forge-writes",
        ".forge/changes/one/runs/r/iteration-1.log",
        ".forge/runs/r/summary.json",
        ".forge/junit.xml",
        ".forge/lessons.lock",
        ".forge/changes/one/.breaker.yaml.abc.tmp",
    ]
    check = subprocess.run(
        ["git", "check-ignore", "--no-index", *ignored],
        cwd=repo.root,
        capture_output=True,
        text=True,
    )
    assert check.stdout.splitlines() == ignored
    # What stays committable is not ignored (check-ignore exits 1: none of them is).
    kept = [".forge/secscan-waivers.yaml", ".forge/changes/one/checkpoint.json"]
    kept_check = subprocess.run(["git", "check-ignore", "--no-index", *kept], cwd=repo.root)
    assert kept_check.returncode == 1
    # The worktrees see the project's files, not the rules of the folder that holds them.
    assert repo.git("-C", ".forge/worktrees/one", "status", "--porcelain") == ""


def test_rules_a_person_edited_are_left_as_they_are(repo: Repo) -> None:
    repo.write(".forge/.gitignore", "# ours: commit everything\n")
    done = repo.forge("verify", "--change", "c", "--set", 'verify.command="true"')
    assert done.code == 0, done
    assert (repo.root / ".forge" / ".gitignore").read_text() == "# ours: commit everything\n"


def test_init_writes_the_rules_once(repo: Repo) -> None:
    dry = repo.forge("init", "--dry-run")
    assert dry.code == 0, dry
    assert not (repo.root / ".forge").exists()
    assert any(line.startswith(".forge/.gitignore: would be written") for line in dry.lines)
    done = repo.forge("init")
    assert done.code == 0, done
    assert any(line.startswith(".forge/.gitignore: written") for line in done.lines)
    rules = (repo.root / ".forge" / ".gitignore").read_text()
    assert "/worktrees/" in rules.splitlines()
    again = repo.forge("init", "--json")
    assert json.loads(again.out)["forge_gitignore"] == "unchanged"
    assert (repo.root / ".forge" / ".gitignore").read_text() == rules


def test_the_rules_are_the_ones_docs_state_md_shows() -> None:
    docs = (Path(__file__).parents[1] / "docs" / "state.md").read_text(encoding="utf-8")
    block = docs.split("```gitignore\n", 1)[1].split("```", 1)[0]
    rules = [line for line in IGNORE_RULES.splitlines() if not line.startswith("#")]
    assert block.splitlines() == rules
