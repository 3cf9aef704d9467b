"""Other changes' state, guarded by one loop's check without walking their folders.

Every change keeps its state in ``.forge/changes/<change>/`` of one checkout,
and under ``[supervise] worktrees = "auto"`` many loops run against that one
folder. A loop's agent must not clear another change's open breaker or spent
budget, nor cut its timeline: so each loop's check records the other
changes' state files too, but only those, by name. It lists
``.forge/changes/`` itself (which changes exist) and never lists inside a
change's folder: its ``runs/`` (a log per iteration), its ``protect/``
snapshots and its lock and journal files cost nothing, and neither does
anything else another loop keeps there (its worktree lives elsewhere, under
``.forge/worktrees/``).

What the manifest then does with these paths is what it does with the loop's
own state: a file whose stat is unchanged keeps its hash (a stat, not a
read), a changed one is hashed and its snapshot kept, and after the
iteration a change that is not Forge's own journalled write, or a timeline
that did more than grow, is put back and stops the loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import attrs

from ._spec import CHANGES, FORGE_STATE_FILES, FROZEN, GROWS, TIMELINE
from ._walk import _climbs_a_link

# Each change's files: frozen, then its append-only timeline.
_FILES = (*((name, FROZEN) for name in FORGE_STATE_FILES), (TIMELINE, GROWS))


@attrs.frozen
class OtherChanges:
    """The state files of every change under ``base`` but ``own``."""

    reads: ClassVar[bool] = True

    base: Path
    own: str
    fold: bool = False

    def walk(self) -> Iterator[tuple[str, str, str]]:
        """(absolute path, display name, protection) of each other change's state file.

        A name is given whether or not the file exists (the manifest's stat
        tells); a file reached through a symlinked folder is not, so that it
        shows as gone and the restore moves the link aside, as for a walk.
        """
        folder = os.path.join(self.base, CHANGES)
        if os.path.islink(os.path.join(self.base, ".forge")) or os.path.islink(folder):
            return
        own = self.own.casefold() if self.fold else self.own
        try:
            with os.scandir(folder) as listing:
                changes = sorted(
                    (entry.name, entry.path)
                    for entry in listing
                    if entry.is_dir(follow_symlinks=False)
                )
        except OSError:
            return
        for name, path in changes:
            if (name.casefold() if self.fold else name) == own:
                continue
            for file, mode in _FILES:
                if "/" in file and _climbs_a_link(path, file):
                    continue
                yield os.path.join(path, file), f"{CHANGES}/{name}/{file}", mode
