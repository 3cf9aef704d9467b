"""``.forge/.gitignore``: the state folder keeps its runtime files out of the project's commits.

Forge writes the file the first time it writes state and finds it missing, and
never rewrites one that is there: a project that wants other rules edits it.
What stays committable is the state a teammate or a later checkout reads (the
breaker, the circuit, the spend, the loop contract, the timeline, the status
log, the trusted allow markers and the waivers); what is ignored is what only
a running Forge uses: worktrees (each a repository of its own), caches, raw
iteration logs, batch folders, sqlite databases, locks and temporary files.

This module runs under every state write: it imports little beyond ``os``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

STATE_DIR = ".forge"
GITIGNORE = ".gitignore"

IGNORE_RULES = """\
# Written by Forge: what under .forge/ stays out of git. Edit it freely; Forge
# writes it only when it is missing. Left committable: each change's
# verify-attempts.yaml, breaker.yaml, spend.yaml, checkpoint.json,
# timeline.jsonl, status.md and secscan-markers.json, and secscan-waivers.yaml.
/worktrees/
/cache/
/runs/
/changes/*/runs/
/changes/*/protect/
/changes/*/shell-guard/
/junit.xml
*.sqlite3
*.sqlite3-*
.lock
*.lock
.forge-writes
.forge-lines
/changes/*/commits.journal
.*.tmp
"""


@functools.lru_cache(maxsize=1024)
def state_dir_of(path: Path) -> Path | None:
    """The ``.forge`` folder ``path`` lies in (the nearest one), or None."""
    # Asked on every state write, for a handful of folders: kept per folder.
    parts = path.parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] == STATE_DIR:
            return Path(*parts[: index + 1])
    return None


def keep_out_of_git(folder: Path) -> None:
    """Write ``.forge/.gitignore`` for the state folder ``folder`` lies in, when it has none.

    Called where Forge creates folders and files under ``.forge/``, after the
    folder exists. Best effort: a folder Forge cannot write fails the write that
    follows, with its own message. The file appears whole or not at all (it is
    linked into place from a temporary file), and one already there, even one
    a person emptied, is left as it is.
    """
    state_dir = state_dir_of(folder)
    if state_dir is None:
        return
    target = state_dir / GITIGNORE
    if os.path.lexists(target):
        return
    temporary = state_dir / f".{GITIGNORE}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(IGNORE_RULES)
        with contextlib.suppress(FileExistsError):  # another forge process was first
            os.link(temporary, target)
    except OSError:
        return
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
