"""kill -9 of ``forge land`` at seeded random instants while it lands three changes.

After every kill the base is where one of 0, 1, 2 or 3 landings leave it —
never anything else — and, unless a landing is journalled as pending, the
checked-out working tree is exactly the base's tree. The next ``forge land``
finishes whatever was interrupted: every change lands exactly once (one
``land.done`` each), the tree matches the base, and no scratch worktree or
journal is left.

Git runs through a wrapper that pauses before ``update-ref`` and
``read-tree`` and gives up when forge died meanwhile, as git would never
have started: it widens the window between moving the base and bringing the
files along, so that random kills land in it, not only by luck.

Guards: the pending-landing journal (``orchestra/_land/_pending.py``), the
compare-and-swap ``update-ref``, and the scratch worktree's cleanup.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess

import pytest

from ..support import FORGE, Repo, forge_env
from .harness import alive, assert_clean_exit, descendants, wait_until

pytestmark = pytest.mark.reliability

CHANGES = ("alpha", "beta", "gamma")
RUN_ID = "20261204T020000Z-kill9"

_WRAPPER = """#!/bin/sh
# A git that pauses before moving a ref or the tree; if forge died meanwhile
# (this process was reparented), it exits as if it had never run.
case "$1" in
  update-ref|read-tree)
    parent=$(cut -d' ' -f4 /proc/$$/stat)
    sleep 0.05
    now=$(cut -d' ' -f4 /proc/$$/stat)
    [ "$now" = "$parent" ] || exit 137
    ;;
esac
exec {git} "$@"
"""


def _setup(repo: Repo) -> dict[str, str]:
    """Three done changes of a batch, each adding its own file; the env forge runs in."""
    repo.write("forge.toml", '[verify]\ncommand = "sh verify.sh"\nspecs = []\ntests = []\n')
    repo.write("verify.sh", "ls *.txt >/dev/null 2>&1 || true\n")
    repo.write(".gitignore", ".forge/\n")
    repo.commit("project")
    repo.git("branch", "-M", "main")
    for change in CHANGES:
        tree = repo.root / ".forge" / "worktrees" / change
        tree.parent.mkdir(parents=True, exist_ok=True)
        repo.git("worktree", "add", "-q", "-b", f"forge/{change}", str(tree), "main")
        (tree / f"{change}.txt").write_text(f"{change}\n")
        Repo(tree).commit(f"{change}: work")
    folder = repo.root / ".forge" / "runs" / RUN_ID
    folder.mkdir(parents=True)
    loops = [{"change": c, "reason": "done"} for c in CHANGES]
    (folder / "summary.json").write_text(json.dumps({"run_id": RUN_ID, "loops": loops}))
    bin_dir = repo.root.parent / "bin"
    bin_dir.mkdir()
    real = shutil.which("git")
    assert real is not None
    wrapper = bin_dir / "git"
    wrapper.write_text(_WRAPPER.format(git=real))
    wrapper.chmod(0o755)
    return forge_env({"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})


def _kill_after(repo: Repo, env: dict[str, str], delay: float) -> int | None:
    """Start ``forge land``, SIGKILL it (only it) after ``delay``; wait for its orphans."""
    process = subprocess.Popen(
        [str(FORGE), "land"],
        cwd=repo.root,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        return process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        orphans = descendants(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    # Git commands it had started run to their end, as after a real kill -9.
    wait_until(lambda: not any(alive(pid) for pid in orphans), what="forge's children to end")
    return None


def _landings(repo: Repo, original: str, base_files: set[str]) -> int:
    """How many landings the base has: it must be exactly what 0-3 of them leave."""
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", original, "main"], cwd=repo.root, check=False
    )
    assert ancestor.returncode == 0, "main left the original history"
    count = int(repo.git("rev-list", "--count", f"{original}..main").strip())
    assert 0 <= count <= len(CHANGES), count
    files = set(repo.git("ls-tree", "--name-only", "main").split())
    assert files == base_files | {f"{c}.txt" for c in CHANGES[:count]}, files
    for change in CHANGES[:count]:
        assert repo.git("show", f"main:{change}.txt") == f"{change}\n"
    return count


def _land_dones(repo: Repo, change: str) -> int:
    timeline = repo.change_dir(change) / "timeline.jsonl"
    if not timeline.exists():
        return 0
    lines = timeline.read_text().splitlines()
    return sum(1 for line in lines if json.loads(line).get("event") == "land.done")


def _tree_matches_base(repo: Repo) -> None:
    assert repo.git("symbolic-ref", "--short", "HEAD").strip() == "main"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("diff", "main", "--") == ""  # the files are main's tree
    for path in repo.git("ls-tree", "-r", "--name-only", "main").split():
        assert (repo.root / path).read_text() == repo.git("show", f"main:{path}")


@pytest.mark.parametrize("seed", range(8))
def test_kill9_during_land_never_half_moves_the_base_or_the_tree(repo: Repo, seed: int) -> None:
    env = _setup(repo)
    original = repo.git("rev-parse", "main").strip()
    base_files = set(repo.git("ls-tree", "--name-only", "main").split())
    rng = random.Random(seed)
    pending = repo.root / ".forge" / "land" / "pending.json"
    for _ in range(5):
        ended = _kill_after(repo, env, rng.uniform(0.05, 2.5))
        assert ended in (None, 0), ended
        landed = _landings(repo, original, base_files)
        if not pending.exists():
            _tree_matches_base(repo)
        for change in CHANGES:
            assert _land_dones(repo, change) <= 1, change
        if landed == len(CHANGES) and not pending.exists():
            break

    done = repo.forge("land", env=env)

    assert_clean_exit(done, 0)
    assert _landings(repo, original, base_files) == len(CHANGES)
    _tree_matches_base(repo)
    assert not pending.exists()
    assert not (repo.root / ".forge" / "land" / "scratch").exists()
    assert "scratch" not in repo.git("worktree", "list")
    for change in CHANGES:
        assert _land_dones(repo, change) == 1, change
