"""How many git commands a loop's iteration costs, counted by a ``git`` first on PATH.

Per iteration the loop takes one status after the agent ran (the probe's
``take``), reuses it for the verify fingerprint, the stagnation signals and
the secret scan, and keeps it as the next iteration's "before".
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestra._executor import IterationContext, IterationOutcome, run_iteration, shell_command
from orchestra._git import run_git
from orchestra._policy import SecscanPolicy, StagnationPolicy
from orchestra._secscan._project import ProjectScanner, SecscanReport
from orchestra._stagnation import Signals, Snapshot, WorkspaceProbe
from orchestra._workspace import TreeState, tree_state, tree_state_from

from .support import Repo

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
REAL_GIT = shutil.which("git")


@pytest.fixture
def git_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log with one line per git command Forge starts from now on."""
    assert REAL_GIT is not None
    folder = tmp_path / "counting-bin"
    folder.mkdir()
    log = tmp_path / "git-calls.log"
    log.touch()
    wrapper = folder / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(REAL_GIT)} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return log


def agent_git(repo: Repo, *args: str) -> None:
    """git as the agent runs it: not Forge's, so not counted."""
    assert REAL_GIT is not None
    subprocess.run([REAL_GIT, *args], cwd=repo.root, check=True, capture_output=True)


async def an_outcome(repo: Repo) -> IterationOutcome:
    script = repo.root.parent / "step.json"
    script.write_text(json.dumps({"steps": [{"print": "working\n"}]}))
    return await run_iteration(
        shell_command(shlex.join([sys.executable, str(FAKE_AGENT), str(script)])),
        IterationContext(
            change="c",
            number=1,
            max_iterations=1,
            workdir=repo.root,
            state_dir=repo.root / ".forge" / "changes" / "c",
            report_path=repo.root / ".forge" / "report.json",
            log_path=repo.root / ".forge" / "log",
        ),
        time_limit=60,
        grace=1,
        done_marker="FORGE_DONE",
    )


class LoopSide:
    """What the loop engine does with the workspace around each iteration."""

    def __init__(self, workdir: Path) -> None:
        self.probe = WorkspaceProbe(workdir, StagnationPolicy())
        self.scanner = ProjectScanner.for_project(SecscanPolicy(), root=workdir, workdir=workdir)
        # Once, when the loop starts: the first "before" and a full scan.
        self.before: Snapshot = self.probe.snapshot()
        self.scanner.scan(self.before.status)

    def iteration(self, outcome: IterationOutcome) -> tuple[TreeState, Signals, SecscanReport]:
        after = self.probe.take()  # the one git status of the iteration
        tree = tree_state_from(after.status) if after.status else tree_state(self.probe.workdir)
        signals = self.probe.measure(self.before, outcome, None, after=after)
        report = self.scanner.scan(after.status)
        self.before = self.probe.mark_seen(after)  # the next iteration's "before"
        return tree, signals, report


def calls(log: Path) -> list[str]:
    lines = log.read_text().splitlines()
    log.write_text("")
    return lines


async def test_a_quiet_iteration_costs_one_git_status(repo: Repo, git_log: Path) -> None:
    repo.write("app.py", "A = 1\n")
    repo.write("dirty.py", "D = 1\n")
    repo.commit("start")
    repo.write("dirty.py", "D = 2\n")  # a change the loop started with
    repo.write("notes.txt", "untracked")
    outcome = await an_outcome(repo)
    calls(git_log)
    loop = LoopSide(repo.root)
    assert len(calls(git_log)) == 3  # once per loop: where the workdir is, a status, a listing
    trees = []
    for _ in range(3):
        tree, signals, report = loop.iteration(outcome)
        made = calls(git_log)
        assert len(made) <= 2, made
        assert [call.split()[0] for call in made] == ["status"]  # just the one status
        assert signals.files_modified == 0
        assert report.result.files_considered == 4  # .gitignore-free tree: 4 files, unlisted
        trees.append(tree)
    assert trees[0] == trees[1] == trees[2] == tree_state(repo.root)


async def test_work_and_commits_cost_at_most_three(repo: Repo, git_log: Path) -> None:
    repo.write("app.py", "A = 1\n")
    repo.commit("start")
    outcome = await an_outcome(repo)
    loop = LoopSide(repo.root)
    calls(git_log)

    repo.write("app.py", "A = 2\n")  # a file that matched HEAD changes
    _, signals, _ = loop.iteration(outcome)
    made = calls(git_log)
    assert len(made) <= 2, made  # the status, and HEAD's content of app.py
    assert signals.files_modified == 1

    repo.write("new.py", "N = 1\n")
    # Everything but Forge's own files, which a tracked .forge would put in the scan.
    agent_git(repo, "add", "-A", "--", ".", ":!.forge")
    agent_git(repo, "commit", "-q", "-m", "the agent committed")
    tree, signals, report = loop.iteration(outcome)
    made = calls(git_log)
    assert len(made) <= 3, made  # HEAD moved: what the commits changed, once for all
    assert signals.files_modified == 1  # new.py; app.py was already counted
    assert report.result.files_considered == 3
    expected_tree = tree_state(repo.root)
    assert tree == expected_tree
    calls(git_log)

    _, signals, _ = loop.iteration(outcome)
    assert len(calls(git_log)) == 1
    assert signals.files_modified == 0


def test_git_runs_in_its_folder_whatever_a_hook_exported(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=other, check=True)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    top = run_git(repo.root, "rev-parse", "--show-toplevel")
    assert top.ok
    assert Path(top.stdout.decode().strip()) == repo.root.resolve()
    env = run_git(repo.root, "var", "GIT_EDITOR", input=b"")
    assert env.ok  # input given: stdin is a pipe, and git still ran


def test_no_git_and_a_slow_git_are_results_not_exceptions(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    (slow / "git").write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} 30\n")
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(slow))
    stuck = run_git(repo.root, "status", timeout=0.2)
    assert (stuck.ok, stuck.returncode) == (False, None)
    assert "no answer" in stuck.message()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    missing = run_git(repo.root, "status")
    assert (missing.ok, missing.returncode) == (False, None)
    assert "cannot run git" in missing.message()
