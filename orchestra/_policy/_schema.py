"""Strict reading of TOML tables into attrs classes, with errors that name file and key.

Shared by everything a person writes in TOML: policies, executor definitions,
batch files. Unknown keys are reported with a "did you mean"; values that do
not fit are reported with their dotted key and what was expected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import attrs
from cattrs.errors import (
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

from .._errors import ConfigError
from ._converter import POLICY_CONVERTER
from ._fields import FieldError
from ._model import is_table

_T = TypeVar("_T", bound=attrs.AttrsInstance)
_UNKNOWN = "unknown key"


def unknown_keys(
    data: Mapping[str, Any],
    cls: type,
    source: str,
    *,
    prefix: str = "",
    top_level: frozenset[str] = frozenset(),
    hidden: frozenset[str] = frozenset(),
    table: str = "the top level",
) -> Iterator[str]:
    """Keys that ``data`` names and ``cls`` does not have, each with a suggestion.

    Args:
        top_level: Extra keys allowed at the top (``extends`` in a policy).
        hidden: Fields of ``cls`` that a file may not set.
        table: What ``data`` is, as an unknown top key's message names it.
    """
    fields = {field.name: field for field in attrs.fields(cls) if field.name not in hidden}
    allowed = set(fields) | (set(top_level) if not prefix else set())
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in allowed:
            import difflib  # only for a mistake: a valid policy loads without it

            suggestion = difflib.get_close_matches(key, sorted(allowed), n=1, cutoff=0.6)
            where = f"[{prefix[:-1]}]" if prefix else table
            known = ", ".join(sorted(allowed))
            hint = f"did you mean {suggestion[0]!r}?" if suggestion else f"known keys: {known}"
            yield f"{source}: {dotted}: unknown key in {where}; {hint}"
            continue
        if key not in fields:
            continue
        field_type = fields[key].type
        if is_table(field_type):
            if isinstance(value, Mapping):
                yield from unknown_keys(value, field_type, source, prefix=f"{dotted}.")
            else:
                yield f"{source}: {dotted}: expected a table [{dotted}], got {value!r}"


def validation_problems(exc: BaseValidationError, source_of: Callable[[str], str]) -> list[str]:
    """One line per invalid value: ``<source>: <dotted.key>: <what was expected>``."""
    problems = []
    for path, message in _walk(exc, ()):
        if message == _UNKNOWN:
            continue  # reported by unknown_keys, with a suggestion
        dotted = ".".join(path).replace(".[", "[")
        problems.append(f"{source_of(dotted)}: {dotted or '(file)'}: {message}")
    return problems


def structure_file(
    data: Mapping[str, Any],
    cls: type[_T],
    source: str,
    *,
    hidden: frozenset[str] = frozenset(),
    table: str = "the top level",
) -> _T:
    """Structure one file's data into ``cls``, or raise ConfigError listing every problem.

    ``table`` names what ``data`` is in an unknown key's message.
    """
    problems = list(unknown_keys(data, cls, source, hidden=hidden, table=table))
    known = {field.name for field in attrs.fields(cls) if field.name not in hidden}
    try:
        # Unknown keys are already reported; leave them out so values are checked too.
        value = POLICY_CONVERTER.structure({k: v for k, v in data.items() if k in known}, cls)
    except BaseValidationError as exc:
        problems.extend(validation_problems(exc, lambda _dotted: source))
        value = None
    if problems or value is None:
        raise ConfigError(f"{source} is invalid", problems=problems)
    return value


def _walk(exc: BaseException, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    """Flatten cattrs' nested exception groups into (key path, message) pairs."""
    if isinstance(exc, ClassValidationError):
        with_notes, without_notes = exc.group_exceptions()
        for sub, note in with_notes:
            yield from _walk(sub, (*path, note.name))
        for sub in without_notes:
            yield from _walk(sub, path)
    elif isinstance(exc, IterableValidationError):
        with_index, rest = exc.group_exceptions()
        for sub, index_note in with_index:
            yield from _walk(sub, (*path, f"[{index_note.index}]"))
        for sub in rest:
            yield from _walk(sub, path)
    elif isinstance(exc, ForbiddenExtraKeysError):
        for key in sorted(exc.extra_fields):
            yield (*path, key), _UNKNOWN
    elif isinstance(exc, FieldError):
        yield (*path, exc.field), exc.describe()
    elif isinstance(exc, KeyError) and path:
        # cattrs says a required key is missing with a bare KeyError('<key>').
        yield path, "required, and not set"
    else:
        yield path, str(exc)
