"""The Forge projects a command reaches by absolute path, beyond the one it runs in.

A hook knows its project from ``CLAUDE_PROJECT_DIR`` or the event's working
folder. Without the first, an agent whose working folder lies outside the
project (or a host that sends none) would have the guard judge
``rm /work/app/forge.toml`` against the wrong tree — or none — and let it
through. So the guard also judges a command against every project one of its
absolute paths lies in: the nearest folder above the path that holds a
``forge.toml``, the way every forge command finds its project.

This runs on every tool call of an agent that names an absolute path: it
imports only :mod:`os`, :mod:`re` and :mod:`orchestra._project_root`.
"""

from __future__ import annotations

import os
import re

from .._project_root import find_root

MAX_PATHS = 32
"""The distinct absolute paths of one command looked up; the rest are not."""

# An absolute path: a / at the start of a word (or after = or a quote), up to the
# shell's next special character.
_ABSOLUTE = re.compile(r"(?:^|(?<=[\s'\"=:(<>;|&`]))/[^\s'\"`;|&<>()$]*")


def projects_named(text: str, *, besides: str) -> list[tuple[str, str]]:
    """(root, its forge.toml) of each project an absolute path in ``text`` lies in.

    Args:
        text: a shell command, or the path a file tool writes.
        besides: the root already judged (left out).
    """
    found: dict[str, str] = {}
    paths = dict.fromkeys(match.group() for match in _ABSOLUTE.finditer(text))
    for path in list(paths)[:MAX_PATHS]:
        folder = _existing_folder(path)
        if folder is None:
            continue
        root, config = find_root(folder)
        if config is not None and root != besides:
            found.setdefault(root, config)
    return list(found.items())


def _existing_folder(path: str) -> str | None:
    """The deepest folder of ``path`` (or above it) that exists."""
    folder = os.path.normpath(path)
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return folder
