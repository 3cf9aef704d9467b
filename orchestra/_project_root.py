"""Where a project is: its root folder and its policy file, as every forge command finds them.

The agent hooks look this up on every tool call of an agent, so it works on
strings with :mod:`os` alone (no :mod:`pathlib`, nothing of Forge's);
:func:`orchestra._workspace.find_project` wraps it for the other commands.
"""

from __future__ import annotations

import os

CONFIG_NAME = "forge.toml"


def find_root(start: str, config: str | None = None) -> tuple[str, str | None]:
    """The project root and its policy file (None: the project runs on built-in defaults).

    With an explicit ``config``, its folder is the root (whether the file
    exists is the caller's to check). Otherwise the root is the nearest folder
    at or above ``start`` that holds a ``forge.toml``; the search stops at the
    top of a git repository, which is then the root with no policy file, and
    with neither it is ``start`` itself. Paths come back absolute, with
    symlinks resolved.
    """
    if config is not None:
        config = os.path.realpath(config)
        return os.path.dirname(config), config
    start = os.path.realpath(start)
    folder = start
    while True:
        candidate = os.path.join(folder, CONFIG_NAME)
        if os.path.isfile(candidate):
            return folder, candidate
        if os.path.exists(os.path.join(folder, ".git")):
            return folder, None
        parent = os.path.dirname(folder)
        if parent == folder:
            return start, None
        folder = parent
