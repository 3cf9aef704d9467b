"""Reading a gate's state file so that corruption blocks the gate instead of resetting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import attrs

from .._errors import CorruptStateError
from ._change import ChangePaths
from ._timeline import append_event
from ._yamlstate import load_state, save_state

_T = TypeVar("_T")


def load_or_block(
    paths: ChangePaths, path: Path, cls: type[_T], fresh: _T
) -> tuple[_T, CorruptStateError | None]:
    """The state in ``path``, ``fresh`` when there is none yet, or a blocked state.

    Call with the change's lock held. A corrupt file is moved aside (by
    :func:`load_state`), replaced by ``fresh`` with its ``blocked`` field naming
    the moved file, and recorded in the timeline as ``state.corrupt``: the
    gate that reads it stays shut until a human clears it.
    """
    try:
        state = load_state(path, cls)
    except CorruptStateError as exc:
        moved = Path(exc.moved_to).name
        blocked: Any = attrs.evolve(fresh, blocked=f"moved aside to {moved}")  # type: ignore[misc]  # every guarded state class has a blocked field
        save_state(path, blocked)
        from ._events import StateCorrupt  # only when a file was corrupt

        append_event(
            paths.timeline,
            paths.name,
            StateCorrupt(file=path.name, moved_to=moved, reason=exc.message),
        )
        return blocked, exc
    return (state if state is not None else fresh), None
