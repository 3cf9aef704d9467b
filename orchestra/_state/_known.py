"""Whether a change exists yet, so that a mistyped name never starts a phantom change.

A change starts when a command that begins one (``forge run``, ``forge verify
--change``, ``forge loop start``, ``forge supervise``) first writes its state.
Every other command that names a change, to update it or to read it, asks
:func:`require_change` first: on a name with no state it refuses (exit 2)
before it takes the change's lock, which would create the folder.
"""

from __future__ import annotations

from .._errors import UsageError
from ._change import ChangePaths, list_changes

# What a change that has begun keeps in its folder: any one of these, or a
# corrupt one moved aside (``<name>.corrupt-<stamp>``), is evidence of state.
STATE_FILE_NAMES = (
    "timeline.jsonl",
    "verify-attempts.yaml",
    "breaker.yaml",
    "spend.yaml",
    "secscan-markers.json",
    "checkpoint.json",
)

# Shown in a refusal; longer lists are cut, with the count of the rest.
_KNOWN_SHOWN = 20


def has_state(paths: ChangePaths) -> bool:
    """Whether the change has begun: its folder holds a state file or its timeline."""
    folder = paths.folder
    try:
        names = {entry.name for entry in folder.iterdir()}
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        # An unreadable folder exists: the command that reads it reports why.
        return True
    return any(
        name in names or any(n.startswith(f"{name}.corrupt-") for n in names)
        for name in STATE_FILE_NAMES
    )


def require_change(paths: ChangePaths, command: str) -> ChangePaths:
    """``paths`` when the change has state; otherwise refuse ``command`` on it.

    Args:
        paths: The change named on the command line.
        command: The command as the person typed it, for the message
            (``"forge spend --reset"``).

    Raises:
        UsageError: (exit 2) naming the change and the changes that exist.
    """
    if has_state(paths):
        return paths
    known = [name for name in list_changes(paths.root) if has_state(ChangePaths(paths.root, name))]
    if known:
        shown = ", ".join(known[:_KNOWN_SHOWN])
        if len(known) > _KNOWN_SHOWN:
            shown += f" (and {len(known) - _KNOWN_SHOWN} more)"
        context = [f"known changes: {shown}"]
    else:
        context = ["known changes: none yet"]
    raise UsageError(
        f'{command}: no change "{paths.name}" — nothing recorded under '
        f".forge/changes/{paths.name}/",
        context=context,
        hint="check the name (forge status lists the changes); a change begins with "
        "forge run, forge verify --change, forge loop start or forge supervise",
    )
