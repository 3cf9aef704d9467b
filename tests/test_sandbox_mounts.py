"""The sandbox's mounts, the pure core: which paths are mounted, and in which order."""

from __future__ import annotations

from pathlib import Path

from orchestra._sandbox import bwrap_arguments, describe_mounts, plan_mounts
from orchestra._sandbox._mounts import MAX_EXIST_MOUNTS

ROOT = Path("/p")
FORGE = ROOT / ".forge"
INBOX = FORGE / "changes/c/inbox"


def test_each_mount_is_kept_only_where_it_protects_something() -> None:
    mounts = plan_mounts(
        workdir=ROOT,
        forge_dir=FORGE,
        writable=[INBOX],
        frozen=[ROOT / "policies", ROOT / "policies/a.toml", ROOT / "forge.toml", FORGE / "x"],
        exist=[ROOT / "specs", ROOT / "specs/a.md", ROOT / "policies/b.toml", FORGE / "y"],
    )
    # Inside a frozen folder, or already read-only under .forge/: nothing to add.
    assert mounts.frozen == (ROOT / "forge.toml", ROOT / "policies")
    assert mounts.exist == (ROOT / "specs", ROOT / "specs/a.md")
    assert mounts.read_only == (FORGE,)
    assert mounts.writable == (INBOX,)


def test_a_worktree_under_forge_is_writable_and_its_paths_are_mounted() -> None:
    tree = FORGE / "worktrees/c"
    mounts = plan_mounts(
        workdir=tree,
        forge_dir=FORGE,
        writable=[INBOX, tree],
        frozen=[tree / "forge.toml"],
        exist=[tree / "AGENTS.md"],
    )
    assert mounts.frozen == (tree / "forge.toml",)
    assert mounts.exist == (tree / "AGENTS.md",)


def test_the_arguments_lay_each_mount_over_the_ones_before() -> None:
    mounts = plan_mounts(
        workdir=ROOT,
        forge_dir=FORGE,
        writable=[INBOX],
        frozen=[ROOT / "specs/frozen.md"],
        exist=[ROOT / "specs"],
    )
    assert bwrap_arguments("/usr/bin/bwrap", mounts) == (
        "/usr/bin/bwrap",
        "--dev-bind", "/", "/",
        "--ro-bind", "/p/.forge", "/p/.forge",
        "--bind", "/p/.forge/changes/c/inbox", "/p/.forge/changes/c/inbox",
        "--bind", "/p/specs", "/p/specs",
        "--ro-bind", "/p/specs/frozen.md", "/p/specs/frozen.md",
        "--chdir", "/p",
        "--",
    )  # fmt: skip


def test_past_the_cap_the_rest_is_left_to_the_check() -> None:
    many = [ROOT / f"specs/{n:05d}.md" for n in range(MAX_EXIST_MOUNTS + 3)]
    mounts = plan_mounts(workdir=ROOT, forge_dir=FORGE, writable=[INBOX], frozen=[], exist=many)
    assert len(mounts.exist) == MAX_EXIST_MOUNTS
    assert mounts.left_to_check == 3
    assert describe_mounts(mounts) == (
        f"bubblewrap — 0 frozen paths read-only, {MAX_EXIST_MOUNTS} exist paths undeletable "
        "(3 more left to the check after each iteration); .forge read-only (but the change's "
        "inbox)"
    )
