"""One loop's iteration never walks another change's folders.

Under ``[supervise] worktrees = "auto"`` every loop keeps its state in the one
``.forge/changes/<change>/`` of the main checkout and works in
``.forge/worktrees/<change>``. Whatever one loop's iteration lists (the
integrity check, the secret scan, the status of its tree) must not grow with
the other loops: listing another change's folder, or anything in another
loop's worktree, makes every iteration cost more with every loop and every
iteration of the others.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from orchestra._policy import Policy, RunPolicy, VerifyPolicy
from orchestra._supervise import LoopSetup, Supervision, prepare

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]


def _repository(root: Path) -> None:
    for name, text in {
        "AGENTS.md": "# Agents\n",
        "specs/one.md": "# One\n",
        "src/app.py": "X = 1\n",
        ".gitignore": ".forge/\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-qm", "start"], cwd=root, check=True)


def _other_change(root: Path) -> list[Path]:
    """Change ``b`` as it looks after many iterations: its state, its runs, its worktree."""
    state = root / ".forge" / "changes" / "b"
    for number in range(1, 30):
        log = state / "runs" / "20260101T000000Z-abcd" / f"iteration-{number}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("output\n")
    for name in ("breaker.yaml", "spend.yaml", "verify-attempts.yaml", "timeline.jsonl"):
        (state / name).write_text("{}\n")
    tree = root / ".forge" / "worktrees" / "b"
    subprocess.run(
        [*GIT, "worktree", "add", "-q", "-b", "forge/b", str(tree)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    for number in range(30):
        (tree / "src" / f"module_{number}.py").write_text("Y = 2\n")
    return [state, tree]


class _Listings:
    """Every folder listed (``os.scandir``, ``os.listdir``), from any thread."""

    def __init__(self) -> None:
        self.folders: list[Path] = []
        self._lock = threading.Lock()

    def note(self, path: Any) -> None:
        folder = Path(os.fsdecode(path if path is not None else ".")).absolute()
        with self._lock:
            self.folders.append(folder)

    def under(self, parents: list[Path]) -> list[Path]:
        return sorted(
            {f for f in self.folders for parent in parents if f.is_relative_to(parent.resolve())}
        )


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> _Listings:
    seen = _Listings()
    scandir, listdir = os.scandir, os.listdir

    def counting_scandir(path: Any = ".") -> Any:
        seen.note(path)
        return scandir(path)

    def counting_listdir(path: Any = ".") -> list[Any]:
        seen.note(path)
        return listdir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    monkeypatch.setattr(os, "listdir", counting_listdir)
    return seen


def test_a_worktree_loops_iteration_lists_nothing_of_another_change(
    tmp_path: Path, listings: _Listings
) -> None:
    root = tmp_path.resolve()
    _repository(root)
    others = _other_change(root)
    policy = Policy(
        verify=VerifyPolicy(command="true", specs=()),
        run=RunPolicy(cmd="true", max_iterations=2),
    )
    setup = LoopSetup(
        change="a", policy=policy, root=root, worktree=True, base="HEAD", source="loop[0]"
    )
    runs = prepare([setup], run_id="20260101T000001Z-ef01")
    events: list[tuple[str, str, str]] = []
    supervision = Supervision(
        runs,
        limiter=None,
        max_parallel=None,
        on_event=lambda kind, change, text: events.append((kind, change, text)),
    )
    listings.folders.clear()  # the setup listed b's folders itself
    ended = trio.run(supervision.run)
    assert [summary.iterations for summary in ended.values()] == [2], events
    assert (root / ".forge" / "worktrees" / "a" / ".git").is_file()
    assert listings.under(others) == []


def test_the_isolation_test_sees_listings_in_worker_threads(listings: _Listings) -> None:
    # The check above counts on seeing what worker threads list.
    folder = Path.cwd()

    async def main() -> None:
        await trio.to_thread.run_sync(os.listdir, folder)

    trio.run(main)
    assert folder.absolute() in listings.folders
