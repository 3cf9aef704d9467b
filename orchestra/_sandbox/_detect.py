"""Whether bubblewrap can sandbox an executor on this machine: found, and tried once.

Finding ``bwrap`` on ``PATH`` is not enough: a kernel without unprivileged
user namespaces, or a container that forbids mounts, makes it fail at every
start. So the first question of a process runs it once, on ``true``, and the
answer is kept for the rest of the process.
"""

from __future__ import annotations

import functools
import shutil
import subprocess

import attrs

BWRAP = "bwrap"
_PROBE_SECONDS = 10.0


@attrs.frozen
class Availability:
    """bubblewrap on this machine: its path when it works, else why not."""

    path: str | None
    reason: str = ""

    @property
    def works(self) -> bool:
        return self.path is not None


def probe_bubblewrap(program: str = BWRAP) -> Availability:
    """Look ``program`` up on ``PATH`` and start it once around ``true``."""
    path = shutil.which(program)
    if path is None:
        return Availability(None, "bubblewrap not found")
    try:
        done = subprocess.run(
            [path, "--dev-bind", "/", "/", "true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Availability(None, f"bubblewrap does not start: {exc}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = said[-1] if said else f"exit {done.returncode}"
        return Availability(None, f"bubblewrap does not work here: {detail}")
    return Availability(path)


@functools.cache
def bubblewrap() -> Availability:
    """:func:`probe_bubblewrap`, asked once per process."""
    return probe_bubblewrap()
