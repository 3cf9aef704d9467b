"""A stream whose reader has gone: what both the plain and the rich writers do then."""

from __future__ import annotations

import os
from typing import Any


def to_devnull(stream: Any) -> None:
    """Send the rest of a stream's output to /dev/null: its reader has gone."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)
