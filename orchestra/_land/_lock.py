"""One land run at a time in a project: two would share the scratch tree and the journal."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from .._errors import UsageError
from .._state import STATE_DIR


@contextlib.contextmanager
def land_run(root: Path) -> Iterator[None]:
    """Hold ``.forge/land/run.lock`` for a whole land run.

    The kernel drops the lock when the process dies, so a killed run never
    blocks the next one; the descriptor is not inherited by the verify and
    agent processes a run starts.

    Raises:
        UsageError: another land run in this project holds it.
    """
    path = root / STATE_DIR / "land" / "run.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(
                "another forge land is running in this project",
                hint="let it finish (or stop it), then forge land again",
            ) from None
        yield
    finally:
        os.close(fd)
