"""Who runs a person's control, for the timeline: ``user@host``."""

from __future__ import annotations

import getpass
import socket


def operator() -> str:
    """The person running this command, as ``user@host`` (``unknown`` for a nameless uid)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
