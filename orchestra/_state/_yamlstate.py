"""YAML state files: read strictly, written atomically, moved aside when corrupt.

PyYAML and the state converter are imported when a file is written, or read
in a form other than the flat one forge writes (see ``_flatyaml``): the
commands that only read state (``forge status``) start without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from .._errors import CorruptStateError
from ._files import atomic_write, atomic_write_many, move_aside, read_state_bytes
from ._flatyaml import parse_flat, structure_flat

_T = TypeVar("_T")


def load_state(path: Path, cls: type[_T]) -> _T | None:
    """Read a state file, or None when it does not exist yet.

    Call with the change's lock held: a corrupt file is moved aside here.

    Raises:
        CorruptStateError: the file did not parse or did not fit ``cls``; it has
            been renamed to ``<name>.corrupt-<timestamp>`` for a human to inspect.
        StateError: the file exists but cannot be read at all.
    """
    raw = read_state_bytes(path)
    if raw is None:
        return None
    try:
        flat = parse_flat(raw.decode("utf-8"))
    except UnicodeDecodeError:
        flat = None
    if flat is not None:
        state = structure_flat(flat, cls)
        if state is not None:
            return state
    # Anything else, and every problem a corrupt file has, the full way.
    import yaml
    from cattrs.errors import BaseValidationError

    from ._converter import STATE_CONVERTER

    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when built with it
        data: Any = yaml.load(raw.decode("utf-8"), Loader=loader)  # a safe loader
        if not isinstance(data, dict):
            raise ValueError(f"expected a mapping, found {type(data).__name__}")
        return STATE_CONVERTER.structure(data, cls)
    except (
        yaml.YAMLError,
        UnicodeDecodeError,
        ValueError,
        TypeError,
        RecursionError,
        BaseValidationError,
    ) as exc:
        reason = _describe(exc)
        moved = move_aside(path)
        raise CorruptStateError(
            f"state file {path.name} is corrupt ({reason})",
            path=str(path),
            moved_to=str(moved),
        ) from exc


def save_state(path: Path, state: object, *, journal: bool = True) -> None:
    """Write a state file atomically, keys in the order the class declares them.

    ``journal=False`` for a reset made from inside an agent's iteration (see
    ``atomic_write`` and ``run_by_a_person``).
    """
    atomic_write(path, render_state(state), journal=journal)


def save_states(states: list[tuple[Path, object]]) -> None:
    """:func:`save_state` for several files of one folder, renamed into place together."""
    atomic_write_many([(path, render_state(state)) for path, state in states], journal=True)


def render_state(state: object) -> bytes:
    """A state file's bytes: YAML, keys in the order the class declares them."""
    import yaml

    from ._converter import STATE_CONVERTER

    data = STATE_CONVERTER.unstructure(state)
    # libyaml's dumper when PyYAML was built with it: the same documents,
    # several times faster on a path every iteration takes.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(
        data, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False
    )
    return text.encode("utf-8")


def _describe(exc: BaseException) -> str:
    from cattrs.errors import BaseValidationError

    if isinstance(exc, BaseValidationError):
        leaves = [str(sub) for sub in exc.exceptions]
        return "; ".join(leaves)[:200] or str(exc)
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return first[:200]
