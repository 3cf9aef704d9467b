"""The inbox: the one folder of Forge's state an agent in the sandbox may write.

``.forge/changes/<change>/inbox/`` stays writable inside the sandbox. What the
agent legitimately hands Forge (its ``$FORGE_REPORT``, and the requests of
``forge checkpoint`` and ``forge event``, sandboxed or not) goes there; Forge
reads it after the iteration and empties the folder, so nothing an agent left
there outlives its iteration.

Each run has a folder of its own in it, ``inbox/<run id>/``: two runs of one
change at once (a ``forge run`` beside a supervised loop) each read and empty
only their own, so neither loses the other's report.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

INBOX = "inbox"


def inbox_of(state_folder: Path) -> Path:
    """The inbox of the change whose state is in ``state_folder``."""
    return state_folder / INBOX


def run_inbox(state_folder: Path, run_id: str) -> Path:
    """The inbox folder of one run of the change: ``inbox/<run id>/``."""
    return inbox_of(state_folder) / run_id


def empty_inbox(inbox: Path, *, create: bool = True) -> None:
    """Remove what is in ``inbox`` (links, not their targets); create it if missing and asked."""
    if create:
        inbox.mkdir(parents=True, exist_ok=True)
    elif not inbox.is_dir():
        return
    with os.scandir(inbox) as entries:
        for entry in entries:
            path = Path(entry.path)
            with contextlib.suppress(FileNotFoundError):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(path)
                else:
                    path.unlink()
