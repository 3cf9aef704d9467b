"""Loops that would share one working tree, and what the supervisor does about them.

Two loops editing the same folder corrupt each other's measurements: one loop's
edits look like the other's progress, and stagnation never trips. A folder is
shared when two loops resolve to it (their ``dir``, or the project root) and
neither works in a worktree of its own. By default the supervisor refuses to
start them; ``[supervise] worktrees = "auto"`` gives each its own worktree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from .._errors import ConfigError
from ._loop_tables import LoopSetup

AUTO = "auto"

SHARED_TREE_FIX = (
    "set worktree = true on all but one of them, or give each its own dir "
    '(or set [supervise] worktrees = "auto" to give each its own worktree)'
)


@attrs.frozen
class SharedTree:
    """A folder more than one loop would edit without a worktree."""

    root: Path
    loops: tuple[LoopSetup, ...]

    def describe(self) -> str:
        """The loops and their folder, in one line."""
        names = ", ".join(f"{loop.change} ({loop.source})" for loop in self.loops)
        return f"loops {names} share the working tree {self.root} without worktrees"


def shared_trees(setups: Sequence[LoopSetup]) -> list[SharedTree]:
    """Every folder that two or more of ``setups`` would edit, in declared order."""
    by_root: dict[Path, list[LoopSetup]] = {}
    for setup in setups:
        if not setup.worktree:
            by_root.setdefault(setup.root, []).append(setup)
    return [SharedTree(root, tuple(loops)) for root, loops in by_root.items() if len(loops) > 1]


def separate_trees(setups: Sequence[LoopSetup], mode: str) -> tuple[list[LoopSetup], list[str]]:
    """The loops as they will run, and a note for each shared folder given worktrees.

    With ``mode`` ``"auto"`` every loop of a shared folder gets its own
    worktree; otherwise a shared folder is refused.

    Raises:
        ConfigError: two or more loops on one working tree, naming them and the fix.
    """
    shared = shared_trees(setups)
    if not shared:
        return list(setups), []
    if mode != AUTO:
        raise ConfigError(
            "two loops cannot share one working tree",
            problems=[
                f"{tree.describe()}: one loop's edits would count as another's progress"
                for tree in shared
            ],
            hint=SHARED_TREE_FIX,
        )
    moved = {id(loop) for tree in shared for loop in tree.loops}
    notes = [
        f'{tree.describe()}: each gets its own worktree ([supervise] worktrees = "auto")'
        for tree in shared
    ]
    return [attrs.evolve(s, worktree=True) if id(s) in moved else s for s in setups], notes
