"""Change names: the one rule that keeps a name inside its state folder.

Kept free of heavy imports: every command that takes a change name loads it.
"""

from __future__ import annotations

import re

from ._errors import UsageError

CHANGE_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def check_change_name(name: str) -> str:
    """Return ``name`` when it is a valid change name.

    A change name becomes a folder name, so it is held to
    ``[a-z0-9][a-z0-9._-]{0,63}``: it can never climb out of ``.forge/changes/``.

    Raises:
        UsageError: naming the rule the name breaks.
    """
    if not CHANGE_NAME.fullmatch(name):
        raise UsageError(
            f"invalid change name {name!r}",
            hint="a change name is 1-64 characters of a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit",
        )
    return name
